package merger

import (
	"cmp"
	"math/bits"
	"slices"
)

// The emission order of a window: groups re-sorted into key order (on packed keys where
// they fit a word), and the packed keys that comparisons of rows of interleaving inputs use.

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
	c.packBits, c.idBits = packing(kinds, cards)
}

// packing returns the bits of each dimension in a packed key and their sum, or nil when a
// dimension is not single-value.
func packing(kinds []dimKind, cards []int) ([]uint8, int) {
	packBits, idBits := make([]uint8, len(kinds)), 0
	for j, k := range kinds {
		if k != kindSingle {
			return nil, 0
		}
		packBits[j] = uint8(bits.Len(uint(max(cards[j]-1, 0))))
		idBits += int(packBits[j])
	}
	return packBits, idBits
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
