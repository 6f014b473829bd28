// Package agg is the one home of aggregation semantics: one table entry per aggregator, and the
// kernels every caller uses to combine values (rollup at ingestion, merges, queries).
//
// An aggregator is a value Type (long, double, sketch) and a Kind: what combining two values
// means. Callers switch on the Kind, never on aggregator names, so adding a long or double
// aggregator is one entry in the table below (and its name in names.go), and adding a sketch
// aggregator is one new file: its sketch kind and the call that registers its entry.
//
// # Kinds
//
//	Sum    count, longSum: exact int64 addition, or an error (see Overflow below); doubleSum:
//	       exact, rounded once (ExactSum), stored as a value plus the Tail that keeps it exact
//	       across merges
//	Min    longMin, doubleMin: the smaller (math.Min for doubles: NaN wins, -0 < +0)
//	Max    longMax, doubleMax: the larger (math.Max for doubles)
//	First  longFirst, doubleFirst: the value of the earliest row in time; of rows with equal
//	       times, the first in input order. Stored with the row's time.
//	Last   longLast, doubleLast: the value of the latest row in time; of rows with equal
//	       times, the last in input order. Stored with the row's time.
//	Union  hyperUnique and every sketch aggregator: the merge of sketches (see sketch.go)
//
// "Input order" is the order rows reach the combiner: rows added to a builder in the order they
// were added; the inputs of a merge in the order given, each in its row order; the inputs of a
// query likewise. First and Last compare the time stored with the value (the event time of the
// row it came from, before any truncation to a granularity), so a rolled-up segment merged again
// keeps choosing by event time.
//
// # Nulls
//
// A long or double value may be null (missing in the input), as in Druid's SQL-compatible null
// handling, and this package alone decides what that means; every path adds values through
// LongAcc and DoubleAcc, whose Add takes the null flag:
//
//   - every kind skips a null value: sums and counts of a metric add nothing for it, Min, Max,
//     First and Last ignore it (a null never wins, whatever time it carries);
//   - a group, rolled-up row or query result whose inputs were all null is null (Null), not
//     the kind's identity and not 0: a doubleSum or longSum over nulls only is null;
//   - count is never null (Agg.Nullable): at ingestion every row counts 1 whatever its
//     values; stored counts are never null;
//   - a stored null row holds the value 0 and, for First and Last, the time 0 (Value and Time
//     give those for a null accumulator), so that the same rows store the same bytes whatever
//     path combined them.
//
// # Overflow
//
// A sum of longs never wraps and never saturates: its answer is exact or it is an error. Every
// path (a query, a rollup in a Builder, a merge with rollup, ingestion, which goes through a
// Builder and merges) adds through AddLong or LongAcc, which keep the carries out of int64
// beside the wrapped value, as a 128-bit integer would: a sum that leaves the int64 range on
// the way and comes back (MaxInt64, then 1, then -1) gives its exact answer whatever the order
// of its values. A sum whose exact value does not fit an int64 when it must be stored or
// returned (a rolled-up row persisted by a Builder, a row of a merge, a group of a query) is an
// error wrapping ErrOverflow that names the metric and the row or group; nothing is written
// or answered. Partial sums that are stored are values like any other: an intermediate
// segment of a merge in phases (merger.Options.MaxFanIn) or a run of ingestion whose row's
// sum does not fit fails the merge or the ingest, even if later rows would bring the total
// back into range.
package agg

import (
	"errors"
	"fmt"
	"math"
	"math/big"
)

// Type is the type of the values an aggregator works on.
type Type uint8

// The value types.
const (
	Long Type = iota + 1
	Double
	SketchType
)

