package merger

import (
	"bytes"
	"cmp"
	"slices"
)

// dimKind is how a dimension takes part in a row's sort key.
type dimKind uint8

const (
	kindSingle dimKind = iota // one merged id per row (null is id 0)
	kindMulti                 // a list of merged ids per row (null is the null id alone)
	kindRaw                   // a raw string per row, or null
)

// keys holds the sort keys of a run of rows, column by column: truncated time, then each
// output dimension. Rows compare by time, then dimension by dimension in output order: ids
// (which follow value order, null first), id lists lexicographically (a prefix first), raw
// strings bytewise with null first.
type keys struct {
	n    int
	src  []uint32 // source row numbers (cursor windows only)
	time []int64
	dims []dimKeys
}

type dimKeys struct {
	kind dimKind
	ids  []uint32 // kindSingle: one per row; kindMulti: every row's ids back to back
	offs []uint32 // kindMulti, kindRaw: n+1 offsets into ids or data
	data []byte   // kindRaw
	null []bool   // kindRaw
}

func newKeys(kinds []dimKind) keys {
	k := keys{dims: make([]dimKeys, len(kinds))}
	for i, kd := range kinds {
		k.dims[i].kind = kd
		if kd != kindSingle {
			k.dims[i].offs = []uint32{0}
		}
	}
	return k
}

// reserve sizes k for rows rows, a raw dimension j's at about rawPerRow[j] bytes a row (a
// quarter more, for the rows past the estimate): its buffers then need not grow through copies.
func (k *keys) reserve(rows int, rawPerRow []int) {
	k.time = slices.Grow(k.time, rows)
	for j := range k.dims {
		d := &k.dims[j]
		switch d.kind {
		case kindSingle:
			d.ids = slices.Grow(d.ids, rows)
		case kindMulti:
			d.offs = slices.Grow(d.offs, rows+1)
		case kindRaw:
			d.offs = slices.Grow(d.offs, rows+1)
			d.null = slices.Grow(d.null, rows)
			d.data = slices.Grow(d.data, rawPerRow[j]*rows*5/4)
		}
	}
}

func (k *keys) reset() {
	k.n = 0
	k.src = k.src[:0]
	k.time = k.time[:0]
	for i := range k.dims {
		d := &k.dims[i]
		d.ids = d.ids[:0]
		d.data = d.data[:0]
		d.null = d.null[:0]
		if d.offs != nil {
			d.offs = d.offs[:1]
		}
	}
}

// appendRow copies row i of o (whose dimensions are of the same kinds) to the end of k.
func (k *keys) appendRow(o *keys, i int) {
	k.n++
	k.time = append(k.time, o.time[i])
	for j := range k.dims {
		d, s := &k.dims[j], &o.dims[j]
		switch d.kind {
		case kindSingle:
			d.ids = append(d.ids, s.ids[i])
		case kindMulti:
			d.ids = append(d.ids, s.ids[s.offs[i]:s.offs[i+1]]...)
			d.offs = append(d.offs, uint32(len(d.ids)))
		case kindRaw:
			d.data = appendBytes(d.data, s.data[s.offs[i]:s.offs[i+1]])
			d.offs = append(d.offs, uint32(len(d.data)))
			d.null = append(d.null, s.null[i])
		}
	}
}

// appendRange copies rows [a, e) of o (whose dimensions are of the same kinds) to the end of k.
func (k *keys) appendRange(o *keys, a, e int) {
	k.n += e - a
	k.time = append(k.time, o.time[a:e]...)
	for j := range k.dims {
		d, s := &k.dims[j], &o.dims[j]
		switch d.kind {
		case kindSingle:
			d.ids = append(d.ids, s.ids[a:e]...)
		case kindMulti:
			base := uint32(len(d.ids)) - s.offs[a]
			d.ids = append(d.ids, s.ids[s.offs[a]:s.offs[e]]...)
			for _, off := range s.offs[a+1 : e+1] {
				d.offs = append(d.offs, off+base)
			}
		case kindRaw:
			base := uint32(len(d.data)) - s.offs[a]
			d.data = appendBytes(d.data, s.data[s.offs[a]:s.offs[e]])
			for _, off := range s.offs[a+1 : e+1] {
				d.offs = append(d.offs, off+base)
			}
			d.null = append(d.null, s.null[a:e]...)
		}
	}
}

// appendBytes appends b to dst, doubling dst's capacity when it must grow: the raw values of a
// window or a batch are many and large, and append's growth by a quarter at these sizes leaves
// four times the final size behind as garbage, where doubling leaves once.
func appendBytes(dst, b []byte) []byte {
	if need := len(dst) + len(b); need > cap(dst) {
		grown := make([]byte, len(dst), max(need, 2*cap(dst), 4096))
		copy(grown, dst)
		dst = grown
	}
	return append(dst, b...)
}

// grown returns s with room for n more elements. When it must grow, it moves s's elements
// (not its whole capacity, as slices.Grow does) to a new array of at least twice s's
// capacity: a window that grows row by row to a large group then makes fresh arrays of twice
// the group's size at most, not five times, as append's growth by a quarter does (on this
// kind of machine the first touch of fresh memory is most of what a large window costs).
func grown[T any](s []T, n int) []T {
	if need := len(s) + n; need > cap(s) {
		g := make([]T, len(s), max(need, 2*cap(s)))
		copy(g, s)
		return g
	}
	return s
}

// grownTo is grown for a slice that holds at most limit elements: its capacity doubles up to
// limit, not past it (a bounded window's, which doubling would leave twice the bound).
func grownTo[T any](s []T, n, limit int) []T {
	if need := len(s) + n; need > cap(s) {
		g := make([]T, len(s), max(need, min(2*cap(s), limit)))
		copy(g, s)
		return g
	}
	return s
}

// sized returns n elements of s's memory when it holds them, else of a new array (copying
// nothing): their values are unspecified.
func sized[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s[:n]
	}
	return make([]T, n, n+n/4)
}

// cmpRows compares row i of a with row j of b.
func cmpRows(a *keys, i int, b *keys, j int) int {
	if c := cmp.Compare(a.time[i], b.time[j]); c != 0 {
		return c
	}
	return cmpDims(a, i, b, j)
}

// cmpDims compares the dimensions of row i of a with those of row j of b.
func cmpDims(a *keys, i int, b *keys, j int) int {
	for d := range a.dims {
		x, y := &a.dims[d], &b.dims[d]
		switch x.kind {
		case kindSingle:
			if c := cmp.Compare(x.ids[i], y.ids[j]); c != 0 {
				return c
			}
		case kindMulti:
			p, q := x.ids[x.offs[i]:x.offs[i+1]], y.ids[y.offs[j]:y.offs[j+1]]
			for t := 0; t < len(p) && t < len(q); t++ {
				if p[t] != q[t] {
					return cmp.Compare(p[t], q[t])
				}
			}
			if c := cmp.Compare(len(p), len(q)); c != 0 {
				return c
			}
		case kindRaw:
			if x.null[i] != y.null[j] {
				if x.null[i] {
					return -1
				}
				return 1
			}
			if c := bytes.Compare(x.data[x.offs[i]:x.offs[i+1]], y.data[y.offs[j]:y.offs[j+1]]); c != 0 {
				return c
			}
		}
	}
	return 0
}
