package merger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/writeout/writeout/bench/gen"
	"github.com/writeout/writeout/columns"
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
func BenchmarkIndexMerge(b *testing.B) {
	const segments, rows = 5, 75_000
	dir := b.TempDir()
	var inputs []*columns.Segment
	var inBytes int64
	for i := 0; i < segments; i++ {
		seg := genSegment(b, dir, gen.BasicSeed+int64(i), rows)
		inputs = append(inputs, seg)
		inBytes += seg.Size()
	}
	for _, rollup := range []string{"false", "true", "hour"} {
		opts := Options{Rollup: rollup != "false"}
		if rollup == "hour" {
			opts.Granularity = columns.GranularityHour
		}
		for _, m := range benchMedia {
			b.Run(fmt.Sprintf("rollup=%s/medium=%s", rollup, m.name), func(b *testing.B) {
				b.SetBytes(inBytes)
				b.ReportAllocs()
				dst := filepath.Join(dir, "merged.seg")
				var res Result
				for b.Loop() {
					med, err := m.new(dir)
					if err != nil {
						b.Fatal(err)
					}
					o := opts
					o.Medium = med
					res, err = Merge(context.Background(), inputs, dst, o)
					if err != nil {
						b.Fatal(err)
					}
					if err := med.Close(); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if err := os.Remove(dst); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
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
