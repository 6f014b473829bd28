package gen

import "slices"

// BasicSeed is the seed of segment 0 of a benchmark on the basic schema;
// segment i uses BasicSeed+i.
const BasicSeed = 9999

// basicSpecs is Druid's "basic" benchmark schema, column for column.
// Ranges are half-open [start, end), as in Druid's generator.
func basicSpecs() []spec {
	return []spec{
		// dimensions
		sequential("dimSequential", String, 0, 1000),
		zipf("dimZipf", String, 1, 101, 1.0),
		uniform("dimUniform", String, 1, 100000),
		sequential("dimSequentialHalfNull", String, 0, 1000).nulls(0.5),
		enumerated("dimMultivalEnumerated",
			[]string{"Hello", "World", "Foo", "Bar", "Baz"},
			[]float64{0.2, 0.25, 0.15, 0.10, 0.3}).multi(4),
		enumerated("dimMultivalEnumerated2",
			[]string{"Apple", "Orange", "Xylophone", "Corundum", enumNull},
			[]float64{0.2, 0.25, 0.15, 0.10, 0.3}).multi(3),
		sequential("dimMultivalSequentialWithNulls", String, 1, 11).multi(8).nulls(0.15),
		sequential("dimHyperUnique", String, 0, 100000),
		sequential("dimNull", String, 0, 1).nulls(1.0),
		// metrics
		sequential("metLongSequential", Long, 0, 10000),
		uniform("metLongUniform", Long, 0, 500),
		roundedNormal("metFloatNormal", Double, 5000, 1.0),
		zipf("metFloatZipf", Double, 0, 1000, 1.0),
	}
}

var basicAggregators = []Column{
	{Name: "rows", Kind: Long, Slot: -1, Aggregator: AggCount},
	{Name: "sumLongSequential", Kind: Long, Slot: -1, Aggregator: AggLongSum, Source: "metLongSequential"},
	{Name: "maxLongUniform", Kind: Long, Slot: -1, Aggregator: AggLongMax, Source: "metLongUniform"},
	{Name: "sumFloatNormal", Kind: Double, Slot: -1, Aggregator: AggDoubleSum, Source: "metFloatNormal"},
	{Name: "minFloatZipf", Kind: Double, Slot: -1, Aggregator: AggDoubleMin, Source: "metFloatZipf"},
	{Name: "hyper", Kind: Sketch, Slot: -1, Aggregator: AggHyperUnique, Source: "dimHyperUnique"},
}

// genBase is what every generator keeps and answers the same way: its columns, the rows it
// makes, its clock and the row it is at.
type genBase struct {
	schema []Column
	aggs   []Column
	cols   []colState
	clock  clock
	rows   int
	i      int
}

func (g *genBase) Schema() []Column      { return slices.Clone(g.schema) }
func (g *genBase) Aggregators() []Column { return slices.Clone(g.aggs) }
func (g *genBase) Rows() int             { return g.rows }

func (g *genBase) Interval() (start, end int64) {
	return g.clock.start, g.clock.start + int64(g.clock.span)
}

// tableGen generates rows from a list of column specs.
type tableGen struct {
	genBase
	nStr  int
	nLong int
	nDbl  int
}

func newTableGen(specs []spec, aggs []Column, seed int64, rows int, tr TimeRange) *tableGen {
	g := &tableGen{genBase: genBase{aggs: aggs, rows: rows}}
	g.schema = append(g.schema, Column{Name: "__time", Kind: Time})
	for k, s := range specs {
		var slot int
		switch s.kind {
		case String:
			slot, g.nStr = g.nStr, g.nStr+1
		case Long:
			slot, g.nLong = g.nLong, g.nLong+1
		case Double:
			slot, g.nDbl = g.nDbl, g.nDbl+1
		case Time, Sketch: // no spec has these: __time is the clock, a sketch an aggregator's kind
		}
		g.schema = append(g.schema, s.column(slot))
		g.cols = append(g.cols, newColState(s, slot, seed, uint64(k)+1))
	}
	g.clock = newClock(tr, uint64(rows), seed)
	return g
}

// Basic returns a generator of rows rows of Druid's "basic" benchmark
// schema, seeded by seed (segment i of a benchmark uses BasicSeed+i).
//
// Columns, in Schema order (ranges half-open, [start, end)):
//
//	__time                          2000-01-01T00:00Z + [0, 1 day), non-decreasing
//	                                (BasicWith: BasicOptions.Time)
//	dimSequential                   "0".."999" in turn
//	dimZipf                         "1".."100", Zipf exponent 1.0 ("1" most frequent)
//	dimUniform                      "1".."99999" uniform
//	dimSequentialHalfNull           "0".."999" in turn, null with p 0.5
//	dimMultivalEnumerated           4 values, each Hello .2, World .25, Foo .15, Bar .10, Baz .3
//	dimMultivalEnumerated2          3 values, each Apple .2, Orange .25, Xylophone .15, Corundum .10, null .3
//	dimMultivalSequentialWithNulls  8 values "1".."10" in turn; the whole row null with p 0.15
//	dimHyperUnique                  "0".."99999" in turn
//	dimNull                         always null
//	metLongSequential (Long)        0..9999 in turn
//	metLongUniform (Long)           0..499 uniform
//	metFloatNormal (Double)         round(normal(5000, 1))
//	metFloatZipf (Double)           0..999, Zipf exponent 1.0 (0 most frequent)
//
// Aggregators: rows = count, sumLongSequential = longSum(metLongSequential),
// maxLongUniform = longMax(metLongUniform), sumFloatNormal =
// doubleSum(metFloatNormal), minFloatZipf = doubleMin(metFloatZipf),
// hyper = hyperUnique(dimHyperUnique).
//
// A negative row count or one above MaxRows is an error wrapping ErrInvalid.
func Basic(seed int64, rows int) (Generator, error) {
	return BasicWith(seed, rows, BasicOptions{})
}

// BasicOptions configures BasicWith. The zero value is the default, Basic's.
type BasicOptions struct {
	// Time is the interval of the rows' times; the zero TimeRange is one
	// day from Start2000.
	Time TimeRange
}

// BasicWith is Basic with options: Basic(seed, rows) is BasicWith(seed,
// rows, BasicOptions{}). Only the rows' times depend on opts.Time: the
// other columns are Basic's, value for value.
//
// A bad row count or option is an error wrapping ErrInvalid.
func BasicWith(seed int64, rows int, opts BasicOptions) (Generator, error) {
	if err := checkRows("basic", rows); err != nil {
		return nil, err
	}
	if err := opts.Time.ensureDefaults("basic"); err != nil {
		return nil, err
	}
	return newTableGen(basicSpecs(), basicAggregators, seed, rows, opts.Time), nil
}

func (g *tableGen) Next(r *Row) bool {
	if g.i >= g.rows {
		return false
	}
	r.shape(g.nStr, g.nLong, g.nDbl)
	r.Time = g.clock.at(uint64(g.i))
	for k := range g.cols {
		g.cols[k].fill(r)
	}
	g.i++
	return true
}
