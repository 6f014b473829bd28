// Package scratch hands out large working arrays of a merge (the id logs and the counting
// sort's rows) outside the Go heap where it can: anonymous private mappings advised
// MADV_HUGEPAGE, so that first touching them costs a page fault per 2 MiB rather than per 4 KiB
// (on a virtual machine a fault of a small page costs tens of microseconds: a 6 MiB log took
// 1,500 of them), and so that they add nothing to the Go heap a collector paces on. Where
// mapping is not available or fails, they come from the Go heap. Every Array must be Freed;
// Free of the zero Array, and a second Free, do nothing.
package scratch

import (
	"unsafe"
)

// minMapped is the smallest array that is mapped: below it, the Go heap is cheaper.
const minMapped = 1 << 20

// Array is n elements of T (integers: the mapped memory is not scanned by the collector).
type Array[T uint8 | uint16 | uint32 | uint64] struct {
	S      []T
	mapped []byte // the mapping behind S, nil when S is on the Go heap
}

// New returns an array of n zero elements.
func New[T uint8 | uint16 | uint32 | uint64](n int) Array[T] {
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	if size >= minMapped {
		if m, ok := mapAnon(size); ok {
			return Array[T]{S: unsafe.Slice((*T)(unsafe.Pointer(&m[0])), n), mapped: m}
		}
	}
	return Array[T]{S: make([]T, n)}
}

// Free releases the array's memory; S must not be used after.
func (a *Array[T]) Free() error {
	m := a.mapped
	a.S, a.mapped = nil, nil
	if m == nil {
		return nil
	}
	return unmap(m)
}
