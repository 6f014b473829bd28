// Package offheap is a medium.Medium backend whose bytes live in anonymous private mappings
// outside the Go heap: a merge can stage gigabytes without growing the GC heap or triggering
// collections in the host program.
//
// # Chunks
//
// Memory comes in chunks of [chunkSize] (2 MiB, the x86-64 and arm64-with-4K-pages huge page
// size), each one mmap(MAP_PRIVATE|MAP_ANON) of exactly that size and advised MADV_HUGEPAGE, so
// that with transparent huge pages in "madvise" mode the kernel backs it with one huge page: one
// page fault per 2 MiB instead of 512. Recent Linux kernels (6.7 on) place mappings whose length is a
// multiple of the huge page size on a huge page boundary; on older kernels a chunk may be
// unaligned, which stays correct and only loses part of the huge page backing. A failed
// madvise is not an error.
//
// # Small Bytes
//
// A Bytes grows by segments that double from 256 bytes to 256 KiB (a large write skips ahead to
// the size it needs). Every segment is carved, one after the other, from the chunk the medium is
// currently filling, shared by all its Bytes: thousands of Bytes of a few bytes each cost a few
// hundred bytes each, all outside the Go heap, and many Bytes growing side by side fill chunks in
// turn instead of each holding a half-empty chunk of its own. When a Bytes takes the next carve
// right after its own last one, its segment simply grows, so a Bytes written alone holds whole
// chunks as single segments (and WriteTo hands whole chunks to the destination). Nothing is freed
// before the medium closes: Bytes are append-only.
//
// # The pool, and how memory goes back to the system
//
// Closing a medium returns its chunks to a process-wide pool, kept hot: the pages stay mapped and
// resident (no MADV_DONTNEED), so that the next medium writes into them without a page fault.
// The pool holds at most 64 MiB; chunks that do not fit are unmapped at Close. Memory therefore
// goes back to the system with munmap only, at Close for what passes the limit. Nothing is
// unmapped while a medium that holds it is open.
//
// # Budget and spill
//
// Options.MaxBytes caps the chunk memory one medium and its children hold; Options.Budget is a
// [Budget] shared by several media. Both count whole chunks held for staging, not bytes
// written, because a touched chunk is what costs resident memory: a medium under MaxBytes never
// holds more than MaxBytes of chunks. Pooled chunks count against no budget (the pool limit
// bounds them).
//
// When a Bytes needs a chunk that a budget refuses:
//   - with Options.Spill set, the Bytes continues on a Bytes of the spill medium (of a child of
//     it that the offheap medium creates at its first spill and closes with itself). Its content
//     is the offheap head followed by the spilled tail; Size, ReadAt, WriteTo and ReadFrom see one
//     sequence. Once spilled, a Bytes stays spilled even if the budget frees up.
//   - without Spill, the write fails with an error wrapping [ErrBudget]. The bytes of that write
//     that fit in memory already held are staged and counted (Write returns n < len(p) with the
//     error, as io.Writer allows); everything written before stays readable; every later write
//     returns the same error (the medium contract's sticky error).
//
// Only a budget's refusal spills: a failing mmap is an error of the write, sticky like any other.
//
// # Memory safety
//
// Close takes every slice into a chunk away from the medium's Bytes before the chunk goes back
// to the pool or is unmapped, and every call on a Bytes but Size checks first that the medium is
// open: a closed Bytes can neither reach an unmapped page nor a chunk another medium now uses.
// ReadAt and WriteTo read only bytes written (a reused chunk is not cleared; its old bytes are
// never visible).
//
// # Platforms
//
// On Linux the chunks are anonymous mappings made through internal/sys. Elsewhere (the sys layer
// maps memory only on Linux) the chunks are ordinary Go heap slices of the same size, pooled the
// same way: correct, but seen by the garbage collector. WriteTo into an *os.File uses writev(2)
// where x/sys has it, one write per chunk elsewhere.
package offheap

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/writeout/writeout/internal/backend"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// chunkSize is the size of every mapping the package makes.
const chunkSize = 2 << 20

// Segment sizes: the segments of a Bytes double from minSegment up to maxSegment (a large write
// skips ahead to the size it needs). Every segment is carved from the medium's current chunk.
const (
	minSegment = 256
	maxSegment = 256 << 10
)

// ErrBudget is wrapped by the error of a write that would pass a memory budget on a medium
// without a spill medium.
var ErrBudget = errors.New("offheap: memory budget exceeded")

// Options configure a Medium. The zero value is an unlimited medium with no spill.
type Options struct {
	// MaxBytes caps the chunk memory held by the medium and its children; 0 means no cap. It is
	// counted in whole chunks of chunkSize: a value below chunkSize lets nothing stay in memory.
	MaxBytes int64
	// Budget, if set, is shared with other media; the medium and its children count against it
	// as well as against MaxBytes.
	Budget *Budget
	// Spill, if set, receives what does not fit in the budget (see the package doc). The offheap
	// medium makes a child of it and closes that child with itself; Spill itself stays open and
	// belongs to the caller.
	Spill medium.Medium
}

// Medium is an offheap medium. Its methods are safe for concurrent use.
type Medium struct {
	lc      backend.Lifecycle
	budgets []*Budget // the medium's own MaxBytes budget and Options.Budget, shared with children
	spill   medium.Medium
	pool    *chunkPool
	writev  func(f *os.File, bufs [][]byte) (int64, error)

	mu         sync.Mutex
	released   bool
	cur        []byte    // the chunk segments are carved from
	off        int       // cur[off:] is not carved yet
	lastOwner  *offBytes // the Bytes whose tail is the last carve from cur (nil: none)
	lastStart  int       // where that carve starts in cur
	chunks     [][]byte  // every chunk the medium holds
	bytes      []*offBytes
	spillChild medium.Medium // made at the first spill
}

