package columns

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// BenchmarkWriteSortedRuns writes, through the column writers as a merge does, a table whose
// first dimension is sorted within each time bucket (rows=run a bucket) and whose second is in
// no order, 300 Zipf values each: the ids task of a zstd merge, where the id-deltas form
// (id-chunks-v5) is tried and kept for the first dimension.
func BenchmarkWriteSortedRuns(b *testing.B) {
	const n = 300_000
	for _, run := range []int{12, 115} {
		rng := rand.New(rand.NewPCG(11, uint64(run)))
		z1 := rand.NewZipf(rng, 1.1, 2, 299)
		z2 := rand.NewZipf(rng, 1.3, 2, 309)
		s := Schema{Dimensions: []Dimension{{Name: "sorted"}, {Name: "random"}}}
		rows := make([]Row, n)
		for i := 0; i < n; i += run {
			bucket := rows[i:min(i+run, n)]
			for k := range bucket {
				bucket[k] = Row{Time: int64(i/run) * 60_000,
					Dims: [][]string{{fmt.Sprintf("a%03d", z1.Uint64())}, {fmt.Sprintf("b%03d", z2.Uint64())}}}
			}
			slices.SortFunc(bucket, func(x, y Row) int {
				if x.Dims[0][0] < y.Dims[0][0] {
					return -1
				}
				if x.Dims[0][0] > y.Dims[0][0] {
					return 1
				}
				return 0
			})
		}
		exp := expectDims(s, rows)
		b.Run(fmt.Sprintf("rows=%d/run=%d/compression=zstd", n, run), func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				size = len(writeColumnsWith(b, s, rows, exp, writerOptions{Compression: CompressionZstd}))
			}
			b.SetBytes(int64(size))
			b.ReportMetric(float64(size), "file-bytes")
		})
	}
}
