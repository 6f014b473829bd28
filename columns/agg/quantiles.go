package agg

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
)

// quantilesKind is the quantile sketch of the quantiles aggregator: a DDSketch
// (github.com/DataDog/sketches-go) over a long or double input field, whose quantiles are
// within its relative accuracy of the exact ones, however the sketches were merged: the value
// of rank floor(q*(n-1)) of the n sorted values (the lower quantile), or, where that value is
// negative, of rank ceil(q*(n-1)) (the library ranks negative values from the other end). Parameter
// "accuracy": the relative accuracy, in (0, 1); default 0.01. The estimate is the count of
// values; Quantile gives the quantiles.
//
// # Bytes
//
// The library's own encodings depend on its store's layout, so a sketch is written in a
// canonical form of its own, from its bins alone (equal contents give equal bytes whatever the
// order of inserts and merges):
//
//	version u8 (1) | accuracy float64 (little-endian bits) | zero count uvarint |
//	negative bins | positive bins
//	bins: n uvarint | n × (index: zigzag varint, the first absolute, the next ones the gap
//	      to the previous, at least 1 | count uvarint, at least 1)
//
// Counts are whole numbers (each input value counts 1), exact up to 2^53 values a sketch.
type quantilesKind struct{}

func init() {
	registerSketch(Agg{Name: "quantiles", Type: SketchType, Kind: Union, sketch: quantilesKind{}})
}

const (
	quantilesVersion  = 1
	quantilesAccuracy = 0.01
	maxSketchCount    = 1 << 53
)

func (quantilesKind) Sketches(params map[string]json.RawMessage) (Sketches, error) {
	acc := quantilesAccuracy
	for k, v := range params {
		if k != "accuracy" {
			return nil, fmt.Errorf("quantiles: unknown parameter %q (want accuracy)", k)
		}
		if err := json.Unmarshal(v, &acc); err != nil {
			return nil, fmt.Errorf("quantiles: accuracy: %w", err)
		}
		if !(acc > 0 && acc < 1) {
			return nil, fmt.Errorf("quantiles: accuracy %v: want a relative accuracy in (0, 1)", acc)
		}
	}
	m, err := mapping.NewLogarithmicMapping(acc)
	if err != nil {
		return nil, fmt.Errorf("quantiles: accuracy %v: %w", acc, err)
	}
	s := &ddSketches{acc: acc, m: m}
	// Indexes of the values the mapping tracks, with a margin: a decoded bin outside them is
	// bad bytes (and would cost memory for nothing).
	s.lo, s.hi = m.Index(m.MinIndexableValue())-1, m.Index(m.MaxIndexableValue())+1
	return s, nil
}

// ddSketches are the quantile sketches of one accuracy.
type ddSketches struct {
	acc    float64
	m      mapping.IndexMapping
	lo, hi int
}

func (s *ddSketches) numeric() bool { return true }

func (s *ddSketches) New() Sketch {
	return &ddq{s: s, sk: ddsketch.NewDDSketch(s.m, store.NewBufferedPaginatedStore(), store.NewBufferedPaginatedStore())}
}

func (s *ddSketches) Check(b []byte) error {
	_, err := s.Decode(b)
	return err
}

func (s *ddSketches) Decode(b []byte) (Sketch, error) {
	if len(b) < 9 || b[0] != quantilesVersion {
		return nil, fmt.Errorf("%w: quantiles: bad header", errSketch)
	}
	if acc := math.Float64frombits(binary.LittleEndian.Uint64(b[1:9])); acc != s.acc {
		return nil, fmt.Errorf("%w: quantiles: a sketch of accuracy %v, the metric's is %v", errSketch, acc, s.acc)
	}
	q := s.New().(*ddq)
	d := ddDecoder{b: b[9:]}
	zero := d.count()
	var total uint64
	if zero > 0 {
		total = zero
		_ = q.sk.AddWithCount(0, float64(zero))
	}
	for _, st := range []store.Store{q.sk.GetNegativeValueStore(), q.sk.GetPositiveValueStore()} {
		n := d.uvarint()
		if d.err == nil && n > uint64(len(d.b)) {
			d.fail("more bins than bytes")
		}
		prev := 0
		for i := uint64(0); i < n && d.err == nil; i++ {
			u := d.uvarint()
			if d.err != nil {
				break
			}
			x := int64(u >> 1) // zigzag, as binary.AppendVarint writes it
			if u&1 != 0 {
				x = ^x
			}
			idx := int(x)
			if i > 0 {
				if x < 1 || int64(prev)+x > int64(s.hi) {
					d.fail("bin indexes not increasing")
					break
				}
				idx = prev + int(x)
			}
			if idx < s.lo || idx > s.hi {
				d.fail("bin index out of range")
				break
			}
			c := d.count()
			if c == 0 && d.err == nil {
				d.fail("empty bin")
			}
			if total += c; total > maxSketchCount {
				d.fail("count too large")
			}
			if d.err == nil {
				st.AddWithCount(idx, float64(c))
			}
			prev = idx
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: quantiles: %v", errSketch, d.err)
	}
	return q, nil
}

// ddDecoder reads the varints of a sketch's bytes; its first error is sticky.
type ddDecoder struct {
	b   []byte
	err error
}

func (d *ddDecoder) fail(msg string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s", msg)
	}
}

