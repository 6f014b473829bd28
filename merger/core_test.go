package merger

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"
)

func TestSortRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	var tmp []uint32
	for round := 0; round < 2000; round++ {
		var a []uint32
		var starts []int
		for r := rng.IntN(7); r > 0; r-- {
			starts = append(starts, len(a))
			n := rng.IntN(40)
			run := make([]uint32, n)
			for i := range run {
				run[i] = uint32(rng.IntN(100))
			}
			if rng.IntN(4) > 0 {
				slices.Sort(run)
			}
			a = append(a, run...)
		}
		want := slices.Clone(a)
		slices.Sort(want)
		var got []uint32
		got, tmp = sortRuns(a, starts, tmp)
		require.Equal(t, want, got, "round %d", round)
	}
}

// The dense path (FromDense) and the sparse path (AddMany) give the same bytes for one set.
func TestBitmapPathsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for round := 0; round < 200; round++ {
		n := 1 + rng.IntN(300_000)
		p := []float64{0.0001, 0.01, 0.06, 0.3, 0.99}[rng.IntN(5)]
		var rows []uint32
		dense := make([]uint64, (n+63)/64)
		for r := 0; r < n; r++ {
			if rng.Float64() < p {
				rows = append(rows, uint32(r))
				dense[r>>6] |= 1 << (r & 63)
			}
		}
		a := roaring.New()
		a.AddMany(rows)
		a.RunOptimize()
		b := roaring.New()
		b.FromDense(dense, false)
		b.RunOptimize()
		x, err := a.ToBytes()
		require.NoError(t, err)
		y, err := b.ToBytes()
		require.NoError(t, err)
		require.Equal(t, x, y, "round %d n %d p %v", round, n, p)
	}
}
