package columns

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/writeout/writeout/columns/agg"
)

// eventRows returns n rows shaped like bench/peers' event table: times over a day in order,
// three Zipf dimensions of 200, 1000 and 5000 values, m1 uniform in 1..10, m2 uniform below a
// million, m3 exponential of mean 250.
func eventRows(n int) (Schema, []Row) {
	s := Schema{Granularity: GranularityNone}
	for _, d := range []string{"d1", "d2", "d3"} {
		s.Dimensions = append(s.Dimensions, Dimension{Name: d, NoBitmapIndex: true})
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		s.Metrics = append(s.Metrics, Metric{Name: m, Type: MetricLong, Aggregator: agg.LongSum, Field: m})
	}
	rng := rand.New(rand.NewPCG(21, 22))
	var ids [3][]uint32
	for d, c := range []int{200, 1000, 5000} {
		ids[d] = zipfIDs(rng, n, c)
	}
	rows := make([]Row, n)
	t := int64(1_700_000_000_000)
	for i := range rows {
		t += int64(rng.ExpFloat64() * 28.8) // 3,000,000 rows a day
		r := Row{Time: t, Dims: make([][]string, 3), Metrics: make([]Value, 3)}
		for d := range 3 {
			r.Dims[d] = []string{fmt.Sprintf("d%d-%05d", d+1, ids[d][i])}
		}
		r.Metrics[0].Long = 1 + rng.Int64N(10)
		r.Metrics[1].Long = rng.Int64N(1_000_000)
		r.Metrics[2].Long = int64(rng.ExpFloat64() * 250)
		rows[i] = r
	}
	return s, rows
}

// BenchmarkEventRead reads every column of an event-shaped segment (eventRows) through
// cursors, per compression: under s2 and zstd its chunks take the version 4 forms, under none
// the version 2 ones. Besides ns/op it reports the reading thread's CPU time per row
// (cpu-ns/row), steadier than wall time on a shared machine.
//
//	go test -run '^$' -bench EventRead -count 5 ./columns/
func BenchmarkEventRead(b *testing.B) {
	const n = 300_000
	s, rows := eventRows(n)
	for _, c := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
		w, err := newRowsWriter(s, writerOptions{Compression: c})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rows {
			if err := w.AddRow(r); err != nil {
				b.Fatal(err)
			}
		}
		var buf bytesBuffer
		if _, err := w.FinishTo(&buf); err != nil {
			b.Fatal(err)
		}
		seg, err := newSegmentBytes(buf.b)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("rows=%d/compression=%s", n, c), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start := threadCPU()
			for b.Loop() {
				if err := readColumns(seg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(threadCPU()-start)/float64(b.N)/n, "cpu-ns/row")
			b.ReportMetric(float64(len(buf.b)), "bytes")
		})
	}
}
