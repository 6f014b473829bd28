package tmpfile

import "sync"

// recycler keeps the memory buffers of released Bytes (those of a closed child medium) for the
// Bytes made after them, so that a medium whose children come and go, such as a parquet-go
// writer's page buffers (one child per column chunk), does not allocate and grow a new buffer
// for each one.
//
// Only full-size buffers (cap BufferSize) are kept: smaller ones are cheap to allocate and are
// dropped. At most half of BufferBudget is kept. A kept buffer stays counted in the store's
// bufMem, as it was while live, so a Bytes that takes one does not change the count. Kept
// buffers yield to live ones: a Bytes that needs a buffer, its first or a larger one, takes a
// kept one before it allocates, so the kept buffers never stand between a live Bytes and the
// budget.
type recycler struct {
	mu   sync.Mutex
	bufs [][]byte // kept buffers, each of cap BufferSize, length 0
	mem  int64    // sum of their capacities
	done bool     // the store is closed: nothing more is kept
}

// takeBuf returns a kept buffer, empty, or nil when none is kept.
func (st *store) takeBuf() []byte {
	r := &st.recycle
	r.mu.Lock()
	defer r.mu.Unlock()
	k := len(r.bufs)
	if k == 0 {
		return nil
	}
	buf := r.bufs[k-1][:0]
	r.bufs[k-1] = nil
	r.bufs = r.bufs[:k-1]
	r.mem -= int64(cap(buf))
	return buf
}

// putBuf releases a live buffer: kept when it is full-size and the kept buffers stay within half
// of the budget, else dropped and its memory returned to the budget.
func (st *store) putBuf(buf []byte) {
	if buf == nil {
		return
	}
	c := int64(cap(buf))
	if cap(buf) == st.opts.BufferSize {
		r := &st.recycle
		r.mu.Lock()
		if !r.done && r.mem+c <= st.opts.BufferBudget/2 {
			r.bufs = append(r.bufs, buf[:0])
			r.mem += c
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
	}
	st.bufMem.Add(-c)
}

// closeRecycler drops every kept buffer and keeps none from now on.
func (st *store) closeRecycler() {
	st.recycle.mu.Lock()
	st.recycle.done = true
	st.recycle.mu.Unlock()
	st.dropKept(st.opts.BufferBudget + 1)
}

// dropKept drops kept buffers until at least want bytes are freed or none is left, and returns
// the bytes freed.
func (st *store) dropKept(want int64) int64 {
	r := &st.recycle
	r.mu.Lock()
	defer r.mu.Unlock()
	var freed int64
	for freed < want && len(r.bufs) > 0 {
		k := len(r.bufs) - 1
		freed += int64(cap(r.bufs[k]))
		r.bufs[k] = nil
		r.bufs = r.bufs[:k]
	}
	r.mem -= freed
	st.bufMem.Add(-freed)
	return freed
}
