package scratch

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestArray writes and reads arrays on both sides of the mapping threshold and frees them
// (twice: the second is a no-op); freed mappings come back from the pool, which stays within
// its limit.
func TestArray(t *testing.T) {
	for _, n := range []int{0, 1, 1000, minMapped / 4, 3 * minMapped} {
		a := New[uint32](n)
		require.Len(t, a.S, n)
		if n*4 >= minMapped && a.mapped == nil {
			t.Logf("%d elements: not mapped here (the heap fallback)", n)
		}
		for i := range a.S {
			a.S[i] = uint32(i)
		}
		for i := range a.S {
			require.Equal(t, uint32(i), a.S[i])
		}
		require.NoError(t, a.Free())
		require.Nil(t, a.S)
		require.NoError(t, a.Free())
	}
	var zero Array[uint16]
	require.NoError(t, zero.Free())

	a := New[uint64](minMapped / 8)
	if a.mapped == nil {
		t.Skip("no mappings here")
	}
	first := &a.mapped[0]
	require.NoError(t, a.Free())
	b := New[uint16](minMapped / 2) // as many bytes: the pooled mapping
	require.Same(t, first, &b.mapped[0], "the freed mapping, reused")
	var held []Array[uint8]
	for range 2 * PoolLimit / mapUnit {
		held = append(held, New[uint8](mapUnit))
	}
	for i := range held {
		require.NoError(t, held[i].Free())
	}
	require.NoError(t, b.Free())
	pool.Lock()
	defer pool.Unlock()
	require.LessOrEqual(t, pool.bytes, PoolLimit)
}
