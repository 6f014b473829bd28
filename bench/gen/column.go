package gen

import (
	"strconv"
	"strings"
	"sync"
)

// distKind says how a column draws the offset v in [0, n) of its next
// value; the value itself is start+v (or enum[v]).
type distKind uint8

const (
	// distSequential cycles v = 0, 1, ..., n-1, 0, 1, ...; it does not
	// advance on rows that come out null.
	distSequential distKind = iota
	// distUniform draws v uniformly from [0, n).
	distUniform
	// distTable draws v from a fixed distribution (Zipf, enumerated,
	// rounded normal) by inverse CDF.
	distTable
)

// spec describes how one column of a table-driven generator is made.
type spec struct {
	name    string
	kind    Kind
	dist    distKind
	start   int64     // first value of the range [start, start+n)
	n       int64     // number of distinct values
	weights []float64 // distTable: one weight per offset
	enum    []string  // String only: enum[v] replaces start+v
	enumNul int       // index into enum that stands for null, or -1
	rowSize int       // values per row; >1 makes a multi-value column
	nullP   float64   // String only: probability the whole row is null
}

func sequential(name string, kind Kind, start, end int64) spec {
	return spec{name: name, kind: kind, dist: distSequential, start: start, n: end - start, enumNul: -1, rowSize: 1}
}

func uniform(name string, kind Kind, start, end int64) spec {
	return spec{name: name, kind: kind, dist: distUniform, start: start, n: end - start, enumNul: -1, rowSize: 1}
}

// zipf draws start+k-1 with probability proportional to 1/k^s, k = 1..end-start.
func zipf(name string, kind Kind, start, end int64, s float64) spec {
	return spec{name: name, kind: kind, dist: distTable, start: start, n: end - start,
		weights: zipfWeights(int(end-start), s), enumNul: -1, rowSize: 1}
}

// roundedNormal draws round(X), X normal(mean, sd), mean an integer.
func roundedNormal(name string, kind Kind, mean int64, sd float64) spec {
	half := int(10*sd) + 1
	return spec{name: name, kind: kind, dist: distTable, start: mean - int64(half), n: int64(2*half + 1),
		weights: roundedNormalWeights(sd, half), enumNul: -1, rowSize: 1}
}

// enumerated draws values[i] with probability probs[i]; a value "\x00null"
// stands for null.
func enumerated(name string, values []string, probs []float64) spec {
	sp := spec{name: name, kind: String, dist: distTable, n: int64(len(values)),
		weights: probs, enum: values, enumNul: -1, rowSize: 1}
	for i, v := range values {
		if v == enumNull {
			sp.enumNul = i
			sp.enum = append([]string(nil), values...)
			sp.enum[i] = ""
		}
	}
	return sp
}

const enumNull = "\x00null"

func (s spec) multi(rowSize int) spec { s.rowSize = rowSize; return s }
func (s spec) nulls(p float64) spec   { s.nullP = p; return s }
func (s spec) column(slot int) Column {
	c := Column{Name: s.name, Kind: s.kind, Slot: slot}
	if s.kind == String {
		c.MultiValue = s.rowSize > 1
		c.Nullable = s.nullP > 0 || (s.enumNul >= 0 && s.rowSize == 1)
		c.NullElements = s.enumNul >= 0 && s.rowSize > 1
		c.Bitmap = true
	}
	return c
}

// colState is the running state of one generated column.
type colState struct {
	kind    Kind
	slot    int
	dist    distKind
	start   int64
	n       uint64
	seq     uint64
	tab     table
	enum    []string
	enumNul int
	rowSize int
	nullT   uint64
	multi   bool
	nullEl  bool
	dec     []string
	rng     rng
}

func newColState(s spec, slot int, seed int64, stream uint64) colState {
	c := colState{kind: s.kind, slot: slot, dist: s.dist, start: s.start, n: uint64(s.n),
		enum: s.enum, enumNul: s.enumNul, rowSize: s.rowSize, nullT: threshold(s.nullP),
		multi: s.rowSize > 1, nullEl: s.enumNul >= 0 && s.rowSize > 1}
	if s.dist == distTable {
		c.tab = newTable(s.weights)
	}
	if s.kind == String && s.enum == nil {
		c.dec = decimals()
	}
	seedStream(&c.rng, seed, stream)
	return c
}

// draw returns the offset of the next value.
func (c *colState) draw() uint64 {
	switch c.dist {
	case distSequential:
		v := c.seq
		c.seq++
		if c.seq == c.n {
			c.seq = 0
		}
		return v
	case distUniform:
		return uintn(&c.rng, c.n)
	default:
		return uint64(c.tab.sample(&c.rng))
	}
}

// fill writes the column's next value into r.
func (c *colState) fill(r *Row) {
	switch c.kind {
	case Long:
		r.Longs[c.slot] = c.start + int64(c.draw())
	case Double:
		r.Doubles[c.slot] = float64(c.start + int64(c.draw()))
	case String:
		sv := &r.Strings[c.slot]
		if c.nullT > 0 && unit(&c.rng) < c.nullT {
			sv.Null = true
			return
		}
		for range c.rowSize {
			v := c.draw()
			switch {
			case c.enum == nil:
				x := c.start + int64(v)
				if x >= 0 && x < int64(len(c.dec)) {
					sv.Values = append(sv.Values, c.dec[x])
				} else {
					sv.Values = append(sv.Values, strconv.FormatInt(x, 10))
				}
			case int(v) == c.enumNul && !c.multi:
				sv.Null = true
				return
			default:
				sv.Values = append(sv.Values, c.enum[v])
			}
			if c.nullEl {
				sv.NullAt = append(sv.NullAt, int(v) == c.enumNul)
			}
		}
	}
}

// decimals holds the decimal text of 0..decimalMax, as substrings of one
// string, built on first use.
const decimalMax = 100_000

var decimals = sync.OnceValue(func() []string {
	var b strings.Builder
	b.Grow(6 * (decimalMax + 1))
	ends := make([]int, decimalMax+1)
	var buf [20]byte
	for i := range ends {
		b.Write(strconv.AppendInt(buf[:0], int64(i), 10))
		ends[i] = b.Len()
	}
	all := b.String()
	out := make([]string, decimalMax+1)
	prev := 0
	for i, e := range ends {
		out[i] = all[prev:e]
		prev = e
	}
	return out
})
