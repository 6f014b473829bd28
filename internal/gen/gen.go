package gen

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/writeout/writeout/internal/invalid"
)

// ErrInvalid is wrapped by every error about a bad argument or option. It wraps
// medium.ErrInvalid (internal/invalid.Err: gen imports nothing else of writeout's).
var ErrInvalid = invalid.Sentinel("gen: invalid argument")

// MaxRows is the largest row count a generator accepts (where int is
// 32 bits wide, every non-negative int is accepted).
const MaxRows int64 = 1 << 40

// Kind is the type of a column's values.
type Kind uint8

// The column kinds.
const (
	// Time is the __time column: int64 milliseconds since the Unix epoch,
	// held in Row.Time.
	Time Kind = iota + 1
	// String is a string dimension, held in Row.Strings[Column.Slot].
	String
	// Long is an int64 column, held in Row.Longs[Column.Slot].
	Long
	// Double is a float64 column, held in Row.Doubles[Column.Slot].
	Double
	// Sketch is a HyperLogLog sketch. It appears only as the kind of an
	// aggregator column (hyperUnique), never in a Row.
	Sketch
)

var kindNames = [...]string{Time: "time", String: "string", Long: "long", Double: "double", Sketch: "sketch"}

// String returns the lower-case name of k.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// The aggregator names used in Column.Aggregator.
const (
	AggCount       = "count"
	AggLongSum     = "longSum"
	AggLongMax     = "longMax"
	AggDoubleSum   = "doubleSum"
	AggDoubleMin   = "doubleMin"
	AggHyperUnique = "hyperUnique"
)

// Column describes one column of generated data, or (in Aggregators) one
// metric column a segment built from the data holds.
type Column struct {
	Name string
	Kind Kind
	// Slot is the index of the column's value in the Row slice of its kind
	// (Strings, Longs or Doubles); 0 for the Time column and -1 for an
	// aggregator column, which has no value in a Row.
	Slot int
	// MultiValue: a String column whose rows hold zero or more values.
	MultiValue bool
	// Nullable: a row's value (the whole value, for multi-value) may be null.
	Nullable bool
	// NullElements: a multi-value row may hold null elements.
	NullElements bool
	// Raw: a String column stored without dictionary and bitmap index
	// (payloads, high-cardinality ids). Raw and Bitmap concern String
	// columns only; Long and Double columns are never dictionary-encoded.
	Raw bool
	// Bitmap: a dictionary-encoded String column that also wants a bitmap
	// (inverted) index. A String column with Raw and Bitmap both false is
	// dictionary-encoded without a bitmap index.
	Bitmap bool
	// Aggregator is set only on aggregator columns: one of the Agg* names.
	Aggregator string
	// Source names the input column an aggregator reads; empty for count.
	Source string
}

// StringValue is the value of one String column in one Row.
type StringValue struct {
	// Null is true when the row's value is null; Values is then empty.
	Null bool
	// Values holds the values: exactly one for a single-value column that
	// is not null, any number (in generation order, duplicates kept) for a
	// multi-value column.
	Values []string
	// NullAt is either empty, meaning no element is null, or parallel to
	// Values: NullAt[i] marks Values[i] (which is then "") as a null
	// element. Columns with NullElements always fill it; others leave it
	// empty.
	NullAt []bool
}

// IsNullAt reports whether element i is a null element.
func (v *StringValue) IsNullAt(i int) bool { return i < len(v.NullAt) && v.NullAt[i] }

func (v *StringValue) reset() {
	v.Null = false
	v.Values = v.Values[:0]
	v.NullAt = v.NullAt[:0]
}

// Row is one generated row. Generators overwrite a Row in place and reuse
// its slices, so a caller that keeps a row past the next call to Next must
// Clone it. The strings themselves are immutable and may be kept.
type Row struct {
	Time    int64         // milliseconds since the Unix epoch, UTC
	Strings []StringValue // one per String column, indexed by Column.Slot
	Longs   []int64       // one per Long column, indexed by Column.Slot
	Doubles []float64     // one per Double column, indexed by Column.Slot
}

// Clone returns a deep copy of r that shares nothing mutable with it.
func (r *Row) Clone() Row {
	c := Row{Time: r.Time}
	if r.Strings != nil {
		c.Strings = make([]StringValue, len(r.Strings))
		for i := range r.Strings {
			s := &r.Strings[i]
			c.Strings[i] = StringValue{Null: s.Null, Values: append([]string(nil), s.Values...)}
			if len(s.NullAt) > 0 {
				c.Strings[i].NullAt = append([]bool(nil), s.NullAt...)
			}
		}
	}
	if r.Longs != nil {
		c.Longs = append([]int64(nil), r.Longs...)
	}
	if r.Doubles != nil {
		c.Doubles = append([]float64(nil), r.Doubles...)
	}
	return c
}

