package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/writeout/writeout/bench/internal/meminfo"
	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

// BenchmarkWideMergeDirty is the second half of issue 12's bar 3: a merge of the wide schema
// (25 columns, 64-byte payloads; 2,000,000 rows in 5 inputs of 400,000, about 405 MB out) with
// the merger's default options (tmpfile staging in the output's directory, SyncOutput), with
// TrickleBytes off and at medium.DefaultTrickleBytes, while a goroutine samples Dirty +
// Writeback in /proc/meminfo every 5 ms. The default medium (the merger's own tmpfile) is the
// bar's; the others are staged in a medium made with the same Durability. peak-dirty-MiB is
// the highest sample of any iteration (the whole machine's, so other writers add to it);
// publish-ms is the merge's publish step: the copy of the stages into the output and its
// fdatasync, which waits for whatever pacing has not written yet.
//
// The inputs take about half a minute to generate; they are kept in WRITEOUT_BENCH_CACHE
// (default: os.TempDir()/writeout-bench-wide-5x400000) and reused while their checksums hold.
func BenchmarkWideMergeDirty(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("/proc/meminfo is Linux's")
	}
	paths, inBytes := wideInputs(b, 5, 400_000)
	dir := b.TempDir()
	media := append([]struct {
		name string
		new  func(dir string, d medium.Durability) (medium.Medium, error)
	}{{"default", nil}}, mergeMedia...)
	for _, m := range media {
		for _, trickle := range []int64{0, medium.DefaultTrickleBytes} {
			b.Run(fmt.Sprintf("medium=%s/trickle=%dMiB", m.name, trickle>>20), func(b *testing.B) {
				b.SetBytes(inBytes)
				d := medium.Durability{Sync: medium.SyncOutput, TrickleBytes: trickle}
				dst := filepath.Join(dir, "merged.seg")
				var peak int64
				var publish time.Duration
				var res merger.Result
				for b.Loop() {
					inputs := openAll(b, paths)
					var med medium.Medium
					if m.new != nil {
						var err error
						if med, err = m.new(dir, d); err != nil {
							b.Fatal(err)
						}
					}
					s := meminfo.Start(5 * time.Millisecond)
					var err error
					res, err = merger.Merge(context.Background(), inputs, dst, merger.Options{Medium: med, Durability: d})
					p, serr := s.Stop()
					if err != nil || serr != nil {
						b.Fatal(err, serr)
					}
					b.StopTimer()
					peak = max(peak, p)
					publish += res.Publish
					if med != nil {
						if err := med.Close(); err != nil {
							b.Fatal(err)
						}
					}
					closeAll(b, inputs)
					if err := os.Remove(dst); err != nil {
						b.Fatal(err)
					}
					syncAll()
					b.StartTimer()
				}
				b.ReportMetric(float64(peak)/(1<<20), "peak-dirty-MiB")
				b.ReportMetric(float64(publish.Microseconds())/1000/float64(b.N), "publish-ms")
				b.ReportMetric(float64(res.Trickles), "trickles")
				b.ReportMetric(float64(res.Bytes), "out-bytes")
			})
		}
	}
}

// wideInputs returns the paths and total size of n wide segments of rows rows each (seeds
// gen.BasicSeed+i), made once into the cache directory and reused while they verify.
func wideInputs(b *testing.B, n, rows int) ([]string, int64) {
	dir := os.Getenv("WRITEOUT_BENCH_CACHE")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("writeout-bench-wide-%dx%d", n, rows))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var paths []string
	var total int64
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("wide-%04d.seg", i))
		if seg, err := columns.Open(p); err == nil {
			verr := seg.VerifyChecksumsContext(context.Background())
			info := seg.Info()
			if cerr := seg.Close(); verr == nil && cerr == nil && info.Rows == rows {
				paths, total = append(paths, p), total+info.Size
				continue
			}
			if err := os.Remove(p); err != nil {
				b.Fatal(err)
			}
		}
		info, err := persistWide(p, gen.BasicSeed+int64(i), rows)
		if err != nil {
			b.Fatal(err)
		}
		paths, total = append(paths, p), total+info.Size
	}
	syncAll()
	return paths, total
}

func openAll(b *testing.B, paths []string) []*columns.Segment {
	segs := make([]*columns.Segment, len(paths))
	for i, p := range paths {
		seg, err := columns.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		segs[i] = seg
	}
	return segs
}

func closeAll(b *testing.B, segs []*columns.Segment) {
	for _, seg := range segs {
		if err := seg.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
