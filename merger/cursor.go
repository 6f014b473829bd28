package merger

import (
	"context"
	"fmt"
	"math"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/internal/source"
)

// cursorBatch is how many rows a cursor loads at a time (more when a group of equal truncated
// time continues past it).
const cursorBatch = 1024

// A cursor reads one source's rows in output key order. It loads rows in batches of whole
// groups (rows of equal truncated time): a source only promises non-decreasing time, so a
// group whose rows are not in key order (equal times in a different dimension order, or
// several times that one granularity bucket joins) is sorted, stably, before it is emitted.
// Memory is therefore bounded by the largest group, not by the source.
//
// Its state comes in parts, embedded so that their fields read as the cursor's: the window
// of rows loaded and its emission order (window), the rows' packed keys (packState), where
// it reads its source (sourceReader), its pre-aggregated groups (preAggState) and the check
// of a segment's times (segCheck). Files: cursor.go (loading, the stand-in row, advancing),
// fillrange.go (a window of a source read in row order), windoworder.go (re-sorting groups,
// packed keys, comparisons), preagg.go (pre-aggregation).
type cursor struct {
	in   int    // the input's place in the merge's sources: ties of keys break by it
	name string // the input's name, for errors
	window
	packState
	sourceReader
	preAggState
	segCheck
}

// window is the rows a cursor holds (loaded from its source, or its stand-in row) and where
// it stands in their emission order.
type window struct {
	w    keys    // the loaded rows
	perm []int32 // emission order over w; nil is identity
	pbuf []int32 // perm's memory
	cur  int     // position in the emission order
	npos int     // emission positions in the window: its rows, or fewer with pre-aggregation
	// lazy: the window holds one stand-in row, not yet rows of the source (see wait).
	lazy bool
	// paged: the window holds a page of a streamed group's slots (see loadPage): one row a
	// slot of aggs[0], in key order, its keys packed.
	paged bool
	// For the rows of re-sorted groups of a source read in row order: the group's source
	// rows [glo, ghi), so that readers of other columns load the group once, in order,
	// instead of a chunk per row (ghi 0: not in a re-sorted group).
	glo, ghi []uint32
	// With rollup, same[p] tells whether the row at position p of the emission order has the
	// key of the row at p-1 (false at a window's first position and a group's).
	rollup bool
	same   []bool
}

// packState is the packed keys of a cursor: a row's merged ids of every dimension in one
// word, most significant dimension first, packBits[j] bits for dimension j (see foldKeys).
// They exist when every output dimension is single-value and the ids fit a word.
//
// With pre-aggregation, fillRange packs the window rows' ids (wkeys[i] for row i, as
// packKeys does) chunk by chunk as it decodes them: packed says wkeys holds the window's.
// Without pre-aggregation, a window whose rows the merge compares often (inputs that
// interleave) is packed too, once cmps of its rows' comparisons went through the rows'
// columns (see cmpHeads): a comparison is then of a time and a word.
type packState struct {
	wkeys  []uint64
	packed bool
	cmps   int
	// hot: a window of the cursor was packed so (its input interleaves with others): the
	// next windows are packed as they load.
	hot bool
	// packBits[j] is the bits of output dimension j's merged ids (a group re-sorts on packed
	// keys, see sortPacked); nil when a dimension is not single-value.
	packBits []uint8
	idBits   int      // the sum of packBits
	kbuf     []uint64 // sortPacked's keys
	kbuf2    []uint64 // and its radix sort's scratch
}

// sourceReader is where a cursor reads its source: the source's columns, the maps of its
// dimensions' ids to merged ids, and how far it has read.
type sourceReader struct {
	n        int      // source rows
	order    []uint32 // the source rows in time order; nil: row order (see srcRow)
	gran     columns.Granularity
	next     int // next position in order to load
	times    source.LongCache
	ids      []*source.IDCache  // per output dimension; nil when the source lacks it or it is raw
	maps     [][]uint32         // per output dimension: source id -> merged id
	raws     []source.RawReader // per output dimension; nil unless raw and present
	dimNames []string           // output dimension names, for errors
	lastT    int64              // truncated time of the last loaded row
	fresh    bool               // nothing loaded yet
}

