package merger

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/slicesx"
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
type cursor struct {
	in       int
	name     string
	n        int // source rows
	order    []uint32
	gran     columns.Granularity
	next     int // next position in order to load
	times    source.LongCache
	ids      []*source.IDCache  // per output dimension; nil when the source lacks it or it is raw
	maps     [][]uint32         // per output dimension: source id -> merged id
	raws     []source.RawReader // per output dimension; nil unless raw and present
	w        keys               // the loaded rows
	dimNames []string           // output dimension names, for errors
	perm     []int32            // emission order over w; nil is identity
	pbuf     []int32            // perm's memory
	// For the rows of re-sorted groups of a source read in row order: the group's source
	// rows [glo, ghi), so that readers of other columns load the group once, in order,
	// instead of a chunk per row (ghi 0: not in a re-sorted group).
	glo, ghi []uint32
	// packBits[j] is the bits of output dimension j's merged ids (a group re-sorts on packed
	// keys, see sortPacked); nil when a dimension is not single-value.
	packBits []uint8
	idBits   int      // the sum of packBits
	kbuf     []uint64 // sortPacked's keys
	kbuf2    []uint64 // and its radix sort's scratch
	// With pre-aggregation, fillRange packs the window rows' ids (wkeys[i] for row i, as
	// packKeys does) chunk by chunk as it decodes them: packed says wkeys holds the window's.
	// Without pre-aggregation, a window whose rows the merge compares often (inputs that
	// interleave) is packed too, once cmps of its rows' comparisons went through the rows'
	// columns (see cmpHeads): a comparison is then of a time and a word.
	// hot: a window of the cursor was packed so (its input interleaves with others): the
	// next windows are packed as they load.
	wkeys  []uint64
	packed bool
	cmps   int
	hot    bool
	cur    int   // position in the emission order
	lastT  int64 // truncated time of the last loaded row
	fresh  bool  // nothing loaded yet
	// lazy: the window holds one stand-in row, not yet rows of the source (see wait).
	lazy bool
	// With rollup, same[p] tells whether the row at position p of the emission order has the
	// key of the row at p-1 (false at a window's first position and a group's).
	rollup bool
	same   []bool
	npos   int // emission positions in the window: its rows, or fewer with pre-aggregation
	// Pre-aggregation (see preagg.go): nil when off. aggs are the window's pre-aggregated
	// groups, slot[i] and weight[i] the slot at window row i and the rows it stands for.
	pre           *preAgg
	aggs          []*groupAgg
	slot, weight  []int32
	seen, seenSum []uint64 // preAggregate's bitmap of packed ids and its words' summary (clear between groups)
	rank          []int32  // per word of seen: the slots of the keys in the words before it
	aggLast       *groupAgg
	aggSeq        int64   // the batch aggLast was last added to
	count         []int32 // preAggregate's memory
	// A segment's times, read in row order, must lie in [tlo, thi] (its interval, within
	// columns.MinTime and MaxTime) and be in order: else the segment is corrupt.
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
	c.lazy = false
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
	if c.order == nil {
		if err := c.fillRange(ctx); err != nil {
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

// sortGroups sorts, stably, every group of the window that is not in key order, and sets the
// emission order (perm, nil while it is the identity) and npos. With pre-aggregation, a group
// that would re-sort instead emits one position per distinct key (see preAggregate).
func (c *cursor) sortGroups() {
	w := &c.w
	c.aggs = c.aggs[:0]
	if !c.rollup && c.inKeyOrder() {
		// Every group in key order, as inputs written sorted are: the identity order.
		c.npos = w.n
		return
	}
	if c.rollup {
		c.same = sized(c.same, w.n)
	}
	q := 0 // the next emission position: q <= start
	start := 0
	for start < w.n {
		end := start + 1
		sorted := true
		for end < w.n && w.time[end] == w.time[start] {
			if sorted {
				var x int
				if c.packed {
					x = cmp.Compare(c.wkeys[end-1], c.wkeys[end])
				} else {
					x = cmpDims(w, end-1, w, end)
				}
				if x > 0 {
					sorted = false
				} else if c.rollup {
					c.same[q+end-start] = x == 0
				}
			}
			end++
		}
		if c.rollup {
			c.same[q] = false
		}
		if sorted {
			if c.perm != nil {
				for i := start; i < end; i++ {
					c.perm[q+i-start] = int32(i)
				}
			}
			q += end - start
			start = end
			continue
		}
		if c.perm == nil { // the groups before are in order, a position a row: q == start
			c.pbuf = sized(c.pbuf, w.n)
			c.perm = c.pbuf
			for i := range start {
				c.perm[i] = int32(i)
			}
		}
		if c.order == nil && len(c.glo) == 0 {
			c.glo = sized(c.glo, w.n)
			c.ghi = sized(c.ghi, w.n)
			clear(c.ghi)
		}
		if c.pre != nil && c.order == nil {
			if g := c.preAggregate(start, end, q); g > 0 {
				q += g
				start = end
				continue
			}
		}
		if !c.sortPacked(start, end) {
			// perm[start:end] holds start..end-1 in order: ties broken by position give
			// the stable order at an unstable sort's cost (SortStableFunc's merges compared
			// O(n log² n) times, most of a rollup merge's CPU when an hour's rows re-sort).
			for i := start; i < end; i++ {
				c.perm[i] = int32(i)
			}
			slices.SortFunc(c.perm[start:end], func(a, b int32) int {
				if c := cmpDims(w, int(a), w, int(b)); c != 0 {
					return c
				}
				return cmp.Compare(a, b)
			})
			if c.rollup {
				for p := start + 1; p < end; p++ {
					c.same[p] = cmpDims(w, int(c.perm[p-1]), w, int(c.perm[p])) == 0
				}
			}
		}
		if q < start { // earlier groups took fewer positions than rows
			copy(c.perm[q:], c.perm[start:end])
			if c.rollup {
				copy(c.same[q+1:], c.same[start+1:end])
			}
		}
		if c.order == nil {
			lo, hi := w.src[start], w.src[end-1]+1
			for i := start; i < end; i++ {
				c.glo[i], c.ghi[i] = lo, hi
			}
		}
		q += end - start
		start = end
	}
	c.npos = q
}

// inKeyOrder reports whether every row of the window that has the time of the row before it
// comes after that row by key (or ties it). Rows of equal times are few where times are fine
// (milliseconds): one comparison of times a row, not a step of the groups' loop.
func (c *cursor) inKeyOrder() bool {
	w := &c.w
	times := w.time[:w.n]
	if c.packed { // the common case, without a call a tie
		keys := c.wkeys[:len(times)]
		for i := 1; i < len(times); i++ {
			if times[i] == times[i-1] && keys[i-1] > keys[i] {
				return false
			}
		}
		return true
	}
	for i := 1; i < len(times); i++ {
		if times[i] == times[i-1] && cmpDims(w, i-1, w, i) > 0 {
			return false
		}
	}
	return true
}

// packAfter is the comparisons through a window's columns after which cmpHeads packs the
// window's keys: inputs that interleave row by row compare every row several times, inputs
// that follow one another a few times a window (where packing would cost more than it saves).
const packAfter = 32

// cmpHeads compares window row i of c with window row j of o (rows of another cursor, or of
// c), by key: on packed keys when both windows hold them, else through the rows' columns.
func (c *cursor) cmpHeads(i int, o *cursor, j int) int {
	if c.packed && o.packed {
		if x := cmp.Compare(c.w.time[i], o.w.time[j]); x != 0 {
			return x
		}
		return cmp.Compare(c.wkeys[i], o.wkeys[j])
	}
	c.countCmp()
	o.countCmp()
	return cmpRows(&c.w, i, &o.w, j)
}

// countCmp counts a comparison through the window's columns, and packs the window's keys at
// the packAfter-th when they fit a word.
func (c *cursor) countCmp() {
	if c.packed || c.lazy || c.packBits == nil || c.idBits > 64 {
		return // a stand-in is compared with every window that comes before it
	}
	if c.cmps++; c.cmps < packAfter {
		return
	}
	c.pack()
}

// pack packs the window's keys (every dimension is single-value, and the ids fit a word).
func (c *cursor) pack() {
	n := c.w.n
	c.wkeys = sized(c.wkeys, n)
	for j := range c.w.dims {
		foldKeys(c.wkeys, c.w.dims[j].ids[:n], c.packBits[j], j == 0)
	}
	c.packed = true
}

// setPacking makes groups re-sort on packed keys when every output dimension is single-value:
// cards[j] is dimension j's merged cardinality.
func (c *cursor) setPacking(kinds []dimKind, cards []int) {
	c.packBits = make([]uint8, len(kinds))
	for j, k := range kinds {
		if k != kindSingle {
			c.packBits, c.idBits = nil, 0
			return
		}
		c.packBits[j] = uint8(bits.Len(uint(max(cards[j]-1, 0))))
		c.idBits += int(c.packBits[j])
	}
}

// sortPacked sorts perm[start:end] (the group's rows, in position order) by the rows' ids and
// then position, as sortGroups' comparison does, through one uint64 a row (the ids, most
// significant dimension first, then the position): a sort of integers, not of rows through a
// comparison function. It reports false, having done nothing, when the keys do not fit.
func (c *cursor) sortPacked(start, end int) bool {
	n := end - start
	posBits := bits.Len(uint(n - 1))
	if c.packBits == nil || c.idBits+posBits > 64 {
		return false
	}
	src := c.packKeys(start, end)
	keys := sized(c.kbuf, n) // src's memory unless src is the window's keys
	for i, k := range src {
		keys[i] = k<<posBits | uint64(i)
	}
	c.kbuf2 = radixSort(keys, sized(c.kbuf2, n), c.idBits+posBits)
	mask := uint64(1)<<posBits - 1
	perm := c.perm[start:end]
	for i, k := range keys {
		perm[i] = int32(start + int(k&mask))
	}
	if c.rollup {
		same := c.same[start:end]
		for i := 1; i < len(keys); i++ {
			same[i] = keys[i]>>posBits == keys[i-1]>>posBits
		}
	}
	c.kbuf = keys
	return true
}

// packKeys returns the packed ids of window rows [start, end) (most significant dimension
// first, packBits each): the window's keys when fillRange packed them (not to be written),
// else packed into kbuf's memory.
func (c *cursor) packKeys(start, end int) []uint64 {
	if c.packed {
		return c.wkeys[start:end]
	}
	w := &c.w
	keys := sized(c.kbuf, end-start)
	c.kbuf = keys
	clear(keys)
	for j := range w.dims {
		b := c.packBits[j]
		for i, id := range w.dims[j].ids[start:end] {
			keys[i] = keys[i]<<b | uint64(id)
		}
	}
	return keys
}

// radixSort sorts keys, whose values are below 2^width, by least significant digit first (11
// bits a pass, the passes a key's width needs), through tmp (of keys' length); it returns tmp
// for reuse. Small slices go to slices.Sort.
func radixSort(keys, tmp []uint64, width int) []uint64 {
	if len(keys) < 256 {
		slices.Sort(keys)
		return tmp
	}
	const digit = 11
	var count [1 << digit]int
	src, dst := keys, tmp
	for shift := 0; shift < width; shift += digit {
		clear(count[:])
		for _, k := range src {
			count[k>>shift&(1<<digit-1)]++
		}
		sum := 0
		for i, n := range count {
			count[i] = sum
			sum += n
		}
		for _, k := range src {
			d := k >> shift & (1<<digit - 1)
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
		return src
	}
	return dst
}

// fillRange loads the next batch of whole groups of a source read in row order, column by
// column: times first (which say where the batch ends), then each dimension chunk by chunk.
func (c *cursor) fillRange(ctx context.Context) error {
	w := &c.w
	p0 := c.next
	p := p0
	// The bucket of the last time truncated, [bucket, bucketEnd) (empty at first): a valid
	// time's bucket ends by MaxTime + a day, which fits an int64.
	width := c.gran.Millis()
	bucket, bucketEnd := int64(0), int64(0)
	// The loop keeps the cursor's fields and the window's times in locals, stored back after
	// it (an error ends the merge; unsorted reads lastT): as fields, each row loaded and
	// stored them.
	lastT, fresh, tlo, thi := c.lastT, c.fresh, c.tlo, c.thi
	times := w.time
	for p < c.n {
		first, vals, err := c.times.C.Chunk(p)
		if err != nil {
			return fmt.Errorf("merger: %s: __time: %w", c.name, err)
		}
		if k := p - first; k < 0 || k >= len(vals) {
			return fmt.Errorf("merger: %s: __time: chunk at %d does not hold row %d: %w", c.name, first, p, columns.ErrCorrupt)
		}
		full := false
		times = grown(times, len(vals)-(p-first))
		for _, t := range vals[p-first:] {
			if t < tlo || t > thi {
				return c.badTime(p, t)
			}
			if t >= bucket && t < bucketEnd {
				// Sorted times are mostly in the last row's bucket: its start is lastT, the
				// batch goes on and the order holds.
				t = bucket
			} else {
				if width > 1 {
					t = c.gran.Truncate(t)
				}
				if p-p0 >= cursorBatch && t != lastT {
					full = true // stop at a group boundary only
					break
				}
				if !fresh && t < lastT {
					c.lastT = lastT
					return c.unsorted(p, t)
				}
				fresh = false
				lastT = t
				bucket, bucketEnd = t, t+width
			}
			times = append(times, t)
			p++
			if (p-p0)&0xffff == 0 {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("merger: %w", err)
				}
			}
		}
		if full {
			break
		}
	}
	c.lastT, c.fresh, w.time = lastT, fresh, times
	n := p - p0
	w.n = n
	w.src = grown(w.src, n)[:n] // the window was empty
	for i := range w.src {
		w.src[i] = uint32(p0 + i)
	}
	// Packed keys for pre-aggregation (every dimension is single-value then), folded in a
	// chunk at a time while its ids are at hand.
	c.packed = c.pre != nil && c.packBits != nil && c.idBits <= maxSlotBits && !preAggOff
	if c.packed {
		c.wkeys = sized(c.wkeys, n) // the first dimension sets them
	}
	for j := range w.dims {
		d := &w.dims[j]
		if d.kind == kindSingle {
			d.ids = grown(d.ids, n)
		}
		switch d.kind {
		case kindSingle, kindMulti:
			ic := c.ids[j]
			if ic == nil { // the source lacks the dimension: null
				for range n {
					d.ids = append(d.ids, 0)
					if d.kind == kindMulti {
						d.offs = append(d.offs, uint32(len(d.ids)))
					}
				}
				if c.packed {
					foldKeys(c.wkeys, d.ids, c.packBits[j], j == 0)
				}
				continue
			}
			m := c.maps[j]
			for r := p0; r < p; {
				first, ids, offs, err := ic.C.Chunk(r)
				if err != nil {
					return fmt.Errorf("merger: %s: dimension %q: %w", c.name, c.dimName(j), err)
				}
				rows := len(ids)
				if offs != nil {
					rows = len(offs) - 1
				}
				if k := r - first; k < 0 || k >= rows {
					return fmt.Errorf("merger: %s: dimension %q: chunk at %d does not hold row %d: %w", c.name, c.dimName(j), first, r, columns.ErrCorrupt)
				}
				end := min(p, first+rows)
				if offs == nil {
					if d.kind == kindMulti {
						for _, id := range ids[r-first : end-first] {
							if int(id) >= len(m) {
								return c.badID(j, id, len(m))
							}
							d.ids = append(d.ids, m[id])
							d.offs = append(d.offs, uint32(len(d.ids)))
						}
					} else {
						// The check of each id is the map's bounds check (one compare, and no
						// other pass over the ids).
						src := ids[r-first : end-first]
						dst := slicesx.Extend(&d.ids, len(src))[:len(src)]
						for i, id := range src {
							if int(id) >= len(m) {
								return c.badID(j, id, len(m)) // the first, as the reading order meets it
							}
							dst[i] = m[id]
						}
					}
				} else {
					for k := r - first; k < end-first; k++ {
						row := ids[offs[k]:offs[k+1]]
						if d.kind == kindSingle && len(row) != 1 {
							return fmt.Errorf("merger: internal error: %s: row %d holds %d ids in a single-value dimension", c.name, first+k, len(row))
						}
						for _, id := range row {
							if int(id) >= len(m) {
								return c.badID(j, id, len(m))
							}
							d.ids = append(d.ids, m[id])
						}
						if d.kind == kindMulti {
							d.offs = append(d.offs, uint32(len(d.ids)))
						}
					}
				}
				if c.packed {
					foldKeys(c.wkeys[r-p0:end-p0], d.ids[r-p0:end-p0], c.packBits[j], j == 0)
				}
				r = end
			}
		case kindRaw:
			rr := c.raws[j]
			for r := p0; r < p; r++ {
				null := true
				if rr != nil {
					b, ok, err := rr.Bytes(r)
					if err != nil {
						return fmt.Errorf("merger: %s: dimension %q: %w", c.name, c.dimName(j), err)
					}
					null = !ok
					d.data = appendBytes(d.data, b)
				}
				d.null = append(d.null, null)
				d.offs = append(d.offs, uint32(len(d.data)))
			}
		}
	}
	c.next = p
	return nil
}

// foldKeys shifts each key b bits up and sets the id of its row below them; first: sets
// each key to its row's id.
func foldKeys(keys []uint64, ids []uint32, b uint8, first bool) {
	ids = ids[:len(keys)]
	if first {
		for i, id := range ids {
			keys[i] = uint64(id)
		}
		return
	}
	for i, id := range ids {
		keys[i] = keys[i]<<b | uint64(id)
	}
}

func (c *cursor) badID(j int, id uint32, card int) error {
	return fmt.Errorf("merger: %s: dimension %q: id %d not below the cardinality %d: %w", c.name, c.dimName(j), id, card, columns.ErrCorrupt)
}

func (c *cursor) dimName(j int) string {
	if j < len(c.dimNames) {
		return c.dimNames[j]
	}
	return fmt.Sprintf("#%d", j)
}
