package merger

import (
	"math"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/writeout/writeout/internal/slicesx"
)

// Inputs that interleave row by row (overlapping time ranges: every input holds every hour)
// cost the heap loop of mergeRows a sift and several comparisons a row, each a branch the
// processor cannot predict. Once the cursors' windows hold packed keys (see cursor.countCmp:
// they do once their rows were compared often), the merge goes a step of windows at a time
// instead: every window row that must come before the next row any window would load (the
// bound: the least of the windows' last rows, and of the stand-ins of lazy cursors) goes
// into one array per cursor, already in order; the arrays are merged pairwise, in input
// order, by a merge whose comparison is a 128-bit subtraction and whose choice is an index
// (no branch on the keys); and the merged rows go to the batch column by column.

// For tests: interleaveOff leaves every row to the heap loop; interleaveRuns counts the
// steps that merged runs of several cursors, interleaveRows the rows of every step,
// interleaveGathered the rows whose metric values were picked from a step's ranges
// (numTask.gather).
var (
	interleaveOff      bool
	interleaveRuns     atomic.Int64
	interleaveRows     atomic.Int64
	interleaveGathered atomic.Int64
)

// ilKeyBits is the bits of a step's key (64); tests lower it to make steps that stop at a time.
var ilKeyBits = 64

// ilStepRows bounds the rows of a cursor that one interleaving step takes. At 4,096 rather
// than 2,048, the peers' 3 M-row overlapping merge took 0.169 s, not 0.178 (6 pairs; 8,192
// the same), and the 30 M one the same time (paired 0.992, 10 pairs), with the same bytes.
var ilStepRows = 4096

// ilItem is a window row in an interleaving step: its key (its time's offset from the
// step's least time, shifted above its packed ids; see step) and where it lies (its cursor's
// place in the step, shifted 32 bits up, then its window position).
type ilItem struct{ key, ref uint64 }

// interleave is the memory of the interleaving steps, kept from one step to the next.
type interleave struct {
	cs         []*cursor // the step's cursors, by input
	take       []int     // the rows each takes in the step
	items, tmp []ilItem
	bounds     []int
	runs       []ilRun // step's sorted runs, and the next level's (runs2)
	runs2      []ilRun
	next       []int // per cursor: its first position not yet appended (appendItems)
	// appendItems': the rows each cursor gives, and per cursor its input and row offset
	cnt    []int
	ins    []int32
	rowOff []uint32
	starts []int32 // a rollup step's items that start output rows (see slotsRoom)
	used   []bool  // per cursor of a rollup step: its slots are in the batch
	tbase  int64   // the step's least time: a key's time is tbase + key>>idBits
	idBits int
}

// ilKey returns the key of window position p of c as an ilItem compares it.
func ilKey(c *cursor, p int) (t, k uint64) {
	return uint64(c.w.time[p]) ^ 1<<63, c.wkeys[p]
}

// ilLess reports whether (t1, k1) comes before (t2, k2).
func ilLess(t1, k1, t2, k2 uint64) bool {
	return t1 < t2 || t1 == t2 && k1 < k2
}

// interleaves reports whether the cursors can go a step of windows at a time: every one is
// lazy (its stand-in row) or holds packed keys in key order (no re-sorted group), and two or
// more are not lazy. With one window loaded (inputs that follow one another in time), its
// rows up to the stand-ins go over in runs by the heap loop: a step would take them one by
// one, and the column writers would too.
func interleaves(h []*cursor) bool {
	return stepwise(h, func(c *cursor) bool { return c.packed && c.perm == nil && len(c.ghi) == 0 })
}

// stepwise reports whether every cursor of h is lazy or satisfies ok, and two or more are not
// lazy: the test of a step of windows (interleaves, slotsInterleave).
func stepwise(h []*cursor, ok func(*cursor) bool) bool {
	if len(h) < 2 {
		return false
	}
	loaded := 0
	for _, c := range h {
		if c.lazy {
			continue
		}
		if !ok(c) {
			return false
		}
		loaded++
	}
	return loaded >= 2
}

