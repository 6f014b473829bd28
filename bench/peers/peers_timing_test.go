package peers

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/writeout/writeout/columns"
)

// peersJobs are the jobs of BenchmarkPeers, each on each layout it names.
var peersJobs = []struct {
	job    string
	layout Layout
	rollup bool
}{
	{"merge", Contiguous, false},
	{"merge", Overlapping, false},
	{"rollup-hour", Contiguous, true},
	{"rollup-hour", Overlapping, true},
}

// BenchmarkPeers runs each job on writeout, DuckDB and parquet-go one after the other, so that
// benchstat -col /system compares runs made side by side. WRITEOUT_PEERS_ROWS rows (default
// 3,000,000) in 5 inputs per layout are generated and written in each system's format once,
// outside the timers.
//
//   - job=merge: the 5 inputs into one output sorted by (time, d1, d2, d3), rollup off.
//     writeout: merger.Merge into a segment (bitmap indexes rebuilt, input checksums checked,
//     SyncNone), its chunks S2-compressed (the default; writeout-zstd: zstd, as the Parquet
//     outputs); DuckDB (2 threads): COPY (SELECT * ... ORDER BY time, d1, d2, d3) TO a zstd
//     Parquet file; parquet-go: MergeRowGroups sorted by (time, d1, d2, d3) copied into a zstd
//     GenericWriter.
//   - job=rollup-hour: group by (hour, d1, d2), m1..m3 summed, sorted. writeout: merger.Merge
//     with Rollup, GranularityHour and Dimensions [d1 d2] (d3 dropped); DuckDB: COPY (SELECT
//     epoch_ms(date_trunc('hour', ...)), d1, d2, sum(..)::BIGINT ... GROUP BY ALL ORDER BY
//     ALL). parquet-go has no group-by and does not run this job.
//
// No side syncs its output. Metrics: out-bytes (the output file), in-bytes (the system's own
// inputs), rows-out, and go-heap-peak-MiB (the Go heap's live objects at their highest during
// the op, sampled every millisecond; DuckDB's C++ memory is not in it).
//
// cpu-s/op is the process's CPU time (user and system, every thread, DuckDB's included) during
// the op: steadier than wall time on a shared machine.
func BenchmarkPeers(b *testing.B) {
	dir := b.TempDir()
	fxs, _ := makeFixtures(b, dir, benchRows(b)) // the events are garbage from here
	runtime.GC()
	db, err := OpenDuckDB()
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()

	for _, j := range peersJobs {
		fx := fxs[j.layout]
		prefix := "job=" + j.job + "/layout=" + string(j.layout) + "/system="
		run := func(system string, inBytes int64, ext string, op func(dst string) (int64, error)) {
			b.Run(prefix+system, func(b *testing.B) {
				b.ReportAllocs()
				dst := filepath.Join(dir, "out"+ext)
				var rows int64
				var peak uint64
				var cpu time.Duration
				runtime.GC()
				for b.Loop() {
					h := startHeapPeak()
					c0 := processCPU()
					n, err := op(dst)
					cpu += processCPU() - c0
					peak = max(peak, h.Stop())
					if err != nil {
						b.Fatal(err)
					}
					rows = n
					b.StopTimer()
					st, err := os.Stat(dst)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(st.Size()), "out-bytes")
					if err := os.Remove(dst); err != nil {
						b.Fatal(err)
					}
					runtime.GC()
					b.StartTimer()
				}
				b.ReportMetric(float64(inBytes), "in-bytes")
				b.ReportMetric(float64(rows), "rows-out")
				b.ReportMetric(float64(peak)/(1<<20), "go-heap-peak-MiB")
				b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			})
		}
		for _, w := range []struct {
			system string
			comp   columns.Compression
		}{{"writeout", columns.CompressionDefault}, {"writeout-zstd", columns.CompressionZstd}} {
			run(w.system, fx.SegBytes, ".seg", func(dst string) (int64, error) {
				if j.rollup {
					res, err := WriteoutRollupHour(bg, fx.Segs, dst, w.comp)
					return res.RowsOut, err
				}
				res, err := WriteoutMerge(bg, fx.Segs, dst, w.comp)
				return res.RowsOut, err
			})
		}
		run("duckdb", fx.ParquetBytes, ".parquet", func(dst string) (int64, error) {
			stmt := MergeSQL(fx.Parquets, dst)
			if j.rollup {
				stmt = RollupSQL(fx.Parquets, dst)
			}
			return db.Exec(bg, stmt)
		})
		if !j.rollup {
			run("parquet-go", fx.ParquetBytes, ".parquet", func(dst string) (int64, error) {
				return ParquetGoMerge(fx.Parquets, dst)
			})
		}
	}
}

// processCPU returns the CPU time the process has used so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
