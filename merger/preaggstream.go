package merger

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/writeout/writeout/columns"
)

// Streamed pre-aggregation. A group (rows of one truncated time) of more than maxWindowRows
// rows does not load into the window whole: it goes through it maxWindowRows rows at a time,
// each chunk's packed keys marking the group's bitmap of keys (as preAggregate's do) and kept
// for the metric tasks in memory (4 bytes a row), or, past maxMemGroupRows rows, not kept: the
// tasks read them again (see rekey.go). Once the group ends, the keys kept in memory become
// slots (their rank in the bitmap), and the window holds the group's slots, one row per distinct key in key order, as
// preAggregate leaves them, a page of at most maxWindowRows slots at a time. What a cursor
// holds then is bounded whatever the group's rows and distinct keys (at most 2^maxSlotBits).

// maxWindowRows bounds the rows a pre-aggregating cursor's window loads at a time (a
// variable for tests).
var maxWindowRows = 1 << 14

// maxMemGroupRows bounds the rows of a streamed group whose keys stay in memory (4 bytes a
// row): the metric tasks read a larger group's keys again (a variable for tests).
var maxMemGroupRows = 1 << 18

// For tests: rekeyedGroups counts the groups whose keys were not kept (rekeyedFromStart those
// not from their first row, as the group before), pagedGroups those whose slots went through
// the window in more than one page, aheadGroups those streamed ahead.
var rekeyedGroups, rekeyedFromStart, pagedGroups, aheadGroups atomic.Int64

// For tests: windowRowsPeak is the most rows a window of a source read in row order loaded at
// once.
var windowRowsPeak atomicMax

// atomicMax holds the largest value noted.
type atomicMax struct{ v atomic.Int64 }

func (m *atomicMax) note(v int64) {
	for {
		old := m.v.Load()
		if v <= old || m.v.CompareAndSwap(old, v) {
			return
		}
	}
}

// canStream reports whether the cursor's groups pre-aggregate as they load, through windows
// of maxWindowRows rows.
func (c *cursor) canStream() bool {
	return c.pre != nil && c.order == nil && c.packBits != nil && c.idBits <= maxSlotBits && !preAggOff
}

// streamGroup loads the group that starts at source row p0 and goes on past p (the window
// holds the times of rows [p0, p)), chunk by chunk, and leaves the first page of its slots in
// the window, with their emission order (the next fills load the others, see slotPages).
func (c *cursor) streamGroup(ctx context.Context, p0, p int) error {
	pg, err := c.streamInto(ctx, p0, p)
	if err != nil {
		return err
	}
	return c.startPages(ctx, pg)
}

// startPages makes pg the group whose slots the window pages through: the long tasks start to
// combine its rows (see preloads), the cursor streams its next group meanwhile when that one
// streams too (streamAhead), and the window takes pg's first page.
func (c *cursor) startPages(ctx context.Context, pg slotPages) error {
	c.pages = pg
	c.pre.loads.start(pg.g)
	if err := c.streamAhead(ctx); err != nil {
		return err
	}
	c.loadPage()
	return nil
}

// streamAhead starts to stream the group at c.next, on a goroutine of its own (see
// streamer), when it has more rows than a window holds (a look at the times of its first row
// and the row a window later says so): its slots page through the window once pg's are out
// (joinAhead), and meanwhile the merge emits pg's slots and the long tasks combine pg's rows.
func (c *cursor) streamAhead(ctx context.Context) error {
	k := max(maxWindowRows, 1)
	p0 := c.next
	if p0+k >= c.n {
		return nil
	}
	t0, err := c.times.At(p0)
	if err != nil {
		return fmt.Errorf("merger: %s: __time: %w", c.name, err)
	}
	tk, err := c.times.At(p0 + k)
	if err != nil {
		return fmt.Errorf("merger: %s: __time: %w", c.name, err)
	}
	if t0 < c.tlo || t0 > c.thi || tk < c.tlo || tk > c.thi || c.gran.Truncate(t0) != c.gran.Truncate(tk) {
		return nil // not one group (or a bad time, which the group's fill reports)
	}
	if !c.pre.loads.aheadSlot() {
		return nil // enough groups stream ahead: this one streams when its turn comes
	}
	sh := c.streamer()
	job := &aheadJob{done: make(chan struct{}), sh: sh}
	c.job = job
	c.pre.loads.wg.Add(1) // the merge waits for it, whatever becomes of the merge
	go func() {
		defer c.pre.loads.wg.Done()
		defer c.pre.loads.aheadDone()
		defer close(job.done)
		sh.w.reset()
		p, cut, err := sh.fillTimes(ctx, sh.streamRows(), 1)
		switch {
		case err != nil:
			job.err = err
		case !cut: // sorted times between two of one bucket are all of it (and more than a step)
			job.err = fmt.Errorf("merger: %s: __time: rows %d to %d are not in order: %w", c.name, p0, p0+k, columns.ErrCorrupt)
		default:
			if job.pg, job.err = sh.streamInto(ctx, p0, p); job.err == nil {
				c.pre.loads.startEarly(job.pg.g)
			}
		}
	}()
	return nil
}

