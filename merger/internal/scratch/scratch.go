// Package scratch hands out large working arrays of a merge (the id logs and the counting
// sort's rows) outside the Go heap where it can: anonymous private mappings, which the
// allocator does not zero (the kernel's first touch does) and which add nothing to the Go heap
// a collector paces on. Where mapping is not available or fails, they come from the Go heap.
// Every Array must be Freed; Free of the zero Array, and a second Free, do nothing.
//
// The mappings are not advised MADV_HUGEPAGE: they get the pages the system's transparent huge
// page policy gives them (small ones in its usual "madvise" mode). Advised, each 2 MiB would
// cost one fault instead of 512, but a huge page must come from a free block of 2 MiB, and on a
// virtual machine with free page reporting those are the blocks handed back to the host when
// another process exited: zeroing one makes the host fault its memory back in, milliseconds
// each, so a merge right after a process that freed much memory would spend its time zeroing
// huge pages. Small pages cost more faults and less time (bench/RESULTS.md has the
// measurements).
//
// Mappings are whole multiples of 2 MiB. A freed one goes to a process-wide pool of at most
// PoolLimit bytes, kept resident, which the next array of at most its size takes: a process
// that merges again and again (a service) writes into pages already faulted in, as the Go heap
// would give it; what does not fit the pool is unmapped.
package scratch

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/sys"
)

const (
	// minMapped is the smallest array that is mapped: below it, the Go heap is cheaper.
	minMapped = 1 << 20
	// mapUnit is the size mappings are rounded up to (the huge page size, should the system
	// back them with huge pages).
	mapUnit = 2 << 20
	// PoolLimit bounds the bytes of freed mappings kept for the next arrays.
	PoolLimit = 64 << 20
)

// pool holds freed mappings, smallest first.
var pool struct {
	sync.Mutex
	free  [][]byte
	bytes int
}

// take returns a pooled mapping of at least size bytes, or nil.
func take(size int) []byte {
	pool.Lock()
	defer pool.Unlock()
	for i, m := range pool.free {
		if len(m) >= size {
			pool.free = slices.Delete(pool.free, i, i+1)
			pool.bytes -= len(m)
			return m
		}
	}
	return nil
}

// give keeps m in the pool if it fits, else unmaps it.
func give(m []byte) error {
	pool.Lock()
	if pool.bytes+len(m) <= PoolLimit {
		i, _ := slices.BinarySearchFunc(pool.free, len(m), func(x []byte, n int) int { return len(x) - n })
		pool.free = slices.Insert(pool.free, i, m)
		pool.bytes += len(m)
		pool.Unlock()
		return nil
	}
	pool.Unlock()
	return unmap(m)
}

// Elem is what an Array holds: numbers, or accumulators of numbers, which hold no pointers
// (the mapped memory is not scanned by the collector).
type Elem interface {
	uint8 | uint16 | uint32 | uint64 | int32 | int64 | float64 | agg.LongAcc
}

// Array is n elements of T.
type Array[T Elem] struct {
	S      []T
	mapped []byte      // the mapping behind S, nil when S is on the Go heap
	filler *populating // Populate's goroutine, nil without Populate
	exact  bool        // mapped is S's pages only, and Free unmaps it (NewExact)
	// dropped is how many bytes at the start of mapped DropBelow gave back.
	dropped int
}

// populating is a Populate goroutine: Free sets stop, and waits for done.
type populating struct {
	stop atomic.Bool
	done chan struct{}
}

// New returns an array of n elements. Their values are unspecified (a pooled mapping holds
// what its last array left): write before reading.
func New[T Elem](n int) Array[T] {
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	if size >= minMapped {
		m := take(size)
		if m == nil {
			var ok bool
			if m, ok = mapAnon((size + mapUnit - 1) / mapUnit * mapUnit); !ok {
				m = nil
			}
		}
		if m != nil {
			return over[T](m, n)
		}
	}
	return Array[T]{S: make([]T, n)}
}

// over returns the array of n elements of T in mapping m.
func over[T Elem](m []byte, n int) Array[T] {
	return Array[T]{S: unsafe.Slice((*T)(unsafe.Pointer(&m[0])), n), mapped: m}
}

// NewExact is New for an array that lives a short while and whose memory should leave with it:
// mapped (from 64 KiB) to the page, not to mapUnit, and unmapped by Free rather than
// pooled, so that a process holds only the pages of the arrays in use.
func NewExact[T Elem](n int) Array[T] {
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	if size >= minExact {
		if m, ok := mapAnon((size + pageSize - 1) / pageSize * pageSize); ok {
			a := over[T](m, n)
			a.exact = true
			return a
		}
	}
	return Array[T]{S: make([]T, n)}
}

