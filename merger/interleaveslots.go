package merger

import (
	"sync/atomic"

	"github.com/writeout/writeout/internal/slicesx"
)

// A rollup's inputs whose hours overlap (each hour a streamed group of each, see
// preaggstream.go) page their groups' slots through their windows at once, and the heap loop
// would take them a sift and several comparisons a slot. Once every loaded window holds such a
// page, the rollup goes a step of windows at a time instead, as interleave.go does for a
// plain merge: the slots up to the step's bound, merged on packed keys, each starting an
// output row or, of the key of the slot before it, combining into that row.

// For tests: interleaveSlotRows counts the slots of a rollup's steps.
var interleaveSlotRows atomic.Int64

// slotsInterleave reports whether the cursors of a rollup can go a step of windows at a time:
// every one is lazy or holds a page of a streamed group's slots (packed keys in key order, no
// two of one key), and two or more are not lazy.
func slotsInterleave(h []*cursor) bool {
	return stepwise(h, func(c *cursor) bool { return c.paged })
}

// interleavedSlots emits, with rollup, a step of interleaving pages of slots (see
// slotsInterleave). stepped: the step took rows.
func (e *emitter) interleavedSlots() (stepped, ok bool) {
	items := e.il.step(e.h.cs)
	if len(items) == 0 {
		return false, true
	}
	interleaveSlotRows.Add(int64(len(items)))
	// The first slot may have the key of the batch's last row (a row of the heap loop, or
	// of the step before, whose bound it tied); the others' keys are words of one step.
	it := items[0]
	c := e.il.cs[it.ref>>32]
	cont := e.b.keys.n > 0 && cmpRows(&c.w, int(uint32(it.ref)), &e.b.keys, e.b.keys.n-1) == 0
	for len(items) > 0 {
		n := e.slotsRoom(items, cont)
		if n == 0 { // the batch is full, and the first slot starts a row
			if !e.nextBatch() {
				return true, false
			}
			continue
		}
		e.appendSlotItems(items[:n], cont)
		items, cont = items[n:], false
	}
	return true, e.stepped()
}

// slotsRoom returns how many of items (slots in key order; cont: the first continues the
// batch's last row) go into the batch: up to the first that starts an output row when the
// batch is full (see full). It leaves in il.starts the items that start rows.
func (e *emitter) slotsRoom(items []ilItem, cont bool) int {
	b := e.b
	rows, refs := b.keys.n, len(b.refIn)
	starts := e.il.starts[:0]
	defer func() { e.il.starts = starts }()
	prev := items[0].key
	for i := range items {
		k := items[i].key
		if (i > 0 && k == prev) || (i == 0 && cont) {
			refs++
			continue
		}
		if rows >= e.rows || refs >= 2*e.rows {
			return i
		}
		starts = append(starts, int32(i))
		rows++
		refs++
		prev = k
	}
	return len(items)
}

// appendSlotItems appends items, the slots of a step (cont: the first continues the batch's
// last row; il.starts: those that start rows), to the batch, column by column: each row's
// key read off its first slot's packed key, each slot a ref (see emitter.addRef).
func (e *emitter) appendSlotItems(items []ilItem, cont bool) {
	b, il := e.b, &e.il
	starts := il.starts
	n, m := len(items), len(starts)
	k0 := int32(len(b.refIn))
	if cont {
		end := k0 + int32(n)
		if m > 0 {
			end = k0 + starts[0]
		}
		b.refEnd[len(b.refEnd)-1] = end
	}
	if m > 0 {
		b.keys.n += m
		times := slicesx.Extend(&b.keys.time, m)
		for r, s := range starts {
			times[r] = il.tbase + int64(items[s].key>>il.idBits)
		}
		packBits, shift := il.cs[0].packBits, il.idBits
		for j := range b.keys.dims {
			shift -= int(packBits[j])
			mask := uint64(1)<<packBits[j] - 1
			ids := slicesx.Extend(&b.keys.dims[j].ids, m)
			for r, s := range starts {
				ids[r] = uint32(items[s].key >> shift & mask)
			}
		}
		refEnd := slicesx.Extend(&b.refEnd, m)
		for r := range m - 1 {
			refEnd[r] = k0 + starts[r+1]
		}
		refEnd[m-1] = k0 + int32(n)
		e.outRow += int64(m)
	}
	il.used = sized(il.used, len(il.cs))
	clear(il.used)
	refIn, refRow, refLo, refHi := slicesx.Extend(&b.refIn, n), slicesx.Extend(&b.refRow, n), slicesx.Extend(&b.refLo, n), slicesx.Extend(&b.refHi, n)
	var rows int64
	for i := range items {
		ref := items[i].ref
		x, p := ref>>32, uint32(ref)
		c := il.cs[x]
		g := c.aggs[0]
		refIn[i], refRow[i], refLo[i], refHi[i] = int32(c.in), uint32(c.slot[p]), g.lo, g.hi
		rows += int64(c.weight[p])
		il.used[x] = true
	}
	e.done += rows
	for x, c := range il.cs {
		if g := c.aggs; il.used[x] && (c.aggSeq != e.batchSeq || c.aggLast != g[0]) {
			b.aggs = append(b.aggs, g[0])
			c.aggSeq, c.aggLast = e.batchSeq, g[0]
		}
	}
	b.runsSet = false // refs of several rows: findRuns
}