// aheadStep bounds the rows a streamer loads at a time: its window holds nothing else, and
// each input's is held beside the cursor's window (a quarter of it).
const aheadStep = 1 << 12

// streamRows returns the rows a window of c takes at a time as it streams a group.
func (c *cursor) streamRows() int {
	if c.step > 0 {
		return c.step
	}
	return max(maxWindowRows, 1)
}

// aheadJob is a group streaming ahead on sh: pg is its slots once done is closed, unless err.
// sh's window and buffers go with the job: of the merge's inputs, few stream ahead at once.
type aheadJob struct {
	done chan struct{}
	sh   *cursor
	pg   slotPages
	err  error
}

// streamer returns the cursor that streams c's groups ahead: a copy of c's source readers and
// position (c does not read its source while it streams), its packing and pre-aggregation,
// with a window, buffers and a clear bitmap of keys of its own.
func (c *cursor) streamer() *cursor {
	kinds := make([]dimKind, len(c.w.dims))
	for j, d := range c.w.dims {
		kinds[j] = d.kind
	}
	sh := &cursor{in: c.in, name: c.name, window: window{w: newKeys(kinds), rollup: c.rollup},
		packState: packState{packBits: c.packBits, idBits: c.idBits}, segCheck: c.segCheck}
	sh.pre, sh.step, sh.rekeyNext = c.pre, min(max(maxWindowRows, 1), aheadStep), c.rekeyNext
	sh.sourceReader = c.sourceReader
	// Two clear bitmaps: one the group marks (and its pages take), one left clear for the next.
	for range 2 {
		if n := len(c.freeBits); n > 0 {
			sh.freeBits = append(sh.freeBits, c.freeBits[n-1])
			c.freeBits = c.freeBits[:n-1]
		}
	}
	if n := len(sh.freeBits); n > 0 {
		sh.seen, sh.seenSum = sh.freeBits[n-1].seen, sh.freeBits[n-1].sum
		sh.freeBits = sh.freeBits[:n-1]
	}
	return sh
}

// joinAhead waits for the group streaming ahead, if one is, and takes its slots (c.ahead) and
// the source position its streamer reached.
func (c *cursor) joinAhead() error {
	job := c.job
	if job == nil {
		return nil
	}
	<-job.done
	c.job = nil
	if job.err != nil {
		return job.err
	}
	sh := job.sh
	c.sourceReader, c.rekeyNext = sh.sourceReader, sh.rekeyNext
	// The clear bitmaps come back (the group's went with its pages).
	c.freeBits = append(c.freeBits, sh.freeBits...)
	if sh.seen != nil {
		c.freeBits = append(c.freeBits, keyBits{seen: sh.seen, sum: sh.seenSum})
	}
	c.ahead = job.pg
	aheadGroups.Add(1)
	return nil
}