// step returns the rows of the cursors in h (which interleaves accepts) that come before any
// row their windows do not hold yet, in merge order (by key, then input, then position); the
// cursors in il.cs took il.take[x] rows each, from their current positions. None: the least
// row to come is a lazy cursor's, which must load first.
func (il *interleave) step(h []*cursor) []ilItem {
	il.cs = append(il.cs[:0], h...)
	slices.SortFunc(il.cs, func(a, b *cursor) int { return a.in - b.in })
	// The bound: the least (key, input) of the windows' last rows, or of their rows ilStepRows
	// on (a step's arrays then stay in the cache), and of the lazy stand-ins.
	var bt, bk uint64
	bin := -1
	for _, c := range il.cs {
		var t, k uint64
		if c.lazy {
			t, k = uint64(c.w.time[0])^1<<63, 0 // the stand-in: the least key of its time
		} else {
			t, k = ilKey(c, min(c.npos, c.cur+ilStepRows)-1)
		}
		if bin < 0 || ilLess(t, k, bt, bk) || t == bt && k == bk && c.in < bin {
			bt, bk, bin = t, k, c.in
		}
	}
	// A row's key is one word: its time's offset from the heads' least time (tbase), above
	// its packed ids. When the bound's time is further from tbase than the bits left hold,
	// the step takes the rows up to the last time they hold instead (those come before every
	// later one, and the windows hold all of them: every window ends past the bound).
	il.idBits = il.cs[0].idBits
	tbase := int64(math.MaxInt64)
	for _, c := range il.cs {
		if !c.lazy {
			tbase = min(tbase, c.w.time[c.cur])
		}
	}
	il.tbase = tbase
	maxSpan := uint64(0) // the time offsets a key holds: 0 when the ids take the whole word
	if free := ilKeyBits - il.idBits; free >= 64 {
		maxSpan = math.MaxUint64
	} else if free > 0 {
		maxSpan = 1<<free - 1
	}
	tcap := int64(math.MaxInt64)
	if uint64(math.MaxInt64-tbase) > maxSpan {
		tcap = tbase + int64(maxSpan)
	}
	byTime := int64(bt^1<<63) > tcap
	il.take = slices.Grow(il.take[:0], len(il.cs))[:len(il.cs)]
	il.next = slices.Grow(il.next[:0], len(il.cs))[:len(il.cs)]
	total := 0
	for x, c := range il.cs {
		il.next[x] = c.cur
		n := 0
		if !c.lazy {
			// The rows up to the bound: the first position past it, by bisection.
			lo, hi := c.cur, c.npos
			for lo < hi {
				m := int(uint(lo+hi) >> 1)
				var before bool
				if byTime {
					before = c.w.time[m] <= tcap
				} else {
					t, k := ilKey(c, m)
					before = ilLess(t, k, bt, bk) || t == bt && k == bk && c.in <= bin
				}
				if before {
					lo = m + 1
				} else {
					hi = m
				}
			}
			n = lo - c.cur
		}
		il.take[x] = n
		total += n
	}
	if total == 0 {
		return nil
	}
	interleaveRows.Add(int64(total))
	// One run per cursor, in input order, then merged pairwise until one is left.
	il.items = slices.Grow(il.items[:0], total)[:total]
	il.tmp = slices.Grow(il.tmp[:0], total)[:total]
	bounds := append(il.bounds[:0], 0) // run x is items[bounds[x]:bounds[x+1]]
	off := 0
	for x, c := range il.cs {
		n := il.take[x]
		if n == 0 {
			continue
		}
		run := il.items[off : off+n]
		times, keys := c.w.time[c.cur:c.cur+n], c.wkeys[c.cur:c.cur+n]
		ref := uint64(x)<<32 | uint64(c.cur)
		for i := range run {
			run[i] = ilItem{key: uint64(times[i]-tbase)&maxSpan<<il.idBits | keys[i], ref: ref + uint64(i)}
		}
		off += n
		bounds = append(bounds, off)
	}
	if len(bounds) > 2 {
		interleaveRuns.Add(1)
	}
	// Runs merge pairwise, level by level. A run is in items or in tmp; two in the same one
	// merge into the other, and a run in tmp merges with the run after it in items into
	// items in place (and the reverse): its writes never pass the second run's next row. An
	// odd run out stays where it is, the longest one that leaves adjacent pairs: five equal
	// runs then move 12 fifths of the rows, not 15 (three levels, two copies).
	runs := il.runs[:0]
	for r := 0; r+1 < len(bounds); r++ {
		runs = append(runs, ilRun{lo: bounds[r], hi: bounds[r+1]})
	}
	bufs := [2][]ilItem{il.items, il.tmp}
	for len(runs) > 1 {
		out := 0
		if len(runs)%2 == 1 {
			for c := 2; c < len(runs); c += 2 {
				if runs[c].hi-runs[c].lo > runs[out].hi-runs[out].lo {
					out = c
				}
			}
		} else {
			out = -1
		}
		next := il.runs2[:0]
		for r := 0; r < len(runs); {
			if r == out {
				next = append(next, runs[r])
				r++
				continue
			}
			a, b := runs[r], runs[r+1]
			to := 1 - a.buf
			if a.buf != b.buf {
				to = b.buf
			}
			if a.buf == b.buf {
				merge2Apart(bufs[to][a.lo:b.hi], bufs[a.buf][a.lo:a.hi], bufs[b.buf][b.lo:b.hi])
			} else {
				merge2(bufs[to][a.lo:b.hi], bufs[a.buf][a.lo:a.hi], bufs[b.buf][b.lo:b.hi])
			}
			next = append(next, ilRun{lo: a.lo, hi: b.hi, buf: to})
			r += 2
		}
		runs, il.runs2 = next, runs
	}
	if runs[0].buf == 1 {
		bufs[0], bufs[1] = bufs[1], bufs[0]
	}
	il.items, il.tmp, il.bounds, il.runs = bufs[0], bufs[1], bounds, runs
	return il.items[:total]
}

