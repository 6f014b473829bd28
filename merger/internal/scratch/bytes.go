package scratch

import "unsafe"

// Bytes returns the memory the array holds: its mapping's whole length when it is mapped (a
// pooled mapping may be longer than the array asked for), else its slice's capacity in bytes.
func (a *Array[T]) Bytes() int {
	if a.mapped != nil {
		return len(a.mapped)
	}
	var zero T
	return cap(a.S) * int(unsafe.Sizeof(zero))
}

// PoolBytes returns the bytes of freed mappings the pool holds (tests check with it that
// arrays are given back).
func PoolBytes() int {
	pool.Lock()
	defer pool.Unlock()
	return pool.bytes
}

// MinMapped is the size from which New maps an array: smaller ones are on the Go heap.
const MinMapped = minMapped

// Held returns the bytes of Bytes that DropBelow has not given back (those it gave back come
// back as they are written again, after Undrop).
func (a *Array[T]) Held() int { return a.Bytes() - a.dropped }