// String returns the type's name as a segment schema spells it: long, double, hyperUnique.
func (t Type) String() string {
	switch t {
	case Long:
		return "long"
	case Double:
		return "double"
	case SketchType:
		return "hyperUnique"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// kind says how an aggregator combines values.
type kind uint8

// The kinds of aggregation.
const (
	Sum kind = iota + 1
	Min
	Max
	First
	Last
	Union
)

// String returns the kind's name.
func (k kind) String() string {
	switch k {
	case Sum:
		return "sum"
	case Min:
		return "min"
	case Max:
		return "max"
	case First:
		return "first"
	case Last:
		return "last"
	case Union:
		return "union"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Timed reports whether values of this kind are stored with a time (First and Last).
func (k kind) Timed() bool { return k == First || k == Last }

// Agg is one aggregator: its name, value type and kind.
type Agg struct {
	Name string
	Type Type
	Kind kind
	// CountsRows: at ingestion every input row contributes 1, whatever its value (count).
	CountsRows bool
	// sketch is the kind of a sketch aggregator's sketches (Type SketchType); nil for the others.
	sketch sketchKind
}

// Timed reports whether the aggregator's values are stored with a time.
func (a Agg) Timed() bool { return a.Kind.Timed() }

// Nullable reports whether the aggregator's value can be null: every long and double
// aggregator but count, whose value over rows whose inputs were all null is still a count
// (each row counts, see CountsRows). A sketch has no null: its identity is the empty sketch.
func (a Agg) Nullable() bool { return a.Type != SketchType && !a.CountsRows }

// Exact reports whether the aggregator's values are stored with an exactness tail (doubleSum).
func (a Agg) Exact() bool { return a.Type == Double && a.Kind == Sum }

// table lists every aggregator: the long and double ones below, in a fixed order, then the
// sketch aggregators, each added by its kind's own file (registerSketch, called from that
// file's init) in the order of the files' names. Adding a long or double aggregator is a line
// here; adding a sketch aggregator is one new file.
var table = []Agg{
	{Name: "count", Type: Long, Kind: Sum, CountsRows: true},
	{Name: "longSum", Type: Long, Kind: Sum},
	{Name: "longMin", Type: Long, Kind: Min},
	{Name: "longMax", Type: Long, Kind: Max},
	{Name: "longFirst", Type: Long, Kind: First},
	{Name: "longLast", Type: Long, Kind: Last},
	{Name: "doubleSum", Type: Double, Kind: Sum},
	{Name: "doubleMin", Type: Double, Kind: Min},
	{Name: "doubleMax", Type: Double, Kind: Max},
	{Name: "doubleFirst", Type: Double, Kind: First},
	{Name: "doubleLast", Type: Double, Kind: Last},
}

var byName = func() map[string]Agg {
	m := make(map[string]Agg, len(table))
	for _, a := range table {
		m[a.Name] = a
	}
	return m
}()

// registerSketch adds the sketch aggregator a to the table. It is called from the init of the
// file of a's kind; a name given twice is a programmer's error.
func registerSketch(a Agg) {
	if _, dup := byName[a.Name]; dup || a.Type != SketchType || a.sketch == nil {
		panic(fmt.Sprintf("agg: bad sketch aggregator registration %q", a.Name))
	}
	table = append(table, a)
	byName[a.Name] = a
}

// Lookup returns the aggregator of a name (case-sensitive, as Druid's).
func Lookup(name string) (Agg, bool) {
	a, ok := byName[name]
	return a, ok
}

// All returns every aggregator, in the table's fixed order.
func All() []Agg { return append([]Agg(nil), table...) }

// LongIdentity returns the value a group of this kind starts from before any row: 0 for Sum (and
// for First and Last, whose accumulators also record that no row came yet), the largest value
// for Min, the smallest for Max.
func (k kind) LongIdentity() int64 {
	switch k {
	case Min:
		return math.MaxInt64
	case Max:
		return math.MinInt64
	case Sum, First, Last, Union:
	}
	return 0
}

// DoubleIdentity is LongIdentity for doubles: +Inf for Min, -Inf for Max, else 0.
func (k kind) DoubleIdentity() float64 {
	switch k {
	case Min:
		return math.Inf(1)
	case Max:
		return math.Inf(-1)
	case Sum, First, Last, Union:
	}
	return 0
}

// ErrOverflow marks a sum of longs (count, longSum) whose exact value does not fit an int64
// where it must be stored or returned. See the package documentation.
var ErrOverflow = errors.New("agg: sum of longs overflows int64")

// AddLong returns a+b wrapped to int64, and the carry out of int64: +1 when the exact sum is
// the wrapped one plus 2^64, -1 when it is the wrapped one minus 2^64, else 0. Sums of many
// values add their carries: the exact sum is the wrapped sum plus carries*2^64, and it fits an
// int64 exactly when the carries add up to 0.
func AddLong(a, b int64) (sum, carry int64) {
	sum = a + b
	if (sum^a)&(sum^b) < 0 { // a and b of one sign, sum of the other
		if b < 0 {
			return sum, -1
		}
		return sum, 1
	}
	return sum, 0
}

// CombineLong combines two long values of an untimed kind: the sum (wrapped, with its carry:
// see AddLong), the minimum or the maximum (carry 0). For First and Last use Takes.
func (k kind) CombineLong(a, b int64) (v, carry int64) {
	switch k {
	case Min:
		return min(a, b), 0
	case Max:
		return max(a, b), 0
	case Sum, First, Last, Union:
	}
	return AddLong(a, b)
}

// CombineDouble combines two double values of Min or Max (Sum goes through ExactSum, First
// and Last through Takes): math.Min or math.Max.
func (k kind) CombineDouble(a, b float64) float64 {
	switch k {
	case Min:
		return math.Min(a, b)
	case Max:
		return math.Max(a, b)
	case Sum, First, Last, Union:
	}
	return a + b
}

// Takes reports whether, for First or Last, a value stored with time t that comes after the
// held value (stored with time held) in input order replaces it: First takes strictly earlier
// times (the first of equal times stays), Last takes equal or later times (the last of equal
// times wins).
func (k kind) Takes(held, t int64) bool {
	if k == First {
		return t < held
	}
	return t >= held
}

// LongAcc accumulates long values of one kind. The zero value is not ready: use NewLongAcc (an
// empty group) or LongAccOf (a stored value, to combine more into it).
type LongAcc struct {
	V   int64 // the value so far (for Sum wrapped: read it through Value)
	C   int64 // Sum: the carries out of int64 (AddLong); the exact sum is V + C*2^64
	t   int64 // First and Last: the time stored with V
	Set bool  // a non-null value came (see Nulls in the package documentation)
}

// NewLongAcc returns an empty accumulator of kind k.
func NewLongAcc(k kind) LongAcc { return LongAcc{V: k.LongIdentity()} }

// LongAccOf returns the accumulator of a stored value (a row that may already combine several,
// with the carries of its sum and, for First and Last, its time), or of a stored null: more
// values combine into it as into the rows it stands for.
func LongAccOf(k kind, v, carry, t int64, null bool) LongAcc {
	if null {
		return NewLongAcc(k)
	}
	return LongAcc{V: v, C: carry, t: t, Set: true}
}

// Add combines a value stored with time t (used by First and Last only) into a. A null value
// is skipped: no kind combines it, whatever it holds.
func (a *LongAcc) Add(k kind, v, t int64, null bool) {
	if null {
		return
	}
	if k.Timed() {
		if !a.Set || k.Takes(a.t, t) {
			a.V, a.t, a.Set = v, t, true
		}
		return
	}
	var c int64
	a.V, c = k.CombineLong(a.V, v)
	a.C += c
	a.Set = true
}

// Merge combines o, which holds values that come after a's in input order, into a.
func (a *LongAcc) Merge(k kind, o *LongAcc) {
	if !o.Set {
		return // only nulls, or nothing
	}
	if k.Timed() {
		a.Add(k, o.V, o.t, false)
		return
	}
	var c int64
	a.V, c = k.CombineLong(a.V, o.V)
	a.C += c + o.C
	a.Set = true
}

// Null reports whether the accumulated value of aggregator x is null: no non-null value came,
// and x is nullable (Agg.Nullable: every long aggregator but count).
func (a *LongAcc) Null(x Agg) bool { return !a.Set && x.Nullable() }

// Value returns the accumulated value, or, for a sum whose exact value does not fit an int64,
// an error wrapping ErrOverflow. Without a non-null value it is 0 (what a null row stores, and
// count's value over no row).
func (a *LongAcc) Value() (int64, error) {
	if !a.Set {
		return 0, nil
	}
	if a.C != 0 {
		return 0, OverflowError(a.V, a.C)
	}
	return a.V, nil
}

// Time returns the time stored with a First or Last value: 0 without a non-null value (what a
// null row stores).
func (a *LongAcc) Time() int64 {
	if !a.Set {
		return 0
	}
	return a.t
}

// OverflowError describes the exact sum v + carries*2^64, which does not fit an int64, as an
// error wrapping ErrOverflow.
func OverflowError(v, carries int64) error {
	exact := new(big.Int).Lsh(big.NewInt(carries), 64)
	exact.Add(exact, big.NewInt(v))
	return fmt.Errorf("the exact sum %s is outside the int64 range: %w", exact, ErrOverflow)
}

// DoubleAcc accumulates double values of one kind. The zero value is not ready: use
// NewDoubleAcc.
type DoubleAcc struct {
	V   float64 // Min, Max, First, Last: the value so far
	t   int64   // First and Last: the time stored with V
	Set bool    // a non-null value came (see Nulls in the package documentation)
	Sum ExactSum
}

// NewDoubleAcc returns an empty accumulator of kind k.
func NewDoubleAcc(k kind) DoubleAcc { return DoubleAcc{V: k.DoubleIdentity()} }

// Add combines a value stored with time t (used by First and Last only) and, for Sum, the
// exactness tail stored with it, into a. A null value is skipped: no kind combines it.
func (a *DoubleAcc) Add(k kind, v float64, t int64, tail []float64, null bool) {
	if null {
		return
	}
	switch k {
	case Sum:
		a.Sum.add(v)
		a.Sum.addAll(tail)
	case First, Last:
		if a.Set && !k.Takes(a.t, t) {
			return
		}
		a.V, a.t = v, t
	case Min, Max, Union:
		a.V = k.CombineDouble(a.V, v)
	}
	a.Set = true
}

// Merge combines o, which holds values that come after a's in input order, into a.
func (a *DoubleAcc) Merge(k kind, o *DoubleAcc) {
	if !o.Set {
		return // only nulls, or nothing
	}
	switch k {
	case Sum:
		a.Sum.merge(&o.Sum)
	case First, Last:
		a.Add(k, o.V, o.t, nil, false)
	case Min, Max, Union:
		a.V = k.CombineDouble(a.V, o.V)
	}
	a.Set = true
}

// Null reports whether the accumulated value of aggregator x is null: no non-null value came
// (every double aggregator is nullable).
func (a *DoubleAcc) Null(x Agg) bool { return !a.Set && x.Nullable() }

// Value returns the accumulated value: for Sum the exact sum rounded once; +0 without a
// non-null value (what a null row stores).
func (a *DoubleAcc) Value(k kind) float64 {
	if !a.Set {
		return 0
	}
	if k == Sum {
		return a.Sum.Value()
	}
	return a.V
}

// Time returns the time stored with a First or Last value: 0 without a non-null value.
func (a *DoubleAcc) Time() int64 {
	if !a.Set {
		return 0
	}
	return a.t
}

// Reset empties a for kind k, keeping the memory of its exact sum.
func (a *DoubleAcc) Reset(k kind) {
	a.Sum.reset()
	a.V, a.t, a.Set = k.DoubleIdentity(), 0, false
}

// AddLongs adds vals[i] (stored with times[i], read by First and Last only; times may be nil
// for other kinds) into accs[gid[i]], skipping i where null is non-nil and null[i] is true: the
// batch form of LongAcc.Add, with the same meaning, for callers that aggregate a column a
// chunk at a time (queries). The kind's loop is chosen once per batch.
func AddLongs(k kind, accs []LongAcc, gid []int32, vals, times []int64, null []bool) {
	if null != nil || k.Timed() {
		for i, v := range vals {
			var t int64
			if times != nil {
				t = times[i]
			}
			accs[gid[i]].Add(k, v, t, null != nil && null[i])
		}
		return
	}
	switch k {
	case Min:
		for i, v := range vals {
			a := &accs[gid[i]]
			a.V, a.Set = min(a.V, v), true
		}
	case Max:
		for i, v := range vals {
			a := &accs[gid[i]]
			a.V, a.Set = max(a.V, v), true
		}
	case Sum, First, Last, Union:
		for i, v := range vals {
			a := &accs[gid[i]]
			s, c := AddLong(a.V, v)
			a.V, a.C, a.Set = s, a.C+c, true
		}
	}
}

// AddDoubles is AddLongs for doubles without tails (a doubleSum's tails go through
// DoubleAcc.Add, row by row).
func AddDoubles(k kind, accs []DoubleAcc, gid []int32, vals []float64, times []int64, null []bool) {
	if null != nil || k.Timed() {
		for i, v := range vals {
			var t int64
			if times != nil {
				t = times[i]
			}
			accs[gid[i]].Add(k, v, t, nil, null != nil && null[i])
		}
		return
	}
	switch k {
	case Min:
		for i, v := range vals {
			a := &accs[gid[i]]
			a.V, a.Set = math.Min(a.V, v), true
		}
	case Max:
		for i, v := range vals {
			a := &accs[gid[i]]
			a.V, a.Set = math.Max(a.V, v), true
		}
	case Sum, First, Last, Union:
		for i, v := range vals {
			a := &accs[gid[i]]
			a.Sum.add(v)
			a.Set = true
		}
	}
}
