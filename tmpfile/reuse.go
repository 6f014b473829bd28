package tmpfile

import (
	"cmp"
	"errors"
	"slices"
	"sync"

	"github.com/writeout/writeout/internal/sys"
)

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

// span is a run of free bytes of the file.
type span struct{ off, n int64 }

// freeSpace is the space of the file that released Bytes (those of closed child media) held.
// New extents are placed there, lowest offset first, before the file grows: a medium whose
// children come and go rewrites the same pages of the page cache instead of growing its file
// with fresh ones (a write into pages already cached costs a copy; a write that extends the file
// also allocates the pages, and they stay dirty until writeback). Nothing reads free space: a
// Bytes reads only its own extents, each written before it is recorded, so no Bytes ever sees
// another's old bytes.
type freeSpace struct {
	mu    sync.Mutex
	spans []span // sorted by offset, disjoint, not adjacent (coalesced)
	bytes int64  // sum of the spans' lengths
}

// reserve returns where to write the next piece of n bytes: the first free span, or the end of
// the file, which grows by k. k is at most n.
func (st *store) reserve(n int64) (off, k int64) {
	f := &st.free
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.spans) == 0 {
		return st.end.Add(n) - n, n
	}
	s := &f.spans[0]
	off, k = s.off, min(n, s.n)
	s.off += k
	s.n -= k
	f.bytes -= k
	if s.n == 0 {
		f.spans = f.spans[1:] // not a copy of the rest: a fragmented file has many spans
	}
	return off, k
}

// release returns the file space of extents to the free space. Each extent goes in its place
// by a binary search, coalesced with its neighbours: a publication releases its parts a MiB at
// a time, and sorting the whole list for each (as before) cost the punching goroutine 2% of a
// 300 M-row merge's publication in perf.
func (st *store) release(extents []extent) {
	if len(extents) == 0 {
		return
	}
	f := &st.free
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range extents {
		f.bytes += e.n
		i, _ := slices.BinarySearchFunc(f.spans, e.off, func(s span, off int64) int { return cmp.Compare(s.off, off) })
		before := i > 0 && f.spans[i-1].off+f.spans[i-1].n == e.off
		after := i < len(f.spans) && e.off+e.n == f.spans[i].off
		switch {
		case before && after:
			f.spans[i-1].n += e.n + f.spans[i].n
			f.spans = slices.Delete(f.spans, i, i+1)
		case before:
			f.spans[i-1].n += e.n
		case after:
			f.spans[i].off, f.spans[i].n = e.off, f.spans[i].n+e.n
		default:
			f.spans = slices.Insert(f.spans, i, span{off: e.off, n: e.n})
		}
	}
}

// freeBytes returns how many bytes of the medium's file are free: held by Bytes of closed child
// media, and reused by the next extents before the file grows.
func (m *Medium) freeBytes() int64 {
	f := &m.store.free
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bytes
}

// puncher punches the file space of discarded Bytes out of an OS file (tmpBytes.Discard), on a
// goroutine of its own that runs while there is space queued, then hands the space to the
// free space: no extent is placed there before its hole is punched.
type puncher struct {
	mu          sync.Mutex
	queue       []extent
	running     bool
	done        chan struct{} // closed when the goroutine last started returns
	stop        bool          // the store is closing: punch nothing more
	unsupported bool          // the file system has no hole punching: release at once
}

// punch queues the space of extents to be punched out of the file, then freed; where there is
// nothing to punch (not an OS file, no hole punching, the store closing) it frees it at once.
func (st *store) punch(extents []extent) {
	p := &st.punches
	p.mu.Lock()
	if st.osFile == nil || p.stop || p.unsupported {
		p.mu.Unlock()
		st.release(extents)
		return
	}
	p.queue = append(p.queue, extents...)
	if !p.running {
		p.running = true
		p.done = make(chan struct{})
		go st.punchQueued(p.done)
	}
	p.mu.Unlock()
}

// punchQueued punches the queued space until none is left.
func (st *store) punchQueued(done chan struct{}) {
	defer close(done)
	p := &st.punches
	for {
		p.mu.Lock()
		if len(p.queue) == 0 || p.stop {
			p.running = false
			p.mu.Unlock()
			return
		}
		e := p.queue[0]
		p.queue = p.queue[1:]
		unsupported := p.unsupported
		p.mu.Unlock()
		// A hole that cannot be punched keeps its pages until the space is rewritten or the
		// file closes: nothing is lost, and nothing is reported.
		if !unsupported {
			if err := st.calls.PunchHole(st.osFile, e.off, e.n); errors.Is(err, sys.ErrUnsupported) {
				p.mu.Lock()
				p.unsupported = true
				p.mu.Unlock()
			}
		}
		st.release([]extent{e})
	}
}

// stopPunching makes the punching goroutine stop and waits for it: the file closes next.
func (st *store) stopPunching() {
	p := &st.punches
	p.mu.Lock()
	p.stop = true
	done := p.done
	p.mu.Unlock()
	if done != nil {
		<-done
	}
}
