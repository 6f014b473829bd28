package main

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/axiomhq/hyperloglog"

	"github.com/writeout/writeout/columns"
)

// batch holds rows in memory in compact form until they are sorted, rolled up and written as
// one segment: dimension values are interned per batch, so a row costs its time, four bytes per
// dimension value and eight per metric. Its slices keep their capacity across reset, so a long
// ingestion reuses the memory of its first batch.
type batch struct {
	schema  columns.Schema
	times   []int64
	dims    []dimCol
	longs   [][]int64   // by metric; nil unless a long metric (count included)
	doubles [][]float64 // by metric; nil unless a double metric
	hyper   []dictCol   // by metric; used by hyperUnique metrics only
	// scratch for writing
	perm   []uint32
	groups []uint32 // start of each output row's group in perm, plus len(perm)
}

const nullID = math.MaxUint32

// dictCol is one interned string column: per row one id (single) or a list (multi).
type dictCol struct {
	raw    bool // raw dimension: ids index values, which holds every row's string
	multi  bool
	index  map[string]uint32
	values []string
	ids    []uint32 // single: one per row, nullID for null; multi: the lists back to back
	offs   []uint32 // multi: where each row's list ends in ids
	// After sort: rank[id] is the id's position in sorted order.
	rank []uint32
}

type dimCol = dictCol

func newBatch(s columns.Schema) *batch {
	b := &batch{schema: s, dims: make([]dimCol, len(s.Dimensions)), longs: make([][]int64, len(s.Metrics)),
		doubles: make([][]float64, len(s.Metrics)), hyper: make([]dictCol, len(s.Metrics))}
	for i, d := range s.Dimensions {
		b.dims[i] = dictCol{raw: d.Raw, multi: d.MultiValue, index: map[string]uint32{}}
	}
	for i := range s.Metrics {
		b.hyper[i].index = map[string]uint32{}
	}
	return b
}

func (b *batch) rows() int { return len(b.times) }

func (b *batch) reset() {
	b.times = b.times[:0]
	for i := range b.dims {
		b.dims[i].reset()
	}
	for i := range b.longs {
		b.longs[i] = b.longs[i][:0]
		b.doubles[i] = b.doubles[i][:0]
		b.hyper[i].reset()
	}
}

func (c *dictCol) reset() {
	clear(c.index)
	clear(c.values) // let the strings go
	c.values = c.values[:0]
	c.ids = c.ids[:0]
	c.offs = c.offs[:0]
	c.rank = c.rank[:0]
}

func (c *dictCol) intern(s string) uint32 {
	if c.raw {
		c.values = append(c.values, strings.Clone(s))
		return uint32(len(c.values) - 1)
	}
	if id, ok := c.index[s]; ok {
		return id
	}
	s = strings.Clone(s) // do not pin the input line the string came from
	id := uint32(len(c.values))
	c.index[s] = id
	c.values = append(c.values, s)
	return id
}

// add appends a row. Strings are copied.
func (b *batch) add(r *inRow) {
	b.times = append(b.times, r.time)
	for i := range b.dims {
		c := &b.dims[i]
		v := r.dims[i]
		if c.multi {
			for _, s := range v {
				c.ids = append(c.ids, c.intern(s))
			}
			c.offs = append(c.offs, uint32(len(c.ids)))
			continue
		}
		if len(v) == 0 {
			c.ids = append(c.ids, nullID)
		} else {
			c.ids = append(c.ids, c.intern(v[0]))
		}
	}
	for i, m := range b.schema.Metrics {
		switch m.ValueType() {
		case columns.MetricLong:
			b.longs[i] = append(b.longs[i], r.longs[i])
		case columns.MetricDouble:
			b.doubles[i] = append(b.doubles[i], r.doubles[i])
		case columns.MetricHyperUnique:
			h := &b.hyper[i]
			if r.hyperSet[i] {
				h.ids = append(h.ids, h.intern(r.hyper[i]))
			} else {
				h.ids = append(h.ids, nullID)
			}
		}
	}
}

// row returns dimension c's ids of row r.
func (c *dictCol) row(r uint32) []uint32 {
	if !c.multi {
		return c.ids[r : r+1]
	}
	start := uint32(0)
	if r > 0 {
		start = c.offs[r-1]
	}
	return c.ids[start:c.offs[r]]
}

// isNull reports whether row r of c is null.
func (c *dictCol) isNull(r uint32) bool {
	if c.multi {
		return len(c.row(r)) == 0
	}
	return c.ids[r] == nullID
}

