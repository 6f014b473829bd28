package slicesx

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExtend: the new elements follow the old ones, which stay; the slice grows when it must
// and reuses its array when it can.
func TestExtend(t *testing.T) {
	s := []int{1, 2}
	tail := Extend(&s, 3)
	require.Len(t, tail, 3)
	require.Len(t, s, 5)
	require.Equal(t, []int{1, 2}, s[:2])
	copy(tail, []int{3, 4, 5})
	require.Equal(t, []int{1, 2, 3, 4, 5}, s)
	s = s[:1]
	before := &s[0]
	tail = Extend(&s, 2) // within the capacity: the same array
	require.Equal(t, []int{2, 3}, tail)
	require.Same(t, before, &s[0])
	require.Empty(t, Extend(&s, 0))
	require.Len(t, s, 3)
}