// preAggState is a cursor's pre-aggregation (see preagg.go): pre is nil when it is off. aggs
// are the window's pre-aggregated groups, slot[i] and weight[i] the slot at window row i and
// the rows it stands for.
type preAggState struct {
	pre           *preAgg
	aggs          []*groupAgg
	slot, weight  []int32
	seen, seenSum []uint64 // preAggregate's bitmap of packed ids and its words' summary (clear between groups)
	rank          []int32  // per word of seen: the slots of the keys in the words before it
	aggLast       *groupAgg
	aggSeq        int64   // the batch aggLast was last added to
	count         []int32 // preAggregate's memory
	pages         slotPages
	ahead         slotPages // the next group, streamed while pages' went out (see streamAhead)
	job           *aheadJob // the next group streaming, nil: none
	step          int       // the rows a window loads at a time as it streams; 0: maxWindowRows
	rekeyNext     bool      // the last group streamed kept no keys: nor does the next, from its first row
	freeBits      []keyBits // bitmaps of groups paged out
}

// segCheck is the check of a segment's times as a cursor reads them: they must lie in
// [tlo, thi] (its interval, within columns.MinTime and MaxTime) and be in order: else the
// segment is corrupt. A Builder's rows are not checked (seg false, [tlo, thi] every time).
type segCheck struct {
	seg      bool
	tlo, thi int64
	ivl      columns.Interval
}

// checkTimes makes the cursor check the times of seg (nil: a Builder's rows, whose times
// were checked as they were added) as Verify does: in order, within the segment's interval,
// and within [columns.MinTime, columns.MaxTime], the times every granularity can truncate
// and bucket without overflow.
func (c *cursor) checkTimes(seg *columns.Segment) {
	c.tlo, c.thi = math.MinInt64, math.MaxInt64
	if seg == nil {
		return
	}
	c.seg, c.ivl = true, seg.Interval()
	if c.ivl.Start >= c.ivl.End {
		c.tlo, c.thi = 1, 0 // no time
		return
	}
	c.tlo, c.thi = max(columns.MinTime, c.ivl.Start), min(columns.MaxTime, c.ivl.End-1)
}

// badTime describes the time t of row, outside [tlo, thi].
func (c *cursor) badTime(row int, t int64) error {
	if !c.ivl.Contains(t) {
		return fmt.Errorf("merger: %s: __time: row %d: time %d outside the segment's interval [%d, %d): %w", c.name, row, t, c.ivl.Start, c.ivl.End, columns.ErrCorrupt)
	}
	return fmt.Errorf("merger: %s: __time: row %d: time %d outside [%d, %d], the times a segment can hold: %w", c.name, row, t, columns.MinTime, columns.MaxTime, columns.ErrCorrupt)
}

// unsorted describes row, whose truncated time t comes after the previous row's.
func (c *cursor) unsorted(row int, t int64) error {
	if c.seg { // a segment is sorted by time: this one is corrupt
		return fmt.Errorf("%w: %s: row %d has time %d after a row of time %d: %w", ErrUnsorted, c.name, row, t, c.lastT, columns.ErrCorrupt)
	}
	return fmt.Errorf("%w: %s: row %d has time %d after a row of time %d", ErrUnsorted, c.name, row, t, c.lastT)
}

// groupRange returns the source rows of the re-sorted group holding window row i, or hi 0.
func (c *cursor) groupRange(i int) (lo, hi uint32) {
	if len(c.ghi) == 0 {
		return 0, 0
	}
	return c.glo[i], c.ghi[i]
}

func (c *cursor) head() int { return c.rowAt(c.cur) }

// rowAt returns the window row at position p of the emission order.
func (c *cursor) rowAt(p int) int {
	if c.perm != nil {
		return int(c.perm[p])
	}
	return p
}

