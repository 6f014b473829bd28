package merger

import (
	"fmt"
	"testing"

	"github.com/writeout/writeout/merger/internal/fixture"
)

const builderBenchRows = 1_000_000

// fillBuilder adds rows rows of the basic schema to a new builder (fixture.AddBasicRows).
func fillBuilder(b testing.TB, live bool, rows int) *Builder {
	schema, _ := fixture.BasicRows()
	bld, err := NewBuilder(schema, BuilderOptions{LiveBitmaps: live})
	if err != nil {
		b.Fatal(err)
	}
	if err := fixture.AddBasicRows(bld.Add, rows); err != nil {
		b.Fatal(err)
	}
	return bld
}

// BenchmarkBuilderIngest adds 1,000,000 rows of the basic schema to a builder, with and
// without live bitmaps (bar 5: live bitmaps cost at most 1.5x).
func BenchmarkBuilderIngest(b *testing.B) {
	fixture.BasicRows()
	for _, live := range []bool{false, true} {
		b.Run(fmt.Sprintf("live=%v", live), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				fillBuilder(b, live, builderBenchRows)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*builderBenchRows), "ns/row")
		})
	}
}
