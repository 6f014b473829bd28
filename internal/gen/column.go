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
	start   int64    // first value of the range [start, start+n)
	n       int64    // number of distinct values
	tab     *table   // distTable: the sampler, shared and read-only
	enum    []string // String only: enum[v] replaces start+v
	enumNul int      // index into enum that stands for null, or -1
	rowSize int      // values per row; >1 makes a multi-value column
	nullP   float64  // String only: probability the whole row is null
}

func sequential(name string, kind Kind, start, end int64) spec {
	return spec{name: name, kind: kind, dist: distSequential, start: start, n: end - start, enumNul: -1, rowSize: 1}
}

func uniform(name string, kind Kind, start, end int64) spec {
	return spec{name: name, kind: kind, dist: distUniform, start: start, n: end - start, enumNul: -1, rowSize: 1}
}

// zipf draws start+k-1 with probability proportional to 1/k^s, k = 1..end-start.
func zipf(name string, kind Kind, start, end int64, s float64) spec {
	n := int(end - start)
	tab := cachedTable(tableKey{"zipf", n, s}, func() []float64 { return zipfWeights(n, s) })
	return spec{name: name, kind: kind, dist: distTable, start: start, n: end - start, tab: tab, enumNul: -1, rowSize: 1}
}

// roundedNormal draws round(X), X normal(mean, sd), mean an integer.
func roundedNormal(name string, kind Kind, mean int64, sd float64) spec {
	half := int(10*sd) + 1
	tab := cachedTable(tableKey{"roundedNormal", half, sd}, func() []float64 { return roundedNormalWeights(sd, half) })
	return spec{name: name, kind: kind, dist: distTable, start: mean - int64(half), n: int64(2*half + 1),
		tab: tab, enumNul: -1, rowSize: 1}
}

// enumerated draws values[i] with probability probs[i]; a value "\x00null"
// stands for null.
func enumerated(name string, values []string, probs []float64) spec {
	tab := newTable(probs)
	sp := spec{name: name, kind: String, dist: distTable, n: int64(len(values)),
		tab: &tab, enum: values, enumNul: -1, rowSize: 1}
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

// tableKey names a distribution whose sampler is worth sharing.
type tableKey struct {
	dist  string
	n     int
	param float64
}

var tables sync.Map // tableKey -> *table

// cachedTable returns the shared table for key, building it from weights()
// on first use. Tables are never modified after they are built.
func cachedTable(key tableKey, weights func() []float64) *table {
	if t, ok := tables.Load(key); ok {
		return t.(*table)
	}
	t := newTable(weights())
	actual, _ := tables.LoadOrStore(key, &t)
	return actual.(*table)
}

// colState is the running state of one generated column.
type colState struct {
	kind    Kind
	slot    int
	dist    distKind
	start   int64
	n       uint64
	seq     uint64
	tab     *table
	enum    []string
	enumNul int
	rowSize int
	nullT   uint64
	multi   bool
	nullEl  bool
	dec     *decimalTable
	rng     rng
}

func newColState(s spec, slot int, seed int64, stream uint64) colState {
	c := colState{kind: s.kind, slot: slot, dist: s.dist, start: s.start, n: uint64(s.n),
		enum: s.enum, enumNul: s.enumNul, rowSize: s.rowSize, nullT: threshold(s.nullP),
		multi: s.rowSize > 1, nullEl: s.enumNul >= 0 && s.rowSize > 1}
	if s.dist == distTable {
		c.tab = s.tab
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
	case distTable:
	}
	return uint64(c.tab.sample(&c.rng))
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
				if x >= 0 && x <= decimalMax {
					sv.Values = append(sv.Values, c.dec.get(x))
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
	case Time, Sketch: // no table column has these (see newTableGen)
	}
}

// decimalTable holds the decimal text of 0..decimalMax back to back in one
// string: value v is all[off[v]:off[v+1]]. Offsets (400 KB) instead of
// string headers (1.6 MB) keep random lookups in cache.
type decimalTable struct {
	all string
	off []uint32
}

const decimalMax = 100_000

// get returns the decimal text of v, which must be in [0, decimalMax].
func (d *decimalTable) get(v int64) string { return d.all[d.off[v]:d.off[v+1]] }

// decimals builds the table on first use.
var decimals = sync.OnceValue(func() *decimalTable {
	var b strings.Builder
	b.Grow(6 * (decimalMax + 1))
	d := &decimalTable{off: make([]uint32, decimalMax+2)}
	var buf [20]byte
	for i := range decimalMax + 1 {
		b.Write(strconv.AppendInt(buf[:0], int64(i), 10))
		d.off[i+1] = uint32(b.Len())
	}
	d.all = b.String()
	return d
})
