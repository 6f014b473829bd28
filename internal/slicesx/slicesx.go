// Package slicesx holds the slice helpers the merge and the query share.
package slicesx

import (
	"cmp"
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

// Distinct returns the distinct values of row (a multi-value row's ids, say): row itself when
// they are distinct (the usual case), else a sorted, compacted copy in scratch, which it
// returns too (grown) for the next call.
func Distinct[T cmp.Ordered](row, scratch []T) ([]T, []T) {
	switch len(row) {
	case 0, 1:
		return row, scratch
	case 2:
		if row[0] != row[1] {
			return row, scratch
		}
		return row[:1], scratch
	}
	increasing := true
	for k := 1; k < len(row) && increasing; k++ {
		increasing = row[k-1] < row[k]
	}
	if increasing {
		return row, scratch
	}
	if len(row) <= 16 {
		// A short row: a loop the compiler keeps inline, where slices.Contains costs a call.
		dup := false
		for j := 1; j < len(row) && !dup; j++ {
			for i := 0; i < j; i++ {
				if row[i] == row[j] {
					dup = true
					break
				}
			}
		}
		if !dup {
			return row, scratch
		}
	}
	scratch = append(scratch[:0], row...)
	slices.Sort(scratch)
	scratch = slices.Compact(scratch)
	return scratch, scratch
}
