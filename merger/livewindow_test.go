package merger

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
)

// TestLiveBitmapsExact: every live bitmap equals the rows holding its value, checked against
// the rows' ids, with readers flushing in the middle of containers' rows (a window flushed
// early, then filled again) and rows spanning several containers; frequent values (windows),
// values of middling frequency (slots of bigBatch) and rare ones (slots of pendBatch), single
// and multi-value.
func TestLiveBitmapsExact(t *testing.T) {
	schema := columns.Schema{Dimensions: []columns.Dimension{
		{Name: "few"},  // 4 values: windows
		{Name: "mid"},  // 300 values: some windows, most slots
		{Name: "many"}, // 20,000 values: rare
		{Name: "multi", MultiValue: true},
	}}
	b, err := NewBuilder(schema, BuilderOptions{LiveBitmaps: true})
	require.NoError(t, err)
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 99))
	const rows = 300_000 // 5 containers
	check := func() {
		for _, d := range b.dims {
			want := make([][]uint32, len(d.vals))
			for r := 0; r < b.n; r++ {
				ids := d.rowIDs(r)
				for k, id := range ids {
					if k > 0 && id == ids[k-1] {
						continue
					}
					want[id] = append(want[id], uint32(r))
				}
			}
			for id := range want {
				got := d.liveBitmap(uint32(id)).ToArray()
				if len(want[id]) == 0 {
					require.Empty(t, got, "seed %d: %s id %d", seed, d.dim.Name, id)
					continue
				}
				require.Equal(t, want[id], got, "seed %d: %s id %d (%q) after %d rows", seed, d.dim.Name, id, d.vals[id], b.n)
			}
		}
	}
	windows := 0
	for i := 0; i < rows; i++ {
		r := columns.Row{Time: int64(i), Dims: [][]string{
			{strconv.Itoa(rng.IntN(4))},
			{strconv.Itoa(int(rng.ExpFloat64() * 40))},
			{strconv.Itoa(rng.IntN(20_000))},
			nil,
		}}
		if rng.IntN(10) > 0 {
			for range 1 + rng.IntN(3) {
				r.Dims[3] = append(r.Dims[3], "m"+strconv.Itoa(rng.IntN(6)))
			}
		}
		require.NoError(t, b.Add(r))
		if i == 1000 || i == 70_000 || i == 70_001 || i == 200_000 || rng.IntN(60_000) == 0 {
			check() // readers flush pending rows and windows mid-container
		}
	}
	for _, d := range b.dims {
		for _, w := range d.wins {
			if w != nil {
				windows++
			}
		}
	}
	require.Positive(t, windows, "no value got a window")
	check()
}
