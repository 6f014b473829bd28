package agg

// The aggregators' names, as a schema spells them (columns.Metric.Aggregator takes them as
// they are). Each is the Name of one entry of the table All returns.
const (
	Count       = "count"
	LongSum     = "longSum"
	LongMin     = "longMin"
	LongMax     = "longMax"
	LongFirst   = "longFirst"
	LongLast    = "longLast"
	DoubleSum   = "doubleSum"
	DoubleMin   = "doubleMin"
	DoubleMax   = "doubleMax"
	DoubleFirst = "doubleFirst"
	DoubleLast  = "doubleLast"
	HyperUnique = "hyperUnique"
)
