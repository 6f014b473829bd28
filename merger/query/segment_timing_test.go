//go:build unix

package query

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/query/filter"
)

// BenchmarkSegmentQuery queries a segment persisted from the rows BenchmarkBuilderQuery uses
// (1,000,000 rows of the basic schema), with the read path's checksum checks on and off:
// every iteration opens the segment, runs the query and closes it, so that with checks=on
// every part the query reads has its CRC-32C computed once (as a query run by segtool
// does); with checks=off the segment is opened with columns.OpenOptions.TrustChecksums. The
// filters are BenchmarkBuilderQuery's, plus every row (an empty filter), and metric
// comparisons alone and after a dimension predicate. cpu-ns/op is the
// process's CPU time (user and system) per query: on a shared machine it varies less than the
// elapsed time.
func BenchmarkSegmentQuery(b *testing.B) {
	path := filepath.Join(b.TempDir(), "basic.seg")
	bld := fillBuilder(b, false, builderBenchRows)
	if _, err := bld.Persist(context.Background(), path, merger.PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}}); err != nil {
		b.Fatal(err)
	}
	bld.Reset()
	seg, err := columns.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	size := seg.Info().Size
	if err := seg.Close(); err != nil {
		b.Fatal(err)
	}
	filters := []struct{ name, expr string }{
		{"eq", "dimSequential = '7'"},
		{"and", "dimZipf = '9' and dimMultivalEnumerated = 'Bar'"},
		{"every", ""},
		{"metric", "sumLongSequential > 100 and sumFloatNormal between -1 and 1"},
		{"dim-and-metric", "dimZipf = '9' and sumLongSequential > 100"},
	}
	numeric := []string{"rows", "sumLongSequential", "maxLongUniform", "sumFloatNormal", "minFloatZipf"}
	for _, metrics := range []string{"numeric", "all"} {
		for _, f := range filters {
			for _, checks := range []string{"on", "off"} {
				b.Run(fmt.Sprintf("metrics=%s/filter=%s/checks=%s", metrics, f.name, checks), func(b *testing.B) {
					b.ReportAllocs()
					b.SetBytes(size)
					flt, err := filter.Parse(f.expr)
					if err != nil {
						b.Fatal(err)
					}
					spec := Spec{Filter: flt, All: true}
					if metrics == "numeric" {
						spec.Metrics = numeric
					}
					opts := columns.OpenOptions{TrustChecksums: checks == "off"}
					var cpu time.Duration
					for b.Loop() {
						c0 := cpuTime(b)
						seg, err := columns.OpenWith(path, opts)
						if err != nil {
							b.Fatal(err)
						}
						if _, err := Run(context.Background(), seg, spec); err != nil {
							b.Fatal(err)
						}
						if err := seg.Close(); err != nil {
							b.Fatal(err)
						}
						cpu += cpuTime(b) - c0
					}
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGroupedQuery is issue 14 bar 5's query at a tenth of its size: 300,000 rows over 31
// days (about 400 an hour), grouped by hour and two dimensions of 350 skewed values (about
// 290,000 groups), handed on window by window (RunEach) to an each that reads every group;
// groups=sorted is the dense index's path (one segment), groups=maps the maps' (dense
// indexes off), which several inputs or multi-value dimensions take.
func BenchmarkGroupedQuery(b *testing.B) {
	const rows = 300_000
	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "origin"}, {Name: "destination"}},
		Metrics: []columns.Metric{{Name: "rows", Aggregator: agg.Count}, {Name: "delay", Aggregator: agg.LongSum},
			{Name: "maxDelay", Aggregator: agg.LongMax, Field: "delay"}, {Name: "distance", Aggregator: agg.LongSum}},
	}
	bld, err := merger.NewBuilder(schema, merger.BuilderOptions{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	airport := func() string { return fmt.Sprintf("A%03d", int(350*math.Pow(rng.Float64(), 1.4))) }
	const start, span = 1704067200000, 31 * 24 * 3600 * 1000
	for i := range rows {
		delay := rng.Int64N(320) - 20
		r := columns.Row{Time: start + int64(i)*(span/rows), Dims: [][]string{{airport()}, {airport()}},
			Metrics: []columns.Value{{Long: 1}, {Long: delay}, {Long: delay}, {Long: 100 + rng.Int64N(2900)}}}
		if err := bld.Add(r); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(b.TempDir(), "flights.seg")
	if _, err := bld.Persist(context.Background(), path, merger.PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}}); err != nil {
		b.Fatal(err)
	}
	seg, err := columns.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := seg.Close(); err != nil {
			b.Error(err)
		}
	}()
	spec := Spec{Granularity: columns.GranularityHour, GroupBy: []string{"origin", "destination"}}
	for _, groups := range []string{"sorted", "maps"} {
		b.Run("groups="+groups, func(b *testing.B) {
			defer func(s int) { denseSlots = s }(denseSlots)
			if groups == "maps" {
				denseSlots = 0
			}
			b.ReportAllocs()
			b.SetBytes(seg.Info().Size)
			var n int
			var sum int64
			for b.Loop() {
				n = 0
				err := RunEach(context.Background(), []Queryable{seg}, spec, func(part Result) error {
					n += len(part.Rows)
					for _, r := range part.Rows {
						sum += r.Values[1].Long
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n), "groups")
			benchSink = sum
		})
	}
}

var benchSink int64
