package columns

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/suggest"
)

// TimeColumn is the name of the time column every segment has: int64 milliseconds since the
// epoch. No dimension or metric may use it.
const TimeColumn = "__time"

// Schema describes the columns of a segment besides __time. It serializes to JSON in the shape
// a Druid user recognises:
//
//	{"dimensions":[{"name":"page","type":"string","multiValue":false,"raw":false}],
//	 "metrics":[{"name":"added","type":"long","aggregator":"longSum"}],
//	 "rollup":true,"granularity":"hour"}
//
// Column order is significant: a segment's parts and its rows' dimension values follow it.
type Schema struct {
	Dimensions  []Dimension `json:"dimensions"`
	Metrics     []Metric    `json:"metrics"`
	Rollup      bool        `json:"rollup"`
	Granularity Granularity `json:"granularity"`
}

// DimensionType is the type of a dimension's values. Only strings exist today.
type DimensionType string

// The dimension types. The empty type means string.
const (
	DimString DimensionType = "string"
)

// Dimension is a string column. A dictionary dimension (the default) stores a sorted dictionary,
// bit-packed ids per row and, unless NoBitmapIndex, one roaring bitmap per value; a raw one
// stores the strings themselves in compressed chunks, for long payloads. Any dimension may be
// null in a row; a multi-value dimension holds a list of values per row.
type Dimension struct {
	Name          string        `json:"name"`
	Type          DimensionType `json:"type,omitempty"`
	MultiValue    bool          `json:"multiValue"`
	Raw           bool          `json:"raw"`
	NoBitmapIndex bool          `json:"noBitmapIndex,omitempty"`
}

// MetricType is the type of a metric's values.
type MetricType string

// The metric types. A sketch aggregator's metrics are of its own type, its name (hyperUnique:
// MetricHyperUnique), and store one serialized sketch per row (see sketch.go).
const (
	MetricLong        MetricType = "long"
	MetricDouble      MetricType = "double"
	MetricHyperUnique MetricType = "hyperUnique"
)

// Aggregator names how a metric combines rows under rollup and in queries. What each one
// does is defined in one place, package columns/agg; Spec returns its entry there.
type Aggregator string

// aggregators lists every aggregator, in columns/agg's table order.
var aggregators = func() []Aggregator {
	all := agg.All()
	out := make([]Aggregator, len(all))
	for i, a := range all {
		out[i] = Aggregator(a.Name)
	}
	return out
}()

// Spec returns the aggregator's entry in columns/agg's table, and false for an unknown name.
func (a Aggregator) Spec() (agg.Agg, bool) { return agg.Lookup(string(a)) }

// valueType returns the metric type an aggregator works on, or "" for an unknown aggregator.
func (a Aggregator) valueType() MetricType {
	s, ok := a.Spec()
	if !ok {
		return ""
	}
	if s.Type == agg.SketchType {
		return MetricType(s.Name) // a sketch aggregator's values are its own type
	}
	return metricType(s.Type)
}

func metricType(t agg.Type) MetricType {
	switch t {
	case agg.Long:
		return MetricLong
	case agg.Double:
		return MetricDouble
	case agg.SketchType:
		return MetricHyperUnique
	}
	return ""
}

// Metric is a numeric or sketch column with the aggregator that combines it. Type may be left
// empty: it then follows from the aggregator. Field names the input field the metric is computed
// from at ingestion (for a sketch, the values added to it, or a dimension); empty means Name.
// The columns package stores Field but does not use it.
type Metric struct {
	Name       string     `json:"name"`
	Type       MetricType `json:"type,omitempty"`
	Aggregator Aggregator `json:"aggregator"`
	Field      string     `json:"fieldName,omitempty"`
	// InputSketch: at ingestion the input field holds serialized sketches of this metric
	// (as Parquet export writes them), merged as they are, not values to insert (Druid's
	// isInputSketch). Stored, not used, by this package.
	InputSketch bool `json:"isInputSketch,omitempty"`
	// Params are a sketch aggregator's parameters, the keys of the metric's JSON besides the
	// ones above (quantiles: "accuracy"), which its sketch kind interprets (Sketches). nil
	// for none; other aggregators take none.
	Params map[string]json.RawMessage `json:"-"`
}

// Agg returns the metric's aggregator entry in columns/agg (the zero Agg for an unknown
// aggregator, which Validate rejects).
func (m Metric) Agg() agg.Agg {
	s, _ := m.Aggregator.Spec()
	return s
}

// ValueType returns the metric's type: Type when set, else the aggregator's.
func (m Metric) ValueType() MetricType {
	if m.Type != "" {
		return m.Type
	}
	return m.Aggregator.valueType()
}

