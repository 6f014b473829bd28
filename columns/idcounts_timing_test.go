package columns

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkIDCounts: counting a chunk of ids (checkDimRows) in one array of counts and in
// idCounts' lanes, for random ids of a small and a larger dictionary, and for runs of one id.
func BenchmarkIDCounts(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, tc := range []struct {
		name string
		card int
		run  int
	}{{"card=200", 200, 1}, {"card=5000", 5000, 1}, {"card=200/runs=16", 200, 16}} {
		ids := make([]uint32, benchChunk)
		for i := range ids {
			if i%tc.run == 0 {
				ids[i] = uint32(rng.IntN(tc.card))
			} else {
				ids[i] = ids[i-1]
			}
		}
		b.Run(fmt.Sprintf("%s/counts=one", tc.name), func(b *testing.B) {
			b.SetBytes(int64(4 * len(ids)))
			b.ReportAllocs()
			counts := make([]uint64, tc.card)
			for b.Loop() {
				for _, id := range ids {
					counts[id]++
				}
			}
		})
		b.Run(fmt.Sprintf("%s/counts=lanes", tc.name), func(b *testing.B) {
			b.SetBytes(int64(4 * len(ids)))
			b.ReportAllocs()
			c := newIDCounts(tc.card)
			for b.Loop() {
				c.add(ids)
			}
		})
	}
}