func (d *ddDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	x, k := binary.Uvarint(d.b)
	if k <= 0 || k > 1 && d.b[k-1] == 0 { // truncated, overflowing or not minimal
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[k:]
	return x
}

// count reads a bin's count: at least 1, and at most maxSketchCount. The zero count may be 0.
func (d *ddDecoder) count() uint64 {
	c := d.uvarint()
	if c > maxSketchCount {
		d.fail("count too large")
	}
	return c
}

// ddq is one quantile sketch.
type ddq struct {
	s  *ddSketches
	sk *ddsketch.DDSketch
}

// Insert adds a number in the decimal syntax of Go's strconv.ParseFloat (a long or a double
// field's text); NaN and infinities are errors.
func (q *ddq) Insert(v []byte) error {
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("quantiles: %q is not a finite number", v)
	}
	if err := q.sk.Add(f); err != nil {
		return fmt.Errorf("quantiles: %v: %w", f, err)
	}
	return nil
}

func (q *ddq) Merge(o Sketch) error {
	p, ok := o.(*ddq)
	if !ok {
		return fmt.Errorf("agg: merge a %T into a quantile sketch", o)
	}
	if p.s.acc != q.s.acc {
		return fmt.Errorf("agg: merge a quantile sketch of accuracy %v into one of %v", p.s.acc, q.s.acc)
	}
	if err := q.sk.MergeWith(p.sk); err != nil {
		return fmt.Errorf("agg: merge quantile sketches: %w", err)
	}
	return nil
}

// Compact does nothing: the bytes are canonical.
func (q *ddq) Compact() {}

func (q *ddq) AppendBinary(dst []byte) ([]byte, error) {
	dst = append(dst, quantilesVersion)
	dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(q.s.acc))
	zero, err := wholeCount(q.sk.GetZeroCount())
	if err != nil {
		return nil, err
	}
	dst = binary.AppendUvarint(dst, zero)
	type bin struct {
		idx int
		c   float64
	}
	var bins []bin
	for _, st := range []store.Store{q.sk.GetNegativeValueStore(), q.sk.GetPositiveValueStore()} {
		bins = bins[:0]
		st.ForEach(func(idx int, c float64) bool {
			if c != 0 {
				bins = append(bins, bin{idx, c})
			}
			return false
		})
		slices.SortFunc(bins, func(a, b bin) int { return a.idx - b.idx })
		n := 0 // one bin an index (a store may report an index twice)
		for _, b := range bins {
			if n > 0 && bins[n-1].idx == b.idx {
				bins[n-1].c += b.c
				continue
			}
			bins[n] = b
			n++
		}
		bins = bins[:n]
		dst = binary.AppendUvarint(dst, uint64(len(bins)))
		prev := 0
		for i, b := range bins {
			if i == 0 {
				dst = binary.AppendVarint(dst, int64(b.idx))
			} else {
				dst = binary.AppendVarint(dst, int64(b.idx-prev))
			}
			prev = b.idx
			c, err := wholeCount(b.c)
			if err != nil {
				return nil, err
			}
			dst = binary.AppendUvarint(dst, c)
		}
	}
	return dst, nil
}

// wholeCount returns a bin's count as an integer: counts are whole numbers.
func wholeCount(c float64) (uint64, error) {
	if c < 0 || c > maxSketchCount || c != math.Trunc(c) {
		return 0, fmt.Errorf("agg: quantile sketch count %v is not a whole number of values", c)
	}
	return uint64(c), nil
}

// Estimate returns the count of values.
func (q *ddq) Estimate() float64 { return q.sk.GetCount() }

func (q *ddq) Clone() Sketch { return &ddq{s: q.s, sk: q.sk.Copy()} }
func (q *ddq) Reset()        { q.sk.Clear() }

// Quantile returns the value at quantile p (0 <= p <= 1), within the accuracy of the lower
// quantile of the values added; an error for an empty sketch.
func (q *ddq) Quantile(p float64) (float64, error) {
	if q.sk.IsEmpty() {
		return 0, fmt.Errorf("agg: quantile of an empty sketch")
	}
	if !(p >= 0 && p <= 1) {
		return 0, fmt.Errorf("agg: quantile %v outside [0, 1]", p)
	}
	return q.sk.GetValueAtQuantile(p)
}