// Validate reports the first problem of the schema, naming the column: an empty, over-long or
// non-UTF-8 name, a duplicate name, an unknown type or aggregator, a metric type that does not
// fit its aggregator, a raw multi-value dimension, an unknown granularity. Errors wrap ErrSchema.
func (s Schema) Validate() error {
	seen := make(map[string]bool, len(s.Dimensions)+len(s.Metrics)+1)
	seen[TimeColumn] = true
	name := func(kind, n string) error {
		switch {
		case n == "":
			return fmt.Errorf("%w: %s with an empty name", ErrSchema, kind)
		case len(n) > maxNameLen:
			return fmt.Errorf("%w: %s %.40q...: name longer than %d bytes", ErrSchema, kind, n, maxNameLen)
		case !utf8.ValidString(n):
			return fmt.Errorf("%w: %s %q: name is not UTF-8", ErrSchema, kind, n)
		case n == TimeColumn:
			return fmt.Errorf("%w: %s %q: name is reserved for the time column", ErrSchema, kind, n)
		case seen[n]:
			return fmt.Errorf("%w: %s %q: duplicate column name", ErrSchema, kind, n)
		}
		seen[n] = true
		return nil
	}
	if n := len(s.Dimensions) + len(s.Metrics); n > maxColumns {
		return fmt.Errorf("%w: %d columns, at most %d", ErrSchema, n, maxColumns)
	}
	for _, d := range s.Dimensions {
		if err := name("dimension", d.Name); err != nil {
			return err
		}
		if d.Type != "" && d.Type != DimString {
			return fmt.Errorf("%w: dimension %q: unknown type %q (want %q)", ErrSchema, d.Name, d.Type, DimString)
		}
		if d.Raw && d.MultiValue {
			return fmt.Errorf("%w: dimension %q: a raw dimension cannot be multi-value", ErrSchema, d.Name)
		}
		if d.Raw && d.NoBitmapIndex {
			return fmt.Errorf("%w: dimension %q: noBitmapIndex is for dictionary dimensions (raw ones have no index)", ErrSchema, d.Name)
		}
	}
	for _, m := range s.Metrics {
		if err := name("metric", m.Name); err != nil {
			return err
		}
		want := m.Aggregator.valueType()
		if want == "" {
			return fmt.Errorf("%w: metric %q: unknown aggregator %q (want one of %s)%s", ErrSchema, m.Name, m.Aggregator,
				aggregatorList(), suggest.Hint(string(m.Aggregator), aggregatorNames()))
		}
		if _, err := m.Sketches(); err != nil {
			return fmt.Errorf("%w: metric %q: %w", ErrSchema, m.Name, err)
		}
		if m.InputSketch && m.Agg().Type != agg.SketchType {
			return fmt.Errorf("%w: metric %q: isInputSketch is for sketch aggregators", ErrSchema, m.Name)
		}
		switch m.Type {
		case "", want:
		case MetricLong, MetricDouble, MetricHyperUnique:
			return fmt.Errorf("%w: metric %q: aggregator %q works on %s, not %s", ErrSchema, m.Name, m.Aggregator, want, m.Type)
		default:
			return fmt.Errorf("%w: metric %q: unknown type %q (want long, double or hyperUnique)", ErrSchema, m.Name, m.Type)
		}
	}
	if !s.Granularity.valid() {
		return fmt.Errorf("%w: unknown granularity %d", ErrSchema, s.Granularity)
	}
	return nil
}

// aggregatorNames returns the aggregators' names, in the order of aggregators.
func aggregatorNames() []string {
	names := make([]string, len(aggregators))
	for i, a := range aggregators {
		names[i] = string(a)
	}
	return names
}

func aggregatorList() string {
	return strings.Join(aggregatorNames(), ", ")
}

// Limits of the format, checked by the writer and the reader.
const (
	maxNameLen = 1 << 10
	maxColumns = 1 << 12
)

// Dimension returns the index of the named dimension, or -1.
func (s Schema) Dimension(name string) int {
	for i, d := range s.Dimensions {
		if d.Name == name {
			return i
		}
	}
	return -1
}

// Metric returns the index of the named metric, or -1.
func (s Schema) Metric(name string) int {
	for i, m := range s.Metrics {
		if m.Name == name {
			return i
		}
	}
	return -1
}

// Clone returns a deep copy of s.
func (s Schema) Clone() Schema {
	s.Dimensions = append([]Dimension(nil), s.Dimensions...)
	s.Metrics = append([]Metric(nil), s.Metrics...)
	return s
}

// Normalized returns a copy of s with every type spelled out: "string" for dimensions, the
// aggregator's type for metrics. Schemas that are Equal normalize to the same value, and so to
// the same footer bytes.
func (s Schema) Normalized() Schema {
	s = s.Clone()
	for i := range s.Dimensions {
		if s.Dimensions[i].Type == "" {
			s.Dimensions[i].Type = DimString
		}
	}
	for i := range s.Metrics {
		s.Metrics[i].Type = s.Metrics[i].ValueType()
	}
	return s
}

