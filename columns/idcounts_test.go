package columns

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIDCounts: the counts in lanes sum to the plain count of every id, whatever the chunk
// lengths (tails shorter than the lanes included), for a dictionary with lanes and one past
// idLanesMax with one array.
func TestIDCounts(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	f := func(card int, chunks [][]uint32) {
		t.Helper()
		c := newIDCounts(card)
		want := make([]uint64, card)
		for _, ids := range chunks {
			c.add(ids)
			for _, id := range ids {
				want[id]++
			}
		}
		for id := range want {
			require.Equal(t, want[id], c.total(id), "card %d id %d", card, id)
		}
	}
	randomChunks := func(card, n int, run bool) [][]uint32 {
		var chunks [][]uint32
		for range n {
			ids := make([]uint32, rng.IntN(3*idLanes+1))
			for k := range ids {
				if run && k > 0 && rng.IntN(2) == 0 {
					ids[k] = ids[k-1] // repeats, spread over the lanes
					continue
				}
				ids[k] = uint32(rng.IntN(card))
			}
			chunks = append(chunks, ids)
		}
		return chunks
	}
	f(1, [][]uint32{{0, 0, 0, 0, 0, 0, 0}, {}, {0}})
	f(3, [][]uint32{{2, 1, 0, 2, 2}, {1, 1, 1, 1}})
	f(5, randomChunks(5, 200, true))
	f(300, randomChunks(300, 200, false))
	f(idLanesMax, randomChunks(idLanesMax, 100, true))
	f(idLanesMax+1, [][]uint32{{idLanesMax, 0, idLanesMax, 7, idLanesMax}})
	f(idLanesMax+1000, randomChunks(idLanesMax+1000, 100, true))
	require.Nil(t, newIDCounts(idLanesMax + 1).lanes[1], "one array past idLanesMax")
}