// shape sizes r for nStr string, nLong long and nDouble double columns,
// reusing its slices, and clears every string value.
func (r *Row) shape(nStr, nLong, nDouble int) {
	if cap(r.Strings) >= nStr {
		r.Strings = r.Strings[:nStr]
	} else {
		r.Strings = append(r.Strings[:cap(r.Strings)], make([]StringValue, nStr-cap(r.Strings))...)
	}
	for i := range r.Strings {
		r.Strings[i].reset()
	}
	if cap(r.Longs) >= nLong {
		r.Longs = r.Longs[:nLong]
	} else {
		r.Longs = make([]int64, nLong)
	}
	if cap(r.Doubles) >= nDouble {
		r.Doubles = r.Doubles[:nDouble]
	} else {
		r.Doubles = make([]float64, nDouble)
	}
}

// Generator produces a fixed number of rows, deterministically from a seed.
// A Generator is not safe for concurrent use; make one per goroutine.
type Generator interface {
	// Schema lists the columns of every row: __time (Kind Time) first, then
	// the other columns in a fixed order, each with its Slot in the Row.
	Schema() []Column
	// Aggregators lists the metric columns a segment built from this data
	// holds (Aggregator and Source set, Slot -1).
	Aggregators() []Column
	// Next fills r with the next row, reusing r's slices, and reports
	// whether there was one. After Rows() rows it returns false and leaves
	// r unchanged.
	Next(r *Row) bool
	// Rows is the total number of rows the generator produces.
	Rows() int
	// Interval is the half-open time range [start, end) in milliseconds
	// that holds every row's Time.
	Interval() (start, end int64)
}

func checkRows(name string, rows int) error {
	if rows < 0 || int64(rows) > MaxRows {
		return fmt.Errorf("gen: %s: row count %d outside [0, %d]: %w", name, rows, MaxRows, ErrInvalid)
	}
	return nil
}

// Start2000 is 2000-01-01T00:00:00Z in milliseconds since the Unix epoch,
// the start of the default interval of both generators.
const Start2000 int64 = 946684800000

// DayMillis is the length of a day in milliseconds.
const DayMillis int64 = 86_400_000

// MinTime and MaxTime bound the times a TimeRange may hold: they are
// columns.MinTime and columns.MaxTime, the times a segment can hold, copied
// here since gen imports nothing of writeout's (a test checks they agree).
const (
	MinTime int64 = math.MinInt64 + 2*DayMillis
	MaxTime int64 = math.MaxInt64 - 2*DayMillis
)

// TimeRange is the interval [Start, Start+Span) in milliseconds since the
// Unix epoch, UTC, that a generator spreads its rows' times over. The zero
// value selects the default, one day from Start2000: [Start2000,
// Start2000+DayMillis).
type TimeRange struct {
	// Start is the first time of the interval.
	Start int64
	// Span is the length of the interval: more than 0, with Start at least
	// MinTime and Start+Span at most MaxTime. It is 0 only in the zero
	// TimeRange, the default.
	Span int64
}

// ensureDefaults fills in the default interval for the zero TimeRange and
// checks any other; name is the generator's, for the error.
func (tr *TimeRange) ensureDefaults(name string) error {
	if *tr == (TimeRange{}) {
		*tr = TimeRange{Start: Start2000, Span: DayMillis}
		return nil
	}
	if tr.Span <= 0 {
		return fmt.Errorf("gen: %s: time span %d ms: want more than 0: %w", name, tr.Span, ErrInvalid)
	}
	// MaxTime-Start may pass the int64 range (Start below 0); as uint64 it is exact.
	if tr.Start < MinTime || tr.Start > MaxTime || uint64(tr.Span) > uint64(MaxTime)-uint64(tr.Start) {
		return fmt.Errorf("gen: %s: time range of %d ms from %d: outside [%d, %d], the times a segment can hold: %w",
			name, tr.Span, tr.Start, MinTime, MaxTime, ErrInvalid)
	}
	return nil
}

// clock hands out non-decreasing timestamps spread evenly over
// [start, start+span) with seeded jitter: row i of n gets
// start + floor((i + u) * span / n) with u a multiple of 2^-jitter in
// [0, 1), computed in exact integer arithmetic.
type clock struct {
	rng    rng
	start  int64
	span   uint64
	n      uint64
	jitter uint // bits of u
}

// jitterBits is the jitter's resolution (clock.jitter) for every span below
// 2^40 ms (about 35 years), the default day among them; longer spans have
// fewer bits, so that the product of the row and the span fits 128 bits.
const jitterBits = 24

// newClock returns the clock of n rows (0 counts as 1) over tr, which
// ensureDefaults has checked, seeded from seed's stream 0.
func newClock(tr TimeRange, n uint64, seed int64) clock {
	span := uint64(tr.Span)
	c := clock{start: tr.Start, span: span, n: max(n, 1), jitter: min(jitterBits, 64-uint(bits.Len64(span)))}
	seedStream(&c.rng, seed, 0)
	return c
}

func (c *clock) at(i uint64) int64 {
	// x < n<<jitter and span < 1<<(64-jitter), so x*span < n<<64: the quotient fits.
	x := i<<c.jitter | c.rng.Uint64()>>(64-c.jitter)
	hi, lo := mul64(x, c.span)
	q, _ := div64(hi, lo, c.n)
	return c.start + int64(q>>c.jitter)
}
