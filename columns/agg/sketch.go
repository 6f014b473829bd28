package agg

import (
	"encoding/json"
	"errors"
	"fmt"
)

// A sketch aggregator (Type SketchType, Kind Union) keeps one sketch per row: a summary of a
// set of input values that merges with others of its metric. What a sketch is lives behind
// the interfaces below, one file per kind (hll.go: HyperLogLog, for hyperUnique; quantiles.go:
// DDSketch); the table entry of a sketch aggregator holds its sketchKind, and Agg.SketchesOf
// is the way in. Every caller (the merger's Builder and merges, queries, ingestion, export)
// goes through them and names no library. A new kind is one file and one table entry.

// sketchKind is one kind of sketch.
type sketchKind interface {
	// Sketches checks a metric's parameters (the keys of its schema entry that the schema
	// itself does not define; nil when there are none) and returns the sketches of that
	// metric. An unknown parameter or a bad value is an error.
	Sketches(params map[string]json.RawMessage) (Sketches, error)
}

// Sketches makes and decodes the sketches of one metric (a kind with its parameters). Its
// methods may be called from several goroutines at once.
type Sketches interface {
	// New returns an empty sketch.
	New() Sketch
	// Decode decodes bytes that Sketch.AppendBinary wrote. Bad bytes, or the bytes of a
	// sketch with other parameters, are an error, never a panic.
	Decode(b []byte) (Sketch, error)
	// Check reports whether b decodes (nil, or Decode's error); it may cost less than
	// Decode, for callers that copy a sketch's bytes as they are.
	Check(b []byte) error
}

// Sketch is one sketch: a row's, a group's, an accumulator of merged rows.
type Sketch interface {
	// Insert adds one input value, in its text form (a number is parsed by kinds over
	// numbers). A value the kind cannot take is an error.
	Insert(v []byte) error
	// Merge adds o, a sketch of the same metric, into the sketch.
	Merge(o Sketch) error
	// Compact puts the sketch in the one representation of its contents, so that equal
	// contents reached by any order of inserts and merges give equal bytes. A caller that
	// combined several rows' sketches calls it before writing the result. It changes no
	// estimate. A kind whose representation is always canonical does nothing.
	Compact()
	// AppendBinary appends the sketch's bytes to dst.
	AppendBinary(dst []byte) ([]byte, error)
	// Estimate returns what a query prints for the sketch: HyperLogLog's distinct count; a
	// quantile sketch's count of values.
	Estimate() float64
	// Clone returns an independent copy.
	Clone() Sketch
	// Reset empties the sketch, keeping its memory where it can.
	Reset()
}

// Quantiler is a Sketch that estimates quantiles: Quantile(q) for q in [0, 1], an error for
// an empty sketch or q outside [0, 1].
type Quantiler interface {
	Quantile(q float64) (float64, error)
}

// errSketch marks bytes that do not decode as a sketch of the metric (a reader of a segment
// wraps it in columns.ErrCorrupt).
var errSketch = errors.New("agg: bad sketch")

// SketchesOf returns the sketches of a metric of aggregator a with parameters params. A
// non-sketch aggregator takes no parameters: it gives nil, or an error naming the first.
func (a Agg) SketchesOf(params map[string]json.RawMessage) (Sketches, error) {
	if a.sketch == nil {
		if k := firstKey(params); k != "" {
			return nil, fmt.Errorf("aggregator %s takes no parameter %q", a.Name, k)
		}
		return nil, nil
	}
	return a.sketch.Sketches(params)
}

// firstKey returns the smallest key of m, or "".
func firstKey(m map[string]json.RawMessage) string {
	first := ""
	for k := range m {
		if first == "" || k < first {
			first = k
		}
	}
	return first
}

// decodeSafely runs a third-party decoder, turning its panic into an error.
func decodeSafely(what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s decoder panicked: %v", errSketch, what, r)
		}
	}()
	return fn()
}

// NumericInput reports whether the input values of s are numbers (a long or double field)
// rather than text: a reader hands a float column's values to such a kind only.
func NumericInput(s Sketches) bool {
	n, ok := s.(interface{ numeric() bool })
	return ok && n.numeric()
}
