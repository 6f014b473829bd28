package bufpool

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClasses(t *testing.T) {
	f := func(n, want int) {
		t.Helper()
		require.Equal(t, want, class(n), "n=%d", n)
	}
	f(0, 0)
	f(1, 0)
	f(1<<minShift, 0)
	f(1<<minShift+1, 1)
	f(4096, 12-minShift)
	f(4097, 13-minShift)
	f(1<<maxShift, numClasses-1)
	f(1<<maxShift+1, -1)

	var p Pool[int64]
	for _, n := range []int{0, 1, 300, 4096, 5000, 1 << maxShift, 1<<maxShift + 1} {
		s := p.Get(n)
		require.Empty(t, s)
		require.GreaterOrEqual(t, cap(s), n)
		p.Put(s)
	}
	// A slice given back serves a request of its class or below, never one above it.
	s := make([]int64, 0, 3000) // class 11 (2048 <= 3000 < 4096)
	s = append(s, 7)
	p.Put(s)
	for range 10 { // sync.Pool may drop s: try a few times
		got := p.Get(2048)
		require.GreaterOrEqual(t, cap(got), 2048)
		got = p.Get(2049)
		require.GreaterOrEqual(t, cap(got), 2049)
	}
	// grow keeps the contents; regrow gives room from scratch.
	g := p.Get(10)
	g = append(g, 1, 2, 3)
	g = p.Grow(g, 1<<14)
	require.Equal(t, []int64{1, 2, 3}, g)
	require.GreaterOrEqual(t, cap(g), 3+1<<14)
	r := p.Regrow(g, 1<<16)
	require.Empty(t, r)
	require.GreaterOrEqual(t, cap(r), 1<<16)
	p.Put(nil)
	p.Put(make([]int64, 3)) // too small for a class: dropped
}

// TestPoison: with the invariants tag, a slice given back reads as 0xA5 bytes through a view
// its owner kept by mistake.
func TestPoison(t *testing.T) {
	if !invariants {
		t.Skip("slices are poisoned with -tags invariants")
	}
	var p Pool[uint32]
	s := make([]uint32, 300)
	view := s[:2]
	p.Put(s)
	require.Equal(t, []uint32{0xA5A5A5A5, 0xA5A5A5A5}, view)
}
