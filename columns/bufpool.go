package columns

import (
	"math/bits"
	"sync"
	"unsafe"
)

// Buffer pools: the chunk buffers of cursors (a frame read, its decompressed bytes, the decoded
// values) and of writers (a chunk's values, its encoded frame, a blob chunk's bytes, a bitmap
// part's ends) are taken from process-wide pools and given back when their owner is done
// (Cursor Release, a writer's finish). A merge inside a service holding a large Go heap then
// reuses the previous merge's buffers instead of allocating about 20 MB anew: allocation is
// what paces the collector, and each of its cycles marks the whole live heap.
//
// A pool holds slices in power-of-two capacity classes from 2^minPoolShift to 2^maxPoolShift
// elements; a request above the largest class is allocated and dropped as before. Pooled memory
// holds what its last owner left: whoever takes a slice writes before reading. A slice is given
// back only by its one owner, after the last use of every view of it.
const (
	minPoolShift = 8
	maxPoolShift = 22
	poolClasses  = maxPoolShift - minPoolShift + 1
)

// slicePool pools []T by capacity class.
type slicePool[T any] struct {
	classes [poolClasses]sync.Pool // of *[]T
}

var (
	bytePool    slicePool[byte]
	int64Pool   slicePool[int64]
	float64Pool slicePool[float64]
	uint32Pool  slicePool[uint32]
	uint64Pool  slicePool[uint64]
	intPool     slicePool[int]
)

// poolClass returns the class whose slices hold at least n elements, or -1 when n is above
// the largest class.
func poolClass(n int) int {
	if n <= 1<<minPoolShift {
		return 0
	}
	s := bits.Len(uint(n - 1)) // 2^s >= n
	if s > maxPoolShift {
		return -1
	}
	return s - minPoolShift
}

// get returns an empty slice with room for at least n elements.
func (p *slicePool[T]) get(n int) []T {
	c := poolClass(n)
	if c < 0 {
		return make([]T, 0, n)
	}
	if x, ok := p.classes[c].Get().(*[]T); ok {
		return (*x)[:0]
	}
	return make([]T, 0, 1<<(c+minPoolShift))
}

// put gives s back. The caller must not use s, or any slice sharing its memory, after.
// Slices too small or too large for a class are dropped, as is nil.
func (p *slicePool[T]) put(s []T) {
	n := cap(s)
	if n < 1<<minPoolShift || n > 1<<maxPoolShift {
		return
	}
	c := bits.Len(uint(n)) - 1 - minPoolShift // the largest class s can serve: 2^(c+min) <= n
	if invariants {
		poison(s[:n])
	}
	s = s[:0]
	p.classes[c].Put(&s)
}

// grow returns s with room for n more elements, its contents kept: s itself when it has
// the room, else a pooled slice with s copied in (s is given back: the caller must hold no
// other view of it).
func (p *slicePool[T]) grow(s []T, n int) []T {
	if len(s)+n <= cap(s) {
		return s
	}
	out := p.get(max(len(s)+n, 2*cap(s)))
	out = append(out, s...)
	p.put(s)
	return out
}

// regrow returns a slice of at least n elements' room for s's owner to decode into from
// scratch: s when it has the room, else a pooled one (s is given back).
func (p *slicePool[T]) regrow(s []T, n int) []T {
	if n <= cap(s) {
		return s[:0]
	}
	p.put(s)
	return p.get(n)
}

// numPool returns the pool of int64 or float64 slices.
func numPool[T int64 | float64]() *slicePool[T] {
	var zero T
	switch any(zero).(type) {
	case int64:
		return any(&int64Pool).(*slicePool[T])
	default:
		return any(&float64Pool).(*slicePool[T])
	}
}

// poison overwrites a slice given back to a pool (with the invariants build tag), so that a
// reader still holding a view of it, or a taker reading before it writes, sees garbage and
// fails a test rather than passing by luck on the last owner's bytes.
func poison[T any](s []T) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(*new(T))))
	for i := range b {
		b[i] = 0xA5
	}
}
