package scratch

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestArray writes and reads arrays on both sides of the mapping threshold, zeroed when new,
// and frees them (twice: the second is a no-op).
func TestArray(t *testing.T) {
	for _, n := range []int{0, 1, 1000, minMapped / 4, 3 * minMapped} {
		a := New[uint32](n)
		require.Len(t, a.S, n)
		if n*4 >= minMapped && a.mapped == nil {
			t.Logf("%d elements: not mapped here (the heap fallback)", n)
		}
		for i := range a.S {
			require.Zero(t, a.S[i])
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
}