const (
	// pageSize is what NewExact rounds mappings to, and DropBelow drops.
	pageSize = 4 << 10
	// minExact is the smallest array NewExact maps.
	minExact = 64 << 10
)

// DropBelow gives back to the system the whole pages of a mapped array that hold only
// elements below n: a caller that reads an array once, in order, frees what it has read.
// Those elements read as zero after (the caller must not read them again); it reports how
// many elements from the start are dropped now. An array on the Go heap drops nothing.
func (a *Array[T]) DropBelow(n int) (int, error) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if a.mapped == nil {
		return 0, nil
	}
	if off := min(n*size, len(a.mapped)) / pageSize * pageSize; off > a.dropped {
		if err := sys.Default.Madvise(a.mapped[a.dropped:off], sys.MadvDontneed); err != nil {
			return a.dropped / size, fmt.Errorf("merger: release scratch pages: %w", err)
		}
		a.dropped = off
	}
	return a.dropped / size, nil
}

// Undrop makes the elements DropBelow dropped usable again: they read as zero until written.
func (a *Array[T]) Undrop() { a.dropped = 0 }

// Grow makes S hold at least n elements, keeping its first keep: when it must, it moves them
// to a new array of at least twice the length and frees the old one (so no slice of the old S
// may be in use). Its values past keep are unspecified.
func (a *Array[T]) Grow(n, keep int) error {
	if n <= len(a.S) {
		return nil
	}
	b := New[T](max(n, 2*len(a.S)))
	copy(b.S, a.S[:keep])
	err := a.Free()
	*a = b
	return err
}

// Populate faults S's pages in, writable, on a goroutine of its own (MADV_POPULATE_WRITE),
// for a caller that will write all of S and has a core to spare now: the faults are then off
// the writer's path. It writes nothing, so S may be written meanwhile. It goes populatePiece
// bytes at a time, and Free stops it between two (a merge cancelled at once does not wait for
// gigabytes to come in) and waits for it. It does nothing for an array on the Go heap, a
// second time, or where the kernel does not know the advice (before Linux 5.14).
func (a *Array[T]) Populate() {
	if a.mapped == nil || a.filler != nil || len(a.S) == 0 {
		return
	}
	var zero T
	m := a.mapped[:len(a.S)*int(unsafe.Sizeof(zero))]
	populated.Add(int64(len(m)))
	p := &populating{done: make(chan struct{})}
	a.filler = p
	go func() {
		defer close(p.done)
		for off := 0; off < len(m); off += populatePiece {
			if pieceHook != nil {
				pieceHook(p)
			}
			if p.stop.Load() {
				return
			}
			// Failing, the writer faults the pages itself.
			if sys.Default.Madvise(m[off:min(len(m), off+populatePiece)], sys.MadvPopulateWrite) != nil {
				return
			}
			piecesDone.Add(1)
		}
	}()
}

// populatePiece is how much Populate asks the kernel for at a time: 16 MiB, 4,096 faults of
// small pages, about 11 ms here.
const populatePiece = 16 << 20

// pieceHook, when set (tests), runs before each piece Populate asks for; piecesDone counts the
// pieces done.
var (
	pieceHook  func(*populating)
	piecesDone atomic.Int64
)

// populated counts the bytes Populate was asked to fault in (PopulatedBytes).
var populated atomic.Int64

// PopulatedBytes returns the bytes Populate was asked to fault in, process-wide (tests check
// with it that a merge populates what it should).
func PopulatedBytes() int64 { return populated.Load() }

// Free releases the array's memory, once Populate's goroutine is stopped; S must not be used
// after.
func (a *Array[T]) Free() error { return a.free(false) }

// FreeToSystem is Free for an array whose size no later array of the process is likely to
// take: a mapping goes back to the system, not to the pool, where it would stay resident.
func (a *Array[T]) FreeToSystem() error { return a.free(true) }

func (a *Array[T]) free(toSystem bool) error {
	m, p, exact := a.mapped, a.filler, a.exact || toSystem
	a.S, a.mapped, a.filler, a.exact, a.dropped = nil, nil, nil, false, 0
	if p != nil {
		p.stop.Store(true)
		<-p.done
	}
	if m == nil {
		return nil
	}
	if exact {
		return unmap(m)
	}
	return give(m)
}
