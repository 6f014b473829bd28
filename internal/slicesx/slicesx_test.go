package slicesx

import (
	"math/rand/v2"
	"slices"
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

// TestDistinct: the distinct values of rows of every length case (none, one, two, increasing,
// short, long, with and without repeats): the row itself when its values are distinct, else
// its sorted distinct values.
func TestDistinct(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var scratch []uint32
	for n := range 40 {
		for c := range 20 {
			row := make([]uint32, n)
			for i := range row {
				row[i] = uint32(rng.IntN(1 + c*3))
			}
			if c%5 == 0 {
				slices.Sort(row)
				row = slices.Compact(row)
			}
			want := slices.Compact(slices.Sorted(slices.Values(row)))
			var got []uint32
			got, scratch = Distinct(row, scratch)
			if len(want) == len(row) {
				require.Equal(t, row, got, "distinct values: the row itself")
			}
			require.Equal(t, want, slices.Sorted(slices.Values(got)), "row %v", row)
		}
	}
}
