package merger

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/writeout/writeout/medium"
)

// Streamed pre-aggregation. A group (rows of one truncated time) of more than maxWindowRows
// rows does not load into the window whole: it goes through it maxWindowRows rows at a time,
// each chunk's packed keys marking the group's bitmap of keys (as preAggregate's do) and kept
// for the metric tasks: in memory (4 bytes a row), or, past maxMemGroupRows rows, staged on
// the merge's scratch medium. Once the group ends, the keys kept in memory become slots
// (their rank in the bitmap) in place (staged ones are mapped so as the tasks read them
// back), and the window holds the group's slots, one row per distinct key in key order, as
// preAggregate leaves them. What a cursor holds then grows with the group's distinct keys (at
// most 2^maxSlotBits), not its rows.

// maxWindowRows bounds the rows a pre-aggregating cursor's window loads at a time (a
// variable for tests).
var maxWindowRows = 1 << 16

// maxMemGroupRows bounds the rows of a streamed group whose keys stay in memory (4 bytes a
// row): a larger group stages them on the merge's scratch medium, and the metric tasks read
// them back (a variable for tests).
var maxMemGroupRows = 1 << 18

// For tests: stagedGroups counts the groups whose keys were staged.
var stagedGroups atomic.Int64

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
	st := groupStage{c: c, gid: c.pre.get(0)[:0]}
	released := p0
	for lo, cut := p0, true; ; {
		if err := c.loadDims(lo, p); err != nil {
			st.discard()
			return err
		}
		windowRowsPeak.note(int64(w.n))
		if err := st.add(c.wkeys[:w.n]); err != nil {
			st.discard()
			return err
		}
		c.next = p
		if !cut { // the group's last rows
			break
		}
		if err := ctx.Err(); err != nil {
			st.discard()
			return fmt.Errorf("merger: %w", err)
		}
		if err := c.pre.releaseEvery(int32(c.in), p, &released); err != nil {
			st.discard()
			return err
		}
		w.reset()
		lo = p
		var err error
		// The group's next rows, up to its end (minRows 0) or the limit.
		if p, cut, err = c.fillTimes(ctx, maxWindowRows, 0); err != nil {
			st.discard()
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
	c.count = count
	g := &groupAgg{in: int32(c.in), lo: uint32(p0), hi: uint32(p0 + st.rows), slots: slots, pre: c.pre}
	if st.staged != nil {
		g.staged, g.seen, g.rank = st.staged, slices.Clone(seen), slices.Clone(rank)
	} else {
		clear(count)
		gid := st.gid
		for i, k := range gid {
			s := slotOf(seen, rank, uint64(k))
			gid[i] = s
			count[s]++
		}
		g.gid = gid
	}
	g.users.Store(c.pre.users)
	lo, hi := g.lo, g.hi

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
				k := wi<<6 | bits.TrailingZeros64(y)
				dk[q] = uint64(k)
				if g.staged != nil {
					count[q], c.keyCount[k] = c.keyCount[k], 0
				}
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

// groupStage is where a streamed group's rows' keys go as they load: appended to gid, or,
// past maxMemGroupRows rows, staged on the merge's scratch medium and each key counted in
// the cursor's keyCount.
type groupStage struct {
	c      *cursor
	staged medium.Bytes
	gid    []int32
	rows   int
}

// add marks keys, the packed keys of the group's next rows, in the cursor's bitmap of the
// group's keys and keeps them.
func (st *groupStage) add(keys []uint64) error {
	c := st.c
	seen, sum := c.seen, c.seenSum
	for _, k := range keys {
		seen[k>>6] |= 1 << (k & 63)
		sum[k>>12] |= 1 << (k >> 6 & 63)
	}
	if st.staged == nil && c.pre.scratch != nil && st.rows+len(keys) > min(orDefault(c.pre.memGroupRows, maxMemGroupRows), maxMemGroupRows) {
		if err := st.stage(); err != nil {
			return err
		}
	}
	st.rows += len(keys)
	if st.staged == nil {
		gid := grown(st.gid, len(keys))
		for _, k := range keys {
			gid = append(gid, int32(k)) // the key (of at most maxSlotBits bits), its slot later
		}
		st.gid = gid
		return nil
	}
	return st.write(keys)
}

// stage moves the keys kept in memory to a Bytes of the merge's medium.
func (st *groupStage) stage() error {
	c := st.c
	if len(c.keyCount) != 1<<c.idBits {
		c.keyCount = make([]int32, 1<<c.idBits)
	}
	med, err := c.pre.scratch.get()
	if err == nil {
		st.staged, err = med.NewBytes()
	}
	if err != nil {
		return fmt.Errorf("merger: %s: stage a group: %w", c.name, err)
	}
	stagedGroups.Add(1)
	keys := sized(c.kbuf, min(len(st.gid), 1<<16))
	c.kbuf = keys
	for gid := st.gid; len(gid) > 0; {
		n := min(len(gid), len(keys))
		for i, k := range gid[:n] {
			keys[i] = uint64(k)
		}
		if err := st.write(keys[:n]); err != nil {
			return err
		}
		gid = gid[n:]
	}
	select {
	case c.pre.pool <- st.gid[:0]:
	default:
	}
	st.gid = nil
	return nil
}

// write counts keys and appends them to the stage.
func (st *groupStage) write(keys []uint64) error {
	c := st.c
	count := c.keyCount
	buf := sized(c.kbytes, 4*len(keys))
	for i, k := range keys {
		count[k]++
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(k))
	}
	c.kbytes = buf
	if _, err := st.staged.Write(buf); err != nil {
		return fmt.Errorf("merger: %s: stage a group: %w", c.name, err)
	}
	return nil
}

// discard gives back what the stage holds after a failure (a failed discard leaves the bytes
// to the medium's Close); the merge ends with the failure.
func (st *groupStage) discard() {
	if st.staged != nil {
		if d, ok := st.staged.(medium.Discarder); ok {
			_ = d.Discard()
		}
		st.staged = nil
	}
}