// sortDict computes rank: dictionary dimensions' ids in value order.
func (c *dictCol) sortDict() {
	if c.raw {
		return
	}
	order := make([]uint32, len(c.values))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return strings.Compare(c.values[a], c.values[b]) })
	c.rank = slices.Grow(c.rank[:0], len(order))[:len(order)]
	for pos, id := range order {
		c.rank[id] = uint32(pos)
	}
}

// cmpDim compares rows a and b of dimension c in segment order: null first, values in
// dictionary order, lists element by element (a prefix first); raw strings byte-wise.
func (c *dictCol) cmpRows(a, b uint32) int {
	if !c.multi {
		x, y := c.ids[a], c.ids[b]
		if x == y {
			return 0
		}
		if x == nullID || y == nullID {
			if x == nullID {
				return -1
			}
			return 1
		}
		if c.raw {
			return strings.Compare(c.values[x], c.values[y])
		}
		return cmp.Compare(c.rank[x], c.rank[y])
	}
	ra, rb := c.row(a), c.row(b)
	for i := 0; i < len(ra) && i < len(rb); i++ {
		if ra[i] != rb[i] {
			return cmp.Compare(c.rank[ra[i]], c.rank[rb[i]])
		}
	}
	return cmp.Compare(len(ra), len(rb))
}