// ilRun is a sorted run of a step's items: items[lo:hi] of il.items (buf 0) or il.tmp (1).
type ilRun struct {
	lo, hi int
	buf    int
}

// merge2 merges the runs a and b (each in key order; a's rows come first on equal keys) into
// dst, of their joint length, without a branch on the keys: the comparison is the borrow of a
// subtraction, and it picks which of the two heads is copied.
func merge2(dst, a, b []ilItem) {
	i, j, o := 0, 0, 0
	for i < len(a) && j < len(b) {
		i, j = takeLesser(dst, a, b, i, j, o)
		o++
	}
	o += copy(dst[o:], a[i:])
	copy(dst[o:], b[j:])
}

// takeLesser copies the lesser of a[i] and b[j] (a's on equal keys) to dst[o] and returns the
// next i and j: the comparison is the borrow of a subtraction, which picks the row copied.
func takeLesser(dst, a, b []ilItem, i, j, o int) (int, int) {
	x, y := &a[i], &b[j]
	_, takeB := bits.Sub64(y.key, x.key, 0) // 1 when y's key is below x's
	heads := [2]*ilItem{x, y}
	dst[o] = *heads[takeB]
	return i + int(1-takeB), j + int(takeB)
}

// merge2Apart is merge2 for a dst that overlaps neither run: it merges from both ends at
// once, the least rows to the front and the greatest to the back, two chains of loads and
// comparisons that do not wait for each other (merge2's each waits for the one before), and
// leaves the middle, once a run has fewer than two rows left there, to merge2. The back
// takes a's row only when its key is above b's: on equal keys b's rows go last, so the
// order is merge2's. 4,096 rows against 4,096 of random keys: 29.5 -> 18.0 us.
func merge2Apart(dst, a, b []ilItem) {
	i, j, o := 0, 0, 0
	ie, je, oe := len(a), len(b), len(dst)
	for ie-i >= 2 && je-j >= 2 {
		i, j = takeLesser(dst, a, b, i, j, o)
		o++
		u, v := &a[ie-1], &b[je-1]
		_, takeA := bits.Sub64(v.key, u.key, 0) // 1 when u's key is above v's
		tails := [2]*ilItem{v, u}
		oe--
		dst[oe] = *tails[takeA]
		ie -= int(takeA)
		je -= int(1 - takeA)
	}
	merge2(dst[o:oe], a[i:ie], b[j:je])
}

