package query

import (
	"context"
	"fmt"
	"testing"

	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/internal/fixture"
	"github.com/writeout/writeout/merger/query/filter"
)

const builderBenchRows = 1_000_000

// fillBuilder adds rows rows of the basic schema to a new builder (fixture.AddBasicRows).
func fillBuilder(b testing.TB, live bool, rows int) *merger.Builder {
	schema, _ := fixture.BasicRows()
	bld, err := merger.NewBuilder(schema, merger.BuilderOptions{LiveBitmaps: live})
	if err != nil {
		b.Fatal(err)
	}
	if err := fixture.AddBasicRows(bld.Add, rows); err != nil {
		b.Fatal(err)
	}
	return bld
}

// BenchmarkBuilderQuery aggregates every metric of the rows of 1,000,000 in-memory rows that a
// selective filter matches, with and without live bitmaps (bar 5: at least 10x faster with
// them), over all time (granularity all) and by hour; every metric, or the numeric ones only
// (a hyperUnique aggregation inserts into a sparse HyperLogLog sketch, ~300 ns a row, which
// dominates a selective query either way).
func BenchmarkBuilderQuery(b *testing.B) {
	filters := []struct{ name, expr string }{
		{"eq", "dimSequential = '7'"},                                        // 0.1% of the rows
		{"in5", "dimSequential in ('1', '2', '3', '4', '5')"},                // 0.5%
		{"and", "dimZipf = '9' and dimMultivalEnumerated = 'Bar'"},           // ~0.7%
		{"not", "not dimSequentialHalfNull is null and dimSequential = '8'"}, // 0.05%
	}
	builders := map[bool]*merger.Builder{}
	for _, live := range []bool{false, true} {
		builders[live] = fillBuilder(b, live, builderBenchRows)
	}
	numeric := []string{"rows", "sumLongSequential", "maxLongUniform", "sumFloatNormal", "minFloatZipf"}
	for _, gran := range []string{"all", "hour"} {
		for _, metrics := range []string{"all", "numeric"} {
			for _, f := range filters {
				for _, live := range []bool{false, true} {
					if gran == "hour" && (metrics == "all" || f.name == "and" || f.name == "not") {
						continue
					}
					b.Run(fmt.Sprintf("granularity=%s/metrics=%s/filter=%s/live=%v", gran, metrics, f.name, live), func(b *testing.B) {
						b.ReportAllocs()
						g, all, err := ParseGranularity(gran)
						if err != nil {
							b.Fatal(err)
						}
						spec := Spec{Filter: filter.MustParse(f.expr), Granularity: g, All: all}
						if metrics == "numeric" {
							spec.Metrics = numeric
						}
						var res Result
						for b.Loop() {
							var err error
							res, err = Run(context.Background(), builders[live], spec)
							if err != nil {
								b.Fatal(err)
							}
						}
						var matched int64
						for _, r := range res.Rows {
							matched += r.Rows
						}
						b.ReportMetric(float64(matched)/builderBenchRows*100, "%matched")
					})
				}
			}
		}
	}
}