// sort orders the rows by (time, dimensions) and, with rollup, groups equal keys. Equal keys
// keep their input order.
func (b *batch) sort() {
	n := b.rows()
	for i := range b.dims {
		b.dims[i].sortDict()
	}
	b.perm = slices.Grow(b.perm[:0], n)[:n]
	for i := range b.perm {
		b.perm[i] = uint32(i)
	}
	cmpKey := func(x, y uint32) int {
		if c := cmp.Compare(b.times[x], b.times[y]); c != 0 {
			return c
		}
		for i := range b.dims {
			if c := b.dims[i].cmpRows(x, y); c != 0 {
				return c
			}
		}
		return 0
	}
	slices.SortFunc(b.perm, func(x, y uint32) int {
		if c := cmpKey(x, y); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	b.groups = b.groups[:0]
	for i := range b.perm {
		if i == 0 || !b.schema.Rollup || cmpKey(b.perm[i-1], b.perm[i]) != 0 {
			b.groups = append(b.groups, uint32(i))
		}
	}
	b.groups = append(b.groups, uint32(n))
}

// outRows returns the number of rows the batch writes (after rollup); valid after sort.
func (b *batch) outRows() int { return len(b.groups) - 1 }

// write sorts the batch and writes it to w, column by column.
func (b *batch) write(w *columns.Writer) error {
	b.sort()
	nOut := b.outRows()
	first := func(g int) uint32 { return b.perm[b.groups[g]] }
	tw, err := w.Time()
	if err != nil {
		return err
	}
	for g := range nOut {
		if err := tw.Append(b.times[first(g)]); err != nil {
			return err
		}
	}
	for i, d := range b.schema.Dimensions {
		c := &b.dims[i]
		if d.Raw {
			rw, err := w.Raw(d.Name)
			if err != nil {
				return err
			}
			for g := range nOut {
				r := first(g)
				if c.isNull(r) {
					err = rw.AppendNull()
				} else {
					err = rw.Append(c.values[c.ids[r]])
				}
				if err != nil {
					return err
				}
			}
			continue
		}
		if err := b.writeDim(w, d, c, nOut, first); err != nil {
			return err
		}
	}
	for i, m := range b.schema.Metrics {
		var err error
		switch m.ValueType() {
		case columns.MetricLong:
			err = b.writeLong(w, m, b.longs[i], nOut)
		case columns.MetricDouble:
			err = b.writeDouble(w, m, b.doubles[i], nOut)
		case columns.MetricHyperUnique:
			err = b.writeSketch(w, m, &b.hyper[i], nOut)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (b *batch) writeDim(w *columns.Writer, d columns.Dimension, c *dictCol, nOut int, first func(int) uint32) error {
	dw, err := w.Dim(d.Name)
	if err != nil {
		return err
	}
	hasNull := false
	for g := range nOut {
		if c.isNull(first(g)) {
			hasNull = true
			break
		}
	}
	// The dictionary: rank order; written ids are rank (+1 when null has id 0).
	shift := uint32(0)
	if hasNull {
		if err := dw.AddNull(); err != nil {
			return err
		}
		shift = 1
	}
	sorted := make([]string, len(c.values))
	for id, r := range c.rank {
		sorted[r] = c.values[id]
	}
	for _, v := range sorted {
		if _, err := dw.AddValue(v); err != nil {
			return err
		}
	}
	card := len(sorted) + int(shift)
	// The rows, counting the entries of each id for the bitmaps.
	counts := make([]uint32, card+1)
	var ids []uint32
	for g := range nOut {
		r := first(g)
		if c.isNull(r) {
			counts[0]++
			if err := dw.AppendNull(); err != nil {
				return err
			}
			continue
		}
		ids = ids[:0]
		for _, id := range c.row(r) {
			nid := c.rank[id] + shift
			ids = append(ids, nid)
			counts[nid]++
		}
		if err := dw.AppendIDs(ids); err != nil {
			return err
		}
	}
	if d.NoBitmapIndex {
		return nil
	}
	// The bitmaps: a counting sort of (id, row) pairs, then one bitmap at a time.
	start := make([]uint32, card+1)
	for id := 1; id <= card; id++ {
		start[id] = start[id-1] + counts[id-1]
	}
	rowsOf := make([]uint32, start[card])
	next := slices.Clone(start[:card])
	for g := range nOut {
		r := first(g)
		if c.isNull(r) {
			rowsOf[next[0]] = uint32(g)
			next[0]++
			continue
		}
		for _, id := range c.row(r) {
			nid := c.rank[id] + shift
			rowsOf[next[nid]] = uint32(g)
			next[nid]++
		}
	}
	for id := range card {
		bm := roaring.BitmapOf(rowsOf[start[id]:start[id+1]]...) // duplicates within a row collapse
		bm.RunOptimize()
		if err := dw.WriteBitmap(uint32(id), bm); err != nil {
			return err
		}
	}
	return nil
}

func (b *batch) writeLong(w *columns.Writer, m columns.Metric, vals []int64, nOut int) error {
	lw, err := w.Long(m.Name)
	if err != nil {
		return err
	}
	return aggregateGroups(b, m.Aggregator, vals, nOut, lw.Append)
}

func (b *batch) writeDouble(w *columns.Writer, m columns.Metric, vals []float64, nOut int) error {
	dw, err := w.Double(m.Name)
	if err != nil {
		return err
	}
	return aggregateGroups(b, m.Aggregator, vals, nOut, dw.Append)
}

// aggregateGroups hands add, for each of the nOut groups, agg over the vals of its rows: the
// minimum, the maximum, or else (count, longSum, doubleSum) the sum.
func aggregateGroups[T int64 | float64](b *batch, agg columns.Aggregator, vals []T, nOut int, add func(T) error) error {
	for g := range nOut {
		rows := b.perm[b.groups[g]:b.groups[g+1]]
		v := vals[rows[0]]
		for _, r := range rows[1:] {
			x := vals[r]
			switch agg {
			case columns.AggLongMin, columns.AggDoubleMin:
				v = min(v, x)
			case columns.AggLongMax, columns.AggDoubleMax:
				v = max(v, x)
			default:
				v += x
			}
		}
		if err := add(v); err != nil {
			return err
		}
	}
	return nil
}

func (b *batch) writeSketch(w *columns.Writer, m columns.Metric, h *dictCol, nOut int) error {
	sw, err := w.Sketch(m.Name)
	if err != nil {
		return err
	}
	for g := range nOut {
		sk := hyperloglog.New()
		for _, r := range b.perm[b.groups[g]:b.groups[g+1]] {
			if id := h.ids[r]; id != nullID {
				sk.Insert([]byte(h.values[id]))
			}
		}
		if err := sw.Append(sk); err != nil {
			return err
		}
	}
	return nil
}

// memBytes estimates the memory the batch holds, for reports.
func (b *batch) memBytes() int64 {
	n := int64(cap(b.times))*8 + int64(cap(b.perm))*4
	for i := range b.dims {
		n += b.dims[i].memBytes()
	}
	for i := range b.longs {
		n += int64(cap(b.longs[i]))*8 + int64(cap(b.doubles[i]))*8 + b.hyper[i].memBytes()
	}
	return n
}

func (c *dictCol) memBytes() int64 {
	n := int64(cap(c.ids))*4 + int64(cap(c.offs))*4 + int64(cap(c.values))*16
	for _, v := range c.values {
		n += int64(len(v))
	}
	return n
}