// appendItems appends the rows of items (from il's cursors) as output rows, one source row
// each. A row's time and refs are written in one pass over items (each its own pass, with the
// refs', was 6 passes over the rows of a step with 3 dimensions, not 4).
func (b *batch) appendItems(il *interleave, items []ilItem) {
	n := len(items)
	k0 := len(b.refIn)
	b.keys.n += n
	times := slicesx.Extend(&b.keys.time, n)
	refIn, refRow, refEnd := slicesx.Extend(&b.refIn, n), slicesx.Extend(&b.refRow, n), slicesx.Extend(&b.refEnd, n)
	clear(slicesx.Extend(&b.refLo, n))
	clear(slicesx.Extend(&b.refHi, n))
	// Shift counts below 64 (& 63) spare each shift the compiler's test for 64 or more. A key
	// of 64 id bits holds no time (the step's rows share tbase): its time mask is 0.
	tbase, tshift, tmask := il.tbase, uint(il.idBits)&63, ^uint64(0)
	if il.idBits >= 64 {
		tmask = 0
	}
	if b.appendStep(il, items) {
		// Cursor x's rows are source rows from its window position next[x] on, in order:
		// position p is source row p+rowOff[x].
		ins, rowOff := il.ins, il.rowOff
		for i := range items {
			key, ref := items[i].key, items[i].ref
			x, p := ref>>32, uint32(ref)
			times[i] = tbase + int64(key>>tshift&tmask)
			refIn[i], refRow[i], refEnd[i] = ins[x], p+rowOff[x], int32(k0+i+1)
		}
	} else {
		for i := range items {
			key, ref := items[i].key, items[i].ref
			c := il.cs[ref>>32]
			times[i] = tbase + int64(key>>tshift&tmask)
			refIn[i], refRow[i], refEnd[i] = int32(c.in), c.w.src[uint32(ref)], int32(k0+i+1)
		}
	}
	// The ids are read off the keys (packed most significant dimension first), three
	// dimensions a pass. Each one's shift and mask are scalars of the loop (an array of them
	// the compiler keeps in memory, loaded again for every key); its shift is below 64 unless
	// it packs no bits, and then its mask is 0.
	packBits, shift := il.cs[0].packBits, il.idBits
	field := func(j int) ([]uint32, uint, uint64) {
		shift -= int(packBits[j])
		return slicesx.Extend(&b.keys.dims[j].ids, n)[:n], uint(shift) & 63, uint64(1)<<packBits[j] - 1
	}
	for j := 0; j < len(b.keys.dims); {
		switch len(b.keys.dims) - j {
		case 1:
			x, s0, m0 := field(j)
			for i := range items {
				x[i] = uint32(items[i].key >> s0 & m0)
			}
			j++
		case 2:
			x, s0, m0 := field(j)
			y, s1, m1 := field(j + 1)
			for i := range items {
				key := items[i].key
				x[i], y[i] = uint32(key>>s0&m0), uint32(key>>s1&m1)
			}
			j += 2
		default:
			x, s0, m0 := field(j)
			y, s1, m1 := field(j + 1)
			z, s2, m2 := field(j + 2)
			for i := range items {
				key := items[i].key
				x[i], y[i], z[i] = uint32(key>>s0&m0), uint32(key>>s1&m1), uint32(key>>s2&m2)
			}
			j += 3
		}
	}
	for x, n := range il.cnt {
		il.next[x] += n
	}
	if b.runsSet { // runs of one row each (rows of one source in a row are rare here)
		run := slicesx.Extend(&b.run, n)
		for i := range run {
			run[i] = 1
		}
	}
}

// appendStep records items, the output rows appendItems appends, as a step of b (see
// batch.steps), when every cursor's window holds consecutive source rows (read in row order),
// and sets il.ins and il.rowOff for their refs (see appendItems); else it reports false,
// having set nothing but il.cnt.
func (b *batch) appendStep(il *interleave, items []ilItem) bool {
	// The rows each cursor gives: what the step has left of it when items are the rest of
	// the step (as they mostly are), else counted.
	il.cnt = sized(il.cnt, len(il.cs))
	left := 0
	for x, c := range il.cs {
		il.cnt[x] = c.cur + il.take[x] - il.next[x]
		left += il.cnt[x]
	}
	if left != len(items) {
		clear(il.cnt)
		for i := range items {
			il.cnt[items[i].ref>>32]++
		}
	}
	for x, c := range il.cs {
		if n := il.cnt[x]; n > 0 && (c.order != nil || c.w.src[il.next[x]+n-1]-c.w.src[il.next[x]] != uint32(n-1)) {
			return false
		}
	}
	il.ins, il.rowOff = sized(il.ins, len(il.cs)), sized(il.rowOff, len(il.cs))
	k0 := len(b.refIn) - len(items)
	s := ilStep{row: int32(b.keys.n - len(items)), k: int32(k0), n: int32(len(items)), lo: int32(len(b.stepRanges))}
	for x, c := range il.cs {
		p := il.next[x]
		il.ins[x] = int32(c.in)
		if n := il.cnt[x]; n > 0 {
			il.rowOff[x] = c.w.src[p] - uint32(p)
			b.stepRanges = append(b.stepRanges, ilRange{in: int32(c.in), row: c.w.src[p], n: uint32(n)})
		}
	}
	s.hi = int32(len(b.stepRanges))
	b.steps = append(b.steps, s)
	return true
}
