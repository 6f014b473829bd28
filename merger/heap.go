package merger

import "context"

// cursorHeap is the k-way merge's binary min-heap of cursors, ordered by their heads' keys
// (time, then dimensions) and then by input, so that rows of equal keys leave the heap in
// input order. A lazy cursor's key is its stand-in row's (see cursor.wait): it is loaded
// (loadTop) when it comes to the top.
//
// The heap is written out rather than through container/heap: the merge sifts once a row
// where inputs interleave, and an interface call a comparison costs there.
type cursorHeap struct {
	cs []*cursor // the heap: cs[0] is the least cursor; cs[i] comes before cs[2i+1] and cs[2i+2]
	// spare holds cursors that are done: the next lazy cursor loaded takes the memory of the
	// last one's window (cursor.inherit).
	spare []*cursor
}

// newCursorHeap returns the heap of cs, which it keeps and reorders.
func newCursorHeap(cs []*cursor) *cursorHeap {
	h := &cursorHeap{cs: cs}
	h.init()
	return h
}

// cursorLess reports whether a's head comes before b's: by key, then by input.
func cursorLess(a, b *cursor) bool {
	if x := a.cmpHeads(a.head(), b, b.head()); x != 0 {
		return x < 0
	}
	return a.in < b.in
}

// len returns the cursors in the heap.
func (h *cursorHeap) len() int { return len(h.cs) }

// top returns the least cursor; the heap must not be empty.
func (h *cursorHeap) top() *cursor { return h.cs[0] }

// init restores the heap order over every cursor, in any order before.
func (h *cursorHeap) init() {
	for i := len(h.cs)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// down sifts the cursor at i down to its place.
func (h *cursorHeap) down(i int) {
	cs := h.cs
	n := len(cs)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && cursorLess(cs[r], cs[l]) {
			m = r
		}
		if !cursorLess(cs[m], cs[i]) {
			return
		}
		cs[i], cs[m] = cs[m], cs[i]
		i = m
	}
}

// fix restores the heap order after the top cursor's head moved on.
func (h *cursorHeap) fix() {
	if len(h.cs) > 1 {
		h.down(0)
	}
}

// rival returns the least cursor but the top, and its place in the heap (nil, 0: none): the
// top cursor emits rows while its head comes before the rival's.
func (h *cursorHeap) rival() (*cursor, int) {
	cs := h.cs
	if len(cs) < 2 {
		return nil, 0
	}
	if len(cs) > 2 && cursorLess(cs[2], cs[1]) {
		return cs[2], 2
	}
	return cs[1], 1
}

// passed restores the heap order after the top cursor's head moved past the rival's, which
// is at ri: the sift's first step is known (the rival is the least of the top's children).
func (h *cursorHeap) passed(ri int) {
	h.cs[0], h.cs[ri] = h.cs[ri], h.cs[0]
	h.down(ri)
}

// remove takes the cursor at i, which is done, out of the heap and keeps it as a spare; the
// caller restores the order (fix, or init after several).
func (h *cursorHeap) remove(i int) *cursor {
	cur := h.cs[i]
	last := len(h.cs) - 1
	h.cs[i] = h.cs[last]
	h.cs = h.cs[:last]
	h.spare = append(h.spare, cur)
	return cur
}

// loadTop fills the lazy cursor at the top, in a spare cursor's memory if there is one, and
// sifts it to its place.
func (h *cursorHeap) loadTop(ctx context.Context) error {
	cur := h.cs[0]
	if k := len(h.spare) - 1; k >= 0 {
		cur.inherit(h.spare[k])
		h.spare = h.spare[:k]
	}
	if err := cur.fill(ctx); err != nil {
		return err
	}
	h.down(0)
	return nil
}

// loadLazyTops loads lazy cursors at the top until the top is loaded or the heap is empty.
func (h *cursorHeap) loadLazyTops(ctx context.Context) error {
	for len(h.cs) > 0 && h.cs[0].lazy {
		if err := h.loadTop(ctx); err != nil {
			return err
		}
	}
	return nil
}
