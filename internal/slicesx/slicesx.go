// Package slicesx holds the slice helper the merge and the query share.
package slicesx

import "slices"

// Extend lengthens *s by n elements and returns them (their values unspecified: a grown
// array's are zero, a reused one's what it held).
func Extend[T any](s *[]T, n int) []T {
	k := len(*s)
	*s = slices.Grow(*s, n)[:k+n]
	return (*s)[k:]
}