// Equal reports whether two schemas are the same, treating an empty dimension type as string
// and an empty metric type as its aggregator's.
func (s Schema) Equal(o Schema) bool {
	if len(s.Dimensions) != len(o.Dimensions) || len(s.Metrics) != len(o.Metrics) ||
		s.Rollup != o.Rollup || s.Granularity != o.Granularity {
		return false
	}
	for i, d := range s.Dimensions {
		e := o.Dimensions[i]
		if d.Name != e.Name || d.MultiValue != e.MultiValue || d.Raw != e.Raw || d.NoBitmapIndex != e.NoBitmapIndex ||
			(d.Type != e.Type && (d.Type != "" && d.Type != DimString || e.Type != "" && e.Type != DimString)) {
			return false
		}
	}
	for i, m := range s.Metrics {
		e := o.Metrics[i]
		if m.Name != e.Name || m.Aggregator != e.Aggregator || m.ValueType() != e.ValueType() || m.Field != e.Field ||
			m.InputSketch != e.InputSketch || !equalParams(m.Params, e.Params) {
			return false
		}
	}
	return true
}

// ParseSchema decodes a JSON schema, rejecting unknown fields, and validates it.
func ParseSchema(data []byte) (Schema, error) {
	var s Schema
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Schema{}, fmt.Errorf("%w: %w%s", ErrSchema, err, suggest.JSONField(err, &s))
	}
	if dec.More() {
		return Schema{}, fmt.Errorf("%w: trailing data after the schema", ErrSchema)
	}
	if err := s.Validate(); err != nil {
		return Schema{}, err
	}
	return s, nil
}

// Granularity is the query granularity: rollup combines rows whose times truncate to the same
// bucket. The zero value is none (millisecond precision).
type Granularity uint8

// The granularities.
const (
	GranularityNone Granularity = iota
	GranularitySecond
	GranularityMinute
	GranularityHour
	GranularityDay
)

var granularityNames = [...]string{"none", "second", "minute", "hour", "day"}
var granularityMillis = [...]int64{1, 1000, 60 * 1000, 3600 * 1000, 24 * 3600 * 1000}

func (g Granularity) valid() bool { return int(g) < len(granularityNames) }

// String returns the granularity's name: none, second, minute, hour or day.
func (g Granularity) String() string {
	if g.valid() {
		return granularityNames[g]
	}
	return fmt.Sprintf("Granularity(%d)", uint8(g))
}

// Millis returns the bucket width in milliseconds (1 for none).
func (g Granularity) Millis() int64 {
	if g.valid() {
		return granularityMillis[g]
	}
	return 1
}

// MinTime and MaxTime bound the event times a segment can hold (milliseconds since the epoch,
// about 292 million years either side): within them every granularity truncates a time and
// closes its bucket without overflowing int64. Times outside are invalid input.
const (
	MinTime int64 = math.MinInt64 + 2*dayMillis
	MaxTime int64 = math.MaxInt64 - 2*dayMillis
)

const dayMillis = 24 * 60 * 60 * 1000

// Truncate returns the start of the bucket holding ms, rounding down (towards negative infinity
// for times before the epoch). Days are UTC days. It is exact for every time in [MinTime,
// MaxTime]; below MinTime, where the bucket's start may not fit an int64, it returns
// math.MinInt64 rather than wrapping round to a time in the far future.
func (g Granularity) Truncate(ms int64) int64 {
	w := g.Millis()
	if w == 1 {
		return ms
	}
	r := ms % w
	if r < 0 {
		r += w
	}
	if ms < math.MinInt64+r {
		return math.MinInt64
	}
	return ms - r
}

// validTime reports whether ms can be a row's time in a segment of granularity g: the
// truncation of an event time in [MinTime, MaxTime], so in [g.Truncate(MinTime), MaxTime]
// (for none, [MinTime, MaxTime] itself).
func (g Granularity) validTime(ms int64) bool { return ms >= g.Truncate(MinTime) && ms <= MaxTime }

// Interval returns the interval of a segment whose rows' times run from first to last (first
// <= last): from the start of first's bucket to the end of last's,
// [Truncate(first), Truncate(last)+Millis()); for none, [first, last+1). It is the one interval
// convention: the writer records it and Segment.Verify checks it. ok is false when first or
// last is not a valid time (validTime); for valid times the end always fits an int64.
func (g Granularity) Interval(first, last int64) (iv Interval, ok bool) {
	if !g.validTime(first) || !g.validTime(last) {
		return Interval{}, false
	}
	return Interval{Start: g.Truncate(first), End: g.Truncate(last) + g.Millis()}, true
}

// ParseGranularity parses a granularity name; the empty string is none. Names are matched
// case-insensitively, as Druid does.
func ParseGranularity(s string) (Granularity, error) {
	if s == "" {
		return GranularityNone, nil
	}
	for i, n := range granularityNames {
		if strings.EqualFold(s, n) {
			return Granularity(i), nil
		}
	}
	return 0, fmt.Errorf("columns: unknown granularity %q (want none, second, minute, hour or day): %w", s, ErrSchema)
}

// MarshalText implements encoding.TextMarshaler.
func (g Granularity) MarshalText() ([]byte, error) {
	if !g.valid() {
		return nil, fmt.Errorf("columns: unknown granularity %d: %w", g, ErrSchema)
	}
	return []byte(g.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (g *Granularity) UnmarshalText(b []byte) error {
	v, err := ParseGranularity(string(b))
	if err != nil {
		return err
	}
	*g = v
	return nil
}
