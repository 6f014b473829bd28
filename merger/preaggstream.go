package merger

import (
	"context"
	"fmt"
	"math/bits"
	"sync/atomic"
)

// Streamed pre-aggregation. A group (rows of one truncated time) of more than maxWindowRows
// rows does not load into the window whole: it goes through it maxWindowRows rows at a time,
// each chunk's packed keys marking the group's bitmap of keys (as preAggregate's do) and
// appended to the group's slot array. Once the group ends, the keys become slots (their rank
// in the bitmap) in place, and the window holds the group's slots, one row per distinct key
// in key order, as preAggregate leaves them. What a cursor holds then grows with the group's
// distinct keys (at most 2^maxSlotBits) and maxWindowRows, not its rows, except for the slot
// array the metric tasks read (4 bytes a row).

// maxWindowRows bounds the rows a pre-aggregating cursor's window loads at a time (a
// variable for tests).
var maxWindowRows = 1 << 16

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
// holds the times of rows [p0, p)), chunk by chunk, and leaves its slots in the window, with
// their emission order.
func (c *cursor) streamGroup(ctx context.Context, p0, p int) error {
	w := &c.w
	t := c.lastT
	if words := 1 + (1<<c.idBits-1)>>6; len(c.seen) != words {
		c.seen, c.rank = make([]uint64, words), make([]int32, words)
		c.seenSum = make([]uint64, 1+(words-1)>>6)
	}
	seen, sum, rank := c.seen, c.seenSum, c.rank
	gid := c.pre.get(0)[:0]
	for lo, cut := p0, true; ; {
		if err := c.loadDims(lo, p); err != nil {
			return err
		}
		windowRowsPeak.note(int64(w.n))
		keys := c.wkeys[:w.n]
		gid = grown(gid, len(keys))
		for _, k := range keys {
			seen[k>>6] |= 1 << (k & 63)
			sum[k>>12] |= 1 << (k >> 6 & 63)
			gid = append(gid, int32(k)) // the key (of at most maxSlotBits bits), its slot below
		}
		c.next = p
		if !cut { // the group's last rows
			break
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("merger: %w", err)
		}
		w.reset()
		lo = p
		var err error
		// The group's next rows, up to its end (minRows 0) or the limit.
		if p, cut, err = c.fillTimes(ctx, maxWindowRows, 0); err != nil {
			return err
		}
	}
	preAggGroups.Add(1)
	slots := 0
	for si, x := range sum {
		for ; x != 0; x &= x - 1 {
			wi := si<<6 | bits.TrailingZeros64(x)
			rank[wi] = int32(slots)
			slots += bits.OnesCount64(seen[wi])
		}
	}
	count := sized(c.count, slots) // per slot: its rows
	clear(count)
	for i, k := range gid {
		s := rank[k>>6] + int32(bits.OnesCount64(seen[k>>6]&(1<<(k&63)-1)))
		gid[i] = s
		count[s]++
	}
	c.count = count
	lo, hi := uint32(p0), uint32(p0+len(gid))
	g := &groupAgg{in: int32(c.in), lo: lo, hi: hi, gid: gid, slots: slots, pre: c.pre}
	g.users.Store(c.pre.users)

	// The window: the group's slots in key order, their keys read off the bitmap (clearing it
	// on the way) and unpacked a dimension at a time.
	w.reset()
	w.n = slots
	c.wkeys = sized(c.wkeys, slots)
	dk := c.wkeys
	q := 0
	for si, x := range sum {
		for ; x != 0; x &= x - 1 {
			wi := si<<6 | bits.TrailingZeros64(x)
			for y := seen[wi]; y != 0; y &= y - 1 {
				dk[q] = uint64(wi<<6 | bits.TrailingZeros64(y))
				q++
			}
			seen[wi] = 0
		}
		sum[si] = 0
	}
	c.packed = true
	w.time = grown(w.time, slots)[:slots]
	w.src = grown(w.src, slots)[:slots]
	for i := range slots {
		w.time[i], w.src[i] = t, lo+uint32(i)
	}
	shift := 0
	for j := len(w.dims) - 1; j >= 0; j-- {
		b := c.packBits[j]
		mask := uint64(1)<<b - 1
		ids := grown(w.dims[j].ids, slots)[:slots]
		for i, k := range dk {
			ids[i] = uint32(k >> shift & mask)
		}
		w.dims[j].ids = ids
		shift += int(b)
	}
	c.glo, c.ghi = sized(c.glo, slots), sized(c.ghi, slots)
	c.slot, c.weight = sized(c.slot, slots), sized(c.weight, slots)
	c.same = sized(c.same, slots)
	for i := range slots {
		c.glo[i], c.ghi[i] = lo, hi
		c.slot[i], c.weight[i] = int32(i), count[i]
	}
	clear(c.same)
	c.perm = nil // the slots are in key order
	c.aggs = append(c.aggs[:0], g)
	c.npos = slots
	return nil
}