var _ medium.Medium = (*Medium)(nil)

// New returns an offheap medium.
func New(opts Options) (*Medium, error) {
	if opts.MaxBytes < 0 {
		return nil, fmt.Errorf("offheap: new: %w: MaxBytes %d is negative", medium.ErrInvalid, opts.MaxBytes)
	}
	var budgets []*Budget
	if opts.MaxBytes > 0 {
		budgets = append(budgets, NewBudget(opts.MaxBytes))
	}
	if opts.Budget != nil {
		budgets = append(budgets, opts.Budget)
	}
	return newMedium(budgets, opts.Spill, defaultPool), nil
}

func newMedium(budgets []*Budget, spill medium.Medium, pool *chunkPool) *Medium {
	m := &Medium{budgets: budgets, spill: spill, pool: pool, writev: sys.Writev}
	m.lc.OnClose(m.release)
	return m
}

// NewBytes returns an empty Bytes. It takes no memory until the first write.
func (m *Medium) NewBytes() (medium.Bytes, error) {
	b := &offBytes{m: m}
	added := m.lc.IfOpen(func() {
		m.mu.Lock()
		m.bytes = append(m.bytes, b)
		m.mu.Unlock()
	})
	if !added {
		return nil, closedErr("new bytes")
	}
	return b, nil
}

// NewChild returns a medium with the same budgets and spill medium, closed by its own Close or
// by m's.
func (m *Medium) NewChild() (medium.Medium, error) {
	child := newMedium(m.budgets, m.spill, m.pool)
	child.writev = m.writev
	if !m.lc.AddChild(child) {
		return nil, multierr.Join(closedErr("new child"), child.Close())
	}
	return child, nil
}

// OnClose registers fn to run at Close, last registered first.
func (m *Medium) OnClose(fn func() error) { m.lc.OnClose(fn) }

// Close closes the children, runs the OnClose hooks, closes the spill child, returns the chunks
// to the pool (unmapping those past its limit) and releases the budget. Every step runs even when
// an earlier one fails; the first error is returned with the others joined. A second Close
// returns nil.
func (m *Medium) Close() error { return m.lc.Close() }

// release is the medium's own Close hook, registered first so that it runs last.
func (m *Medium) release() error {
	m.mu.Lock()
	m.released = true
	chunks, bs, spillChild := m.chunks, m.bytes, m.spillChild
	m.chunks, m.bytes, m.cur, m.lastOwner, m.spillChild = nil, nil, nil, nil, nil
	m.mu.Unlock()

	// No Bytes keeps a slice into a chunk that goes back to the pool or is unmapped.
	for _, b := range bs {
		b.drop()
	}
	var errs []error
	if spillChild != nil {
		if err := spillChild.Close(); err != nil {
			errs = append(errs, fmt.Errorf("offheap: close spill medium: %w", err))
		}
	}
	errs = append(errs, m.pool.put(chunks)...)
	for _, bud := range m.budgets {
		bud.release(int64(len(chunks)) * chunkSize)
	}
	return multierr.Join(errs...)
}

// reserve takes n bytes from every budget, or from none.
func (m *Medium) reserve(n int64) error {
	for i, bud := range m.budgets {
		if err := bud.reserve(n); err != nil {
			for _, prev := range m.budgets[:i] {
				prev.release(n)
			}
			return err
		}
	}
	return nil
}

// chunkLocked maps or reuses one chunk for the medium, within its budgets. m.mu is held.
func (m *Medium) chunkLocked() ([]byte, error) {
	if m.released {
		return nil, medium.ErrClosed
	}
	if err := m.reserve(chunkSize); err != nil {
		return nil, err
	}
	c, err := m.pool.get()
	if err != nil {
		for _, bud := range m.budgets {
			bud.release(chunkSize)
		}
		return nil, err
	}
	m.chunks = append(m.chunks, c)
	return c, nil
}

// segment gives b room for n more bytes (n <= maxSegment), carved from the medium's current
// chunk right after the last carve, or from a new chunk when the current one has less than
// minSegment left (a smaller room than n is handed out rather than wasted). When the last carve
// of the current chunk was b's tail, the tail itself is returned with its capacity extended, so
// that a Bytes written alone holds whole chunks as single segments. Otherwise the result is a new
// empty segment. b.tail must be full.
func (m *Medium) segment(b *offBytes, n int) (seg []byte, extended bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.released {
		return nil, false, medium.ErrClosed
	}
	if room := len(m.cur) - m.off; room < n {
		if room >= minSegment {
			n = room
		} else {
			c, err := m.chunkLocked()
			if err != nil {
				return nil, false, err
			}
			m.cur, m.off, m.lastOwner = c, 0, nil
		}
	}
	end := m.off + n
	if m.lastOwner == b {
		seg = m.cur[m.lastStart : m.lastStart+len(b.tail) : end]
		m.off = end
		return seg, true, nil
	}
	seg = m.cur[m.off:m.off:end]
	m.lastOwner, m.lastStart, m.off = b, m.off, end
	return seg, false, nil
}

// spillBytes returns a new Bytes of the spill child, making the child at the first call.
func (m *Medium) spillBytes() (medium.Bytes, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.released {
		return nil, closedErr("write")
	}
	if m.spillChild == nil {
		child, err := m.spill.NewChild()
		if err != nil {
			return nil, fmt.Errorf("offheap: spill: new child of the spill medium: %w", err)
		}
		m.spillChild = child
	}
	b, err := m.spillChild.NewBytes()
	if err != nil {
		return nil, fmt.Errorf("offheap: spill: new bytes: %w", err)
	}
	return b, nil
}