// streamInto streams the group that starts at source row p0 and goes on past p (the window
// holds the times of rows [p0, p)) and returns its slots to page.
func (c *cursor) streamInto(ctx context.Context, p0, p int) (slotPages, error) {
	w := &c.w
	t := c.lastT
	words := 1 + (1<<c.idBits-1)>>6
	if len(c.seen) != words {
		c.seen, c.seenSum = make([]uint64, words), make([]uint64, 1+(words-1)>>6)
	}
	if len(c.rank) != words {
		c.rank = make([]int32, words)
	}
	seen, sum, rank := c.seen, c.seenSum, c.rank
	st := groupStage{c: c}
	if c.rekeyNext {
		// The cursor's last group kept no keys: neither does this one, from its first row,
		// rather than after its first memGroupRows rows' keys filled an array (each input's,
		// at once, in a rollup of overlapping inputs: five held 5-10 MiB of them).
		st.rekey = true
		rekeyedFromStart.Add(1)
	} else {
		st.gid = c.pre.get(0)[:0]
	}
	released := p0
	for lo, cut := p0, true; ; {
		if err := c.loadDims(lo, p); err != nil {
			return slotPages{}, err
		}
		windowRowsPeak.note(int64(w.n))
		st.add(c.wkeys[:w.n])
		c.next = p
		if !cut { // the group's last rows
			break
		}
		if err := ctx.Err(); err != nil {
			return slotPages{}, fmt.Errorf("merger: %w", err)
		}
		if err := c.pre.releaseEvery(int32(c.in), p, &released); err != nil {
			return slotPages{}, err
		}
		w.reset()
		lo = p
		var err error
		// The group's next rows, up to its end (minRows 0) or the limit.
		if p, cut, err = c.fillTimes(ctx, c.streamRows(), 0); err != nil {
			return slotPages{}, err
		}
	}
	preAggGroups.Add(1)
	c.rekeyNext = st.rekey
	summarize(seen, sum)
	slots := 0
	for si, x := range sum {
		for ; x != 0; x &= x - 1 {
			wi := si<<6 | bits.TrailingZeros64(x)
			rank[wi] = int32(slots)
			slots += bits.OnesCount64(seen[wi])
		}
	}
	g := &groupAgg{in: int32(c.in), lo: uint32(p0), hi: uint32(p0 + st.rows), slots: slots, pre: c.pre}
	if st.rekey {
		rekeyedGroups.Add(1)
		g.rekey, g.seen, g.rank = true, slices.Clone(seen), slices.Clone(rank)
	} else if gid := st.gid; slots <= narrowSlots {
		g16 := c.pre.get16(len(gid))
		for i, k := range gid {
			g16[i] = uint16(slotOf(seen, rank, uint64(k)))
		}
		g.gid16 = g16
		toPool(c.pre.pool, gid[:0]) // the keys' array is free at once, for the next group
	} else {
		for i, k := range gid {
			gid[i] = slotOf(seen, rank, uint64(k))
		}
		g.gid = gid
	}
	g.setUsers(c.pre.users)
	if slots > max(maxWindowRows, 1) {
		pagedGroups.Add(1)
	}
	// The group's bitmap of keys goes with its pages; the next group's is clear.
	pg := slotPages{g: g, t: t, seen: seen, sum: sum}
	if n := len(c.freeBits); n > 0 {
		c.seen, c.seenSum = c.freeBits[n-1].seen, c.freeBits[n-1].sum
		c.freeBits = c.freeBits[:n-1]
	} else {
		c.seen, c.seenSum = make([]uint64, len(seen)), make([]uint64, len(sum))
	}
	return pg, nil
}

// slotPages is a streamed group whose slots go through the window a page (at most
// maxWindowRows slots) at a time, in key order: the keys still to load are the bits left in
// the cursor's bitmap of the group's keys (seen, seenSum), which loadPage clears as it loads
// them. What the window holds of a group is then bounded as its rows are, however many
// distinct keys it has; the metric tasks still combine the group's rows into one
// accumulator a slot (see slotAccs).
//
// A slot's weight (the rows it stands for, which only the merge's progress counts) is the
// group's rows shared evenly, the remainder on its last slot: the rows of each key are not
// counted.
type slotPages struct {
	g  *groupAgg // nil: no page to load
	t  int64     // the group's truncated time
	s0 int       // the slot the next page starts at
	si int       // sum's word of the next page's first key (the words before it are clear)
	// seen and sum are the group's keys still to load and their words' summary, the
	// cursor's bitmap (seen, seenSum) as the group left it.
	seen, sum []uint64
}

// keyBits is a bitmap of packed keys and its words' summary, clear, kept for a later group.
type keyBits struct{ seen, sum []uint64 }

