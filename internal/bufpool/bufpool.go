// Package bufpool pools the chunk buffers of readers and writers: slices of numbers in
// power-of-two capacity classes, taken with Get and given back with Put by their one owner.
// A merge inside a service holding a large Go heap then reuses the previous merge's buffers
// instead of allocating them anew: allocation is what paces the collector, and each of its
// cycles marks the whole live heap.
//
// A pool holds slices in power-of-two capacity classes from 2^minShift to 2^maxShift
// elements; a request above the largest class is allocated and dropped as before. Pooled memory
// holds what its last owner left: whoever takes a slice writes before reading. A slice is given
// back only by its one owner, after the last use of every view of it. With the invariants build
// tag, a slice given back is poisoned (every byte 0xA5), so that a stale view reads garbage and
// fails a test rather than passing by luck on the last owner's bytes.
package bufpool

import (
	"math/bits"
	"sync"
	"unsafe"
)

const (
	minShift   = 8
	maxShift   = 22
	numClasses = maxShift - minShift + 1
)

// The pools the readers and writers of segments share: one per element type, so that a buffer
// one package gives back serves the next of any.
var (
	Bytes    Pool[byte]
	Int64s   Pool[int64]
	Float64s Pool[float64]
	Uint32s  Pool[uint32]
	Uint64s  Pool[uint64]
	Ints     Pool[int]
)

// Pool pools []T by capacity class. Its zero value is ready to use; it is safe for
// concurrent use.
type Pool[T Elem] struct {
	classes [numClasses]sync.Pool // of *[]T
}

// Elem is what a pooled slice holds: numbers, with no pointers to keep alive.
type Elem interface {
	~byte | ~uint16 | ~uint32 | ~uint64 | ~int | ~int32 | ~int64 | ~float64
}

// class returns the class whose slices hold at least n elements, or -1 when n is above
// the largest class.
func class(n int) int {
	if n <= 1<<minShift {
		return 0
	}
	s := bits.Len(uint(n - 1)) // 2^s >= n
	if s > maxShift {
		return -1
	}
	return s - minShift
}

// Get returns an empty slice with room for at least n elements.
func (p *Pool[T]) Get(n int) []T {
	c := class(n)
	if c < 0 {
		return make([]T, 0, n)
	}
	if x, ok := p.classes[c].Get().(*[]T); ok {
		return (*x)[:0]
	}
	return make([]T, 0, 1<<(c+minShift))
}

// Put gives s back. The caller must not use s, or any slice sharing its memory, after.
// Slices too small or too large for a class are dropped, as is nil.
func (p *Pool[T]) Put(s []T) {
	n := cap(s)
	if n < 1<<minShift || n > 1<<maxShift {
		return
	}
	c := bits.Len(uint(n)) - 1 - minShift // the largest class s can serve: 2^(c+min) <= n
	if invariants {
		poison(s[:n])
	}
	s = s[:0]
	p.classes[c].Put(&s)
}

// Grow returns s with room for n more elements, its contents kept: s itself when it has
// the room, else a pooled slice with s copied in (s is given back: the caller must hold no
// other view of it).
func (p *Pool[T]) Grow(s []T, n int) []T {
	if len(s)+n <= cap(s) {
		return s
	}
	out := p.Get(max(len(s)+n, 2*cap(s)))
	out = append(out, s...)
	p.Put(s)
	return out
}

// Regrow returns a slice of at least n elements' room for s's owner to decode into from
// scratch: s when it has the room, else a pooled one (s is given back).
func (p *Pool[T]) Regrow(s []T, n int) []T {
	if n <= cap(s) {
		return s[:0]
	}
	p.Put(s)
	return p.Get(n)
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