// runEnd returns the end of the positions after the current one, up to limit, whose rows
// come before rival's head (all of them when rival is nil): positions are in key order, so
// the end is found by galloping (1, 2, 4... positions ahead: one comparison when no row comes
// before, as where inputs interleave row by row), then bisection.
func (c *cursor) runEnd(rival *cursor, limit int) int {
	lo := c.cur + 1 // rows [c.cur+1, lo) come before the rival
	if rival == nil || lo >= limit {
		return limit
	}
	before := func(i int) bool {
		if x := c.cmpHeads(c.rowAt(i), rival, rival.head()); x != 0 {
			return x < 0
		}
		return c.in < rival.in
	}
	hi := limit // row hi, when below limit, does not come before the rival
	for step := 1; ; step *= 2 {
		i := lo + step - 1
		if i >= limit {
			break
		}
		if !before(i) {
			hi = i
			break
		}
		lo = i + 1
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if before(m) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// wait makes the cursor's window a stand-in for its rows until the merge reaches them: one
// row of the source's first truncated time whose dimensions are the least values a row can
// hold (id 0, the empty list, null). It comes before or ties every row of the source, and
// ties break by input, so the merge still orders the cursor right; when the stand-in is the
// least head, the merge loads the window (fill) in its place. Inputs that follow one another
// in time so hold one window at a time, not one each; and the window's memory can be one
// that a finished cursor handed on (inherit).
func (c *cursor) wait() error {
	row := c.srcRow(0)
	t, err := c.times.At(row)
	if err != nil {
		return fmt.Errorf("merger: %s: __time: %w", c.name, err)
	}
	if t < c.tlo || t > c.thi {
		return c.badTime(row, t)
	}
	w := &c.w
	w.reset()
	w.n = 1
	w.time = append(w.time, c.gran.Truncate(t))
	for j := range w.dims {
		d := &w.dims[j]
		switch d.kind {
		case kindSingle:
			d.ids = append(d.ids, 0)
		case kindMulti:
			d.offs = append(d.offs, 0)
		case kindRaw:
			d.null = append(d.null, true)
			d.offs = append(d.offs, 0)
		}
	}
	c.w.src = append(c.w.src, uint32(row))
	c.cur, c.lazy, c.npos = 0, true, 1
	return nil
}

// inherit takes the memory of the window and sorts of o, a cursor that is done.
func (c *cursor) inherit(o *cursor) {
	c.w, o.w = o.w, c.w
	c.pbuf, c.glo, c.ghi, c.kbuf, c.kbuf2 = o.pbuf, o.glo[:0], o.ghi[:0], o.kbuf, o.kbuf2
	o.pbuf, o.glo, o.ghi, o.kbuf, o.kbuf2, o.perm = nil, nil, nil, nil, nil, nil
	c.wkeys, o.wkeys = o.wkeys, nil
	c.slot, c.weight, c.count = o.slot, o.weight, o.count
	o.slot, o.weight, o.count = nil, nil, nil
	if c.idBits == o.idBits {
		c.seen, c.seenSum, c.rank = o.seen, o.seenSum, o.rank
		o.seen, o.seenSum, o.rank = nil, nil, nil
	}
}

// done reports whether the cursor has no current row.
func (c *cursor) done() bool { return c.cur >= c.npos }

// advance moves to the next row, loading more when the window is used up.
func (c *cursor) advance(ctx context.Context) error {
	c.cur++
	if c.cur < c.npos {
		return nil
	}
	return c.fill(ctx)
}

func (c *cursor) srcRow(p int) int {
	if c.order != nil {
		return int(c.order[p])
	}
	return p
}

// fill loads the next batch of whole groups.
func (c *cursor) fill(ctx context.Context) error {
	c.lazy, c.paged = false, false
	c.w.reset()
	c.perm = nil
	c.hot = c.hot || c.packed && c.pre == nil
	c.packed, c.cmps = false, 0
	c.glo, c.ghi = c.glo[:0], c.ghi[:0]
	c.aggs = c.aggs[:0]
	c.cur = 0
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("merger: %w", err)
	}
	if c.pages.g != nil { // the next page of a streamed group's slots
		c.loadPage()
		return nil
	}
	if err := c.joinAhead(); err != nil {
		return err
	}
	if c.ahead.g != nil { // the group streamed ahead
		pg := c.ahead
		c.ahead = slotPages{}
		return c.startPages(ctx, pg)
	}
	if c.order == nil {
		streamed, err := c.fillRange(ctx)
		if err != nil || streamed {
			return err
		}
		c.npos = c.w.n
		if c.hot && !c.packed && c.w.n > 0 {
			c.pack()
		}
		if c.w.n > 1 {
			c.sortGroups()
		}
		return nil
	}
	for c.next < c.n {
		if c.w.n >= cursorBatch {
			if c.w.n&4095 == 0 {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("merger: %w", err)
				}
			}
			// Stop at a group boundary only.
			t, err := c.times.At(c.srcRow(c.next))
			if err != nil {
				return fmt.Errorf("merger: %s: __time: %w", c.name, err)
			}
			if c.gran.Truncate(t) != c.lastT {
				break
			}
		}
		if err := c.load(c.next); err != nil {
			return err
		}
		c.next++
	}
	c.npos = c.w.n
	if c.hot && c.w.n > 0 {
		c.pack()
	}
	if c.w.n > 1 {
		c.sortGroups()
	}
	return nil
}

