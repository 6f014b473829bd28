// Package slicesx holds the slice helpers the merge and the query share.
package slicesx

import (
	"slices"
	"unsafe"
)

// Extend lengthens *s by n elements and returns them (their values unspecified: a grown
// array's are zero, a reused one's what it held).
func Extend[T any](s *[]T, n int) []T {
	k := len(*s)
	*s = slices.Grow(*s, n)[:k+n]
	return (*s)[k:]
}

// Number is what AsBytes views: numbers, which hold no pointers.
type Number interface {
	uint8 | uint16 | uint32 | uint64 | int32 | int64 | float64
}

// AsBytes returns s's memory as bytes, in the machine's byte order: for numbers a process
// writes out and reads back itself (a merge's spilled scratch), never for a file format.
func AsBytes[T Number](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}