// loadPage loads the next page of the streamed group's slots into the window (which is
// empty): a row per slot, its key read off the bitmap and unpacked a dimension at a time.
// Window row i is slot s0+i: the group's pos and row0 say so to slotSpan and appendSlots.
func (c *cursor) loadPage() {
	pg := &c.pages
	g := pg.g
	n := min(g.slots-pg.s0, max(maxWindowRows, 1))
	w := &c.w
	w.reset()
	w.n = n
	c.wkeys = sized(c.wkeys, n)
	c.slot, c.weight = sized(c.slot, n), sized(c.weight, n)
	dk, weight := c.wkeys, c.weight
	seen, sum := pg.seen, pg.sum
	si := pg.si
	for q := 0; q < n; {
		x := sum[si]
		if x == 0 {
			si++
			continue
		}
		wi := si<<6 | bits.TrailingZeros64(x)
		y := seen[wi]
		for ; y != 0 && q < n; y &= y - 1 {
			k := wi<<6 | bits.TrailingZeros64(y)
			dk[q] = uint64(k)
			q++
		}
		if seen[wi] = y; y == 0 {
			sum[si] = x & (x - 1)
		}
	}
	rows := int(g.hi - g.lo)
	for i := range weight {
		weight[i] = int32(rows / g.slots)
	}
	if pg.s0+n == g.slots {
		weight[n-1] += int32(rows % g.slots)
	}
	c.packed = true
	lo, hi := g.lo, g.hi
	w.time = grown(w.time, n)[:n]
	w.src = grown(w.src, n)[:n]
	for i := range n {
		w.time[i], w.src[i] = pg.t, lo+uint32(pg.s0+i)
	}
	shift := 0
	for j := len(w.dims) - 1; j >= 0; j-- {
		b := c.packBits[j]
		mask := uint64(1)<<b - 1
		ids := grown(w.dims[j].ids, n)[:n]
		for i, k := range dk {
			ids[i] = uint32(k >> shift & mask)
		}
		w.dims[j].ids = ids
		shift += int(b)
	}
	c.glo, c.ghi = sized(c.glo, n), sized(c.ghi, n)
	c.same = sized(c.same, n)
	for i := range n {
		c.glo[i], c.ghi[i] = lo, hi
		c.slot[i] = int32(pg.s0 + i)
	}
	clear(c.same)
	c.perm = nil // the slots are in key order
	c.paged = true
	c.aggs = append(c.aggs[:0], g)
	g.pos, g.row0 = -pg.s0, -pg.s0
	c.npos = n
	if pg.s0 += n; pg.s0 == g.slots {
		c.freeBits = append(c.freeBits, keyBits{seen: pg.seen, sum: pg.sum}) // all clear now
		*pg = slotPages{}
	} else {
		pg.si = si
	}
}

// groupStage is where a streamed group's rows' keys go as they load: appended to gid, up to
// maxMemGroupRows rows (or the merge's bound); past them, nowhere (rekey).
type groupStage struct {
	c     *cursor
	gid   []int32
	rows  int
	rekey bool
}

// summarize sets the bit of every word of seen that is not zero in sum, its summary, once
// a streamed group's keys are all marked: a group streams more rows than seen has words
// (2^14 at least, against 2^14 words at maxSlotBits), and each row marked the summary too.
func summarize(seen, sum []uint64) {
	for wi, x := range seen {
		if x != 0 {
			sum[wi>>6] |= 1 << (wi & 63)
		}
	}
}

// add marks keys, the packed keys of the group's next rows, in the cursor's bitmap of the
// group's keys (not in its summary: see summarize) and keeps them while the group's rows are
// within the bound.
func (st *groupStage) add(keys []uint64) {
	c := st.c
	seen := c.seen
	for _, k := range keys {
		seen[k>>6] |= 1 << (k & 63)
	}
	limit := math.MaxInt // the keys kept in memory
	if c.pre.openKeys != nil {
		limit = min(orDefault(c.pre.memGroupRows, maxMemGroupRows), maxMemGroupRows)
	}
	if !st.rekey && st.rows+len(keys) > limit {
		st.rekey = true
		toPool(c.pre.pool, st.gid[:0])
		st.gid = nil
	}
	st.rows += len(keys)
	if st.rekey {
		return
	}
	gid := grownTo(st.gid, len(keys), limit)
	for _, k := range keys {
		gid = append(gid, int32(k)) // the key (of at most maxSlotBits bits), its slot later
	}
	st.gid = gid
}
