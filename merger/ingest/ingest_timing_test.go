package ingest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/merger"
)

// The hyperUnique variants of the benchmark spec: none, over an input field (a sketch a row,
// made by the reader and cloned by the Builder), over a dimension (the Builder's own).
var hyperSpecs = map[string]string{
	"none": `{"timestamp": {"field": "ts"},
	  "dimensions": [{"name": "page"}, {"name": "tags", "multiValue": true}, {"name": "body", "raw": true}],
	  "metrics": [{"name": "rows", "aggregator": "count"}, {"name": "added", "aggregator": "longSum"},
	              {"name": "delta", "aggregator": "doubleSum", "fieldName": "d"}]%s}`,
	"field": `{"timestamp": {"field": "ts"},
	  "dimensions": [{"name": "page"}, {"name": "tags", "multiValue": true}, {"name": "body", "raw": true}],
	  "metrics": [{"name": "rows", "aggregator": "count"}, {"name": "added", "aggregator": "longSum"},
	              {"name": "delta", "aggregator": "doubleSum", "fieldName": "d"},
	              {"name": "users", "aggregator": "hyperUnique", "fieldName": "user"}]%s}`,
	"dimension": `{"timestamp": {"field": "ts"},
	  "dimensions": [{"name": "page"}, {"name": "tags", "multiValue": true}, {"name": "body", "raw": true}, {"name": "user"}],
	  "metrics": [{"name": "rows", "aggregator": "count"}, {"name": "added", "aggregator": "longSum"},
	              {"name": "delta", "aggregator": "doubleSum", "fieldName": "d"},
	              {"name": "users", "aggregator": "hyperUnique", "fieldName": "user"}]%s}`,
}

// BenchmarkAdd reads CSV rows into a Builder (no persist): the cost of a row, and the
// Builder's memory estimate a row.
func BenchmarkAdd(b *testing.B) {
	const rows = 100_000
	data := genCSV(1, rows)
	for _, hyper := range []string{"none", "dimension", "field"} {
		for _, rollup := range []string{"", `, "rollup": true, "granularity": "hour"`} {
			b.Run(fmt.Sprintf("hyper=%s/rollup=%v", hyper, rollup != ""), func(b *testing.B) {
				sp, err := ParseSpec([]byte(fmt.Sprintf(hyperSpecs[hyper], rollup)))
				require.NoError(b, err)
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				var mem int64
				for b.Loop() {
					bl, err := merger.NewBuilder(typedSchema(sp.Schema), merger.BuilderOptions{})
					require.NoError(b, err)
					rr, err := openCSV(sp, "b.csv", strings.NewReader(data))
					require.NoError(b, err)
					row := sp.newRow()
					for {
						err := rr.Read(&row)
						if err == io.EOF {
							break
						}
						require.NoError(b, err)
						require.NoError(b, bl.Add(row))
					}
					mem = bl.MemBytes()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
				b.ReportMetric(float64(mem)/rows, "B/row")
			})
		}
	}
}

// BenchmarkRun ingests CSV rows into a segment, in one run or spilling runs.
func BenchmarkRun(b *testing.B) {
	const rows = 100_000
	data := genCSV(1, rows)
	sp, err := ParseSpec([]byte(fmt.Sprintf(hyperSpecs["field"], "")))
	require.NoError(b, err)
	for _, maxRows := range []int{rows, rows / 4} {
		b.Run(fmt.Sprintf("runs=%d", rows/maxRows), func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				_, err := Run(context.Background(), sp, []Input{csvInput("b.csv", data)}, Options{Out: filepath.Join(dir, "b.seg"), Replace: true,
					Durability: noSync, MaxRowsInMemory: maxRows, MemoryLimit: -1})
				require.NoError(b, err)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
		})
	}
}

// BenchmarkCSVRead parses CSV shaped like the peers' event table (an epoch time, three
// dimensions, three integer metrics; issue 14 bar 4) into rows, without a Builder: the reading
// goroutine's work in an ingest.
func BenchmarkCSVRead(b *testing.B) {
	sp, err := ParseSpec([]byte(`{"timestamp": {"field": "time", "format": "millis"},
	  "dimensions": [{"name": "d1"}, {"name": "d2"}, {"name": "d3"}],
	  "metrics": [{"name": "m1", "aggregator": "longSum"}, {"name": "m2", "aggregator": "longSum"},
	              {"name": "m3", "aggregator": "longSum"}]}`))
	require.NoError(b, err)
	rng := rand.New(rand.NewPCG(1, 2))
	var body strings.Builder
	body.WriteString("time,d1,d2,d3,m1,m2,m3\n")
	const rows = 100_000
	for i := range rows {
		fmt.Fprintf(&body, "%d,d1-%05d,d2-%05d,d3-%05d,%d,%d,%d\n", 1767225600000+int64(i)*29, rng.IntN(200), rng.IntN(1000),
			rng.IntN(5000), rng.IntN(10), rng.IntN(200_000), rng.IntN(300))
	}
	data := body.String()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	row := sp.newRow()
	for b.Loop() {
		rr, err := openCSV(sp, "e.csv", strings.NewReader(data))
		require.NoError(b, err)
		n := 0
		for ; ; n++ {
			if err := rr.Read(&row); err != nil {
				require.ErrorIs(b, err, io.EOF)
				break
			}
		}
		require.Equal(b, rows, n)
	}
}
