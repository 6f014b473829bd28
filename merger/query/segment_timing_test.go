//go:build unix

package query

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/query/filter"
)

// BenchmarkSegmentQuery queries a segment persisted from the rows BenchmarkBuilderQuery uses
// (1,000,000 rows of the basic schema), with the read path's checksum checks on and off:
// every iteration opens the segment, runs the query and closes it, so that with checks=on
// every part the query reads has its CRC-32C computed once (as a query run by segtool
// does); with checks=off the segment is opened with columns.OpenOptions.TrustChecksums. The
// filters are BenchmarkBuilderQuery's, plus every row (an empty filter). cpu-ns/op is the
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
	size := seg.Size()
	if err := seg.Close(); err != nil {
		b.Fatal(err)
	}
	filters := []struct{ name, expr string }{
		{"eq", "dimSequential = '7'"},
		{"and", "dimZipf = '9' and dimMultivalEnumerated = 'Bar'"},
		{"every", ""},
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