// load appends the source row at position p to the window.
func (c *cursor) load(p int) error {
	row := c.srcRow(p)
	t, err := c.times.At(row)
	if err != nil {
		return fmt.Errorf("merger: %s: __time: %w", c.name, err)
	}
	t = c.gran.Truncate(t)
	if !c.fresh && t < c.lastT {
		return c.unsorted(row, t)
	}
	c.fresh = false
	c.lastT = t
	w := &c.w
	w.n++
	w.src = append(w.src, uint32(row))
	w.time = append(w.time, t)
	for j := range w.dims {
		d := &w.dims[j]
		switch d.kind {
		case kindSingle, kindMulti:
			ic := c.ids[j]
			if ic == nil { // the source lacks the dimension: null
				d.ids = append(d.ids, 0)
			} else {
				ids, err := ic.At(row)
				if err != nil {
					return fmt.Errorf("merger: %s: dimension %d: %w", c.name, j, err)
				}
				m := c.maps[j]
				for _, id := range ids {
					if int(id) >= len(m) {
						return fmt.Errorf("merger: %s: row %d: id %d not below the cardinality %d: %w", c.name, row, id, len(m), columns.ErrCorrupt)
					}
					d.ids = append(d.ids, m[id])
				}
				if d.kind == kindSingle && len(ids) != 1 {
					return fmt.Errorf("merger: internal error: %s: row %d holds %d ids in a single-value dimension", c.name, row, len(ids))
				}
			}
			if d.kind == kindMulti {
				d.offs = append(d.offs, uint32(len(d.ids)))
			}
		case kindRaw:
			null := true
			if r := c.raws[j]; r != nil {
				b, ok, err := r.Bytes(row)
				if err != nil {
					return fmt.Errorf("merger: %s: dimension %d: %w", c.name, j, err)
				}
				null = !ok
				d.data = appendBytes(d.data, b)
			}
			d.null = append(d.null, null)
			d.offs = append(d.offs, uint32(len(d.data)))
		}
	}
	return nil
}

func (c *cursor) badID(j int, id uint32, card int) error {
	return badID(c.name, c.dimName(j), id, card)
}

// badID is the error of an id of input name's dimension dim past the dictionary's card ids.
func badID(name, dim string, id uint32, card int) error {
	return fmt.Errorf("merger: %s: dimension %q: id %d not below the cardinality %d: %w", name, dim, id, card, columns.ErrCorrupt)
}

func (c *cursor) dimName(j int) string {
	if j < len(c.dimNames) {
		return c.dimNames[j]
	}
	return fmt.Sprintf("#%d", j)
}
