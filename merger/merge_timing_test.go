//go:build unix

package merger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/mmapfile"
	"github.com/writeout/writeout/offheap"
	"github.com/writeout/writeout/tmpfile"
)

// benchMedia are the media a merge can stage in, by name.
var benchMedia = []struct {
	name string
	new  func(dir string) (medium.Medium, error)
}{
	{"heap", func(string) (medium.Medium, error) { return medium.NewHeap(), nil }},
	{"offheap", func(string) (medium.Medium, error) { return offheap.New(offheap.Options{}) }},
	{"tmpfile", func(dir string) (medium.Medium, error) { return tmpfile.New(tmpfile.Options{Dir: dir}) }},
	{"mmapfile", func(dir string) (medium.Medium, error) { return mmapfile.New(mmapfile.Options{Dir: dir}) }},
}

// BenchmarkIndexMerge has the shape of Druid's IndexMergeBenchmark: 5 segments of 75,000 rows
// of the basic schema (seeds 9999..10003), merged with rollup off and on (query granularity
// none, as Druid's; rollup=hour also truncates times to the hour, which re-sorts every hour's
// rows), staged in each medium, published with the default durability (one fdatasync of the
// output). Segment generation is outside the timer; bytes are the inputs'.
//
// Every iteration opens the inputs afresh (inside the timer), so that the checksums are
// computed in each: checks=on is the default merge (the inputs' CRCs checked before the merge
// reads them, which marks every part checked for the read path), checks=read skips that pass
// (Options.SkipChecksums) and leaves the checks to the read path, checks=off opens the inputs
// with columns.OpenOptions.TrustChecksums and skips the pass: no CRC computed at all.
// cpu-ns/op is the process's CPU time (user and system) per merge: on a shared machine it
// varies less than the elapsed time.
func BenchmarkIndexMerge(b *testing.B) {
	const segments, rows = 5, 75_000
	dir := b.TempDir()
	var paths []string
	var inBytes int64
	for i := 0; i < segments; i++ {
		seg := genSegment(b, dir, gen.BasicSeed+int64(i), rows)
		paths = append(paths, seg.Name())
		inBytes += seg.Info().Size
	}
	for _, rollup := range []string{"false", "true", "hour"} {
		opts := Options{Rollup: rollup != "false"}
		if rollup == "hour" {
			opts.Granularity = columns.GranularityHour
		}
		for _, m := range benchMedia {
			for _, checks := range []string{"on", "read", "off"} {
				b.Run(fmt.Sprintf("rollup=%s/medium=%s/checks=%s", rollup, m.name, checks), func(b *testing.B) {
					b.SetBytes(inBytes)
					b.ReportAllocs()
					dst := filepath.Join(dir, "merged.seg")
					var res Result
					var cpu time.Duration
					for b.Loop() {
						c0 := cpuTime(b)
						res = benchMerge(b, dir, paths, dst, m.new, opts, checks)
						cpu += cpuTime(b) - c0
						b.StopTimer()
						if err := os.Remove(dst); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
					b.ReportMetric(float64(res.RowsOut), "rows-out")
					b.ReportMetric(float64(res.Bytes), "out-bytes")
					b.ReportMetric(float64(res.Dictionaries.Milliseconds()), "dict-ms")
					b.ReportMetric(float64(res.Rows.Milliseconds()), "rows-ms")
					b.ReportMetric(float64(res.Bitmaps.Milliseconds()), "bitmaps-ms")
					b.ReportMetric(float64(res.Publish.Milliseconds()), "publish-ms")
				})
			}
		}
	}
}

// benchMerge opens the inputs (trusted for checks=off), merges them into dst in a new medium
// and closes everything.
func benchMerge(b *testing.B, dir string, paths []string, dst string, newMedium func(string) (medium.Medium, error), opts Options, checks string) Result {
	inputs := make([]*columns.Segment, len(paths))
	for i, p := range paths {
		seg, err := columns.OpenWith(p, columns.OpenOptions{TrustChecksums: checks == "off"})
		if err != nil {
			b.Fatal(err)
		}
		inputs[i] = seg
	}
	med, err := newMedium(dir)
	if err != nil {
		b.Fatal(err)
	}
	opts.Medium = med
	opts.SkipChecksums = checks != "on"
	res, err := Merge(context.Background(), inputs, dst, opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := med.Close(); err != nil {
		b.Fatal(err)
	}
	for _, seg := range inputs {
		if err := seg.Close(); err != nil {
			b.Fatal(err)
		}
	}
	return res
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
