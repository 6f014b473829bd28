package merger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// preBytesSource is a segment source whose dimensions hand the merge their bitmaps' serialized
// bytes, as columns would with a DimColumn.BitmapBytes (a view of the mapping): it shows the
// merge time that method would give. The bytes are taken out of the segment beforehand.
type preBytesSource struct {
	segSource
	dims map[string]*preBytesDim
}

type preBytesDim struct {
	segDim
	bytes [][]byte
}

func (s preBytesSource) dim(name string) dimSource {
	if d, ok := s.dims[name]; ok {
		return d
	}
	return nil
}

func (d *preBytesDim) eachRows(id uint32, buf []uint32, sink rowSink) error {
	return eachRoaringRows(d.bytes[id], uint64(d.rows), buf, sink)
}

func newPreBytesSource(b testing.TB, seg *columns.Segment) preBytesSource {
	s := preBytesSource{segSource: segSource{seg}, dims: map[string]*preBytesDim{}}
	for _, dim := range seg.Schema().Dimensions {
		ds := s.segSource.dim(dim.Name)
		if ds == nil {
			continue
		}
		sd := ds.(segDim)
		pd := &preBytesDim{segDim: sd}
		for id := 0; id < sd.cardinality(); id++ {
			bm, err := sd.c.Bitmap(uint32(id))
			if err != nil {
				b.Fatal(err)
			}
			raw, err := bm.ToBytes()
			if err != nil {
				b.Fatal(err)
			}
			pd.bytes = append(pd.bytes, raw)
		}
		s.dims[dim.Name] = pd
	}
	return s
}

// BenchmarkIndexMergeBitmapBytes is BenchmarkIndexMerge (rollup off) with input bitmaps read
// from their bytes (merger's decoder) instead of through DimColumn.Bitmap: the merge time a
// columns DimColumn.BitmapBytes method would give.
func BenchmarkIndexMergeBitmapBytes(b *testing.B) {
	const segments, rows = 5, 75_000
	dir := b.TempDir()
	var srcs []source
	var names []string
	var schemas []columns.Schema
	var inBytes int64
	for i := 0; i < segments; i++ {
		seg := genSegment(b, dir, gen.BasicSeed+int64(i), rows)
		srcs = append(srcs, newPreBytesSource(b, seg))
		names = append(names, fmt.Sprintf("input %d", i))
		schemas = append(schemas, seg.Schema())
		inBytes += seg.Size()
	}
	out, err := outputSchema(schemas, func(i int) string { return names[i] }, nil, false, 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range benchMedia {
		b.Run("medium="+m.name, func(b *testing.B) {
			b.SetBytes(inBytes)
			b.ReportAllocs()
			dst := filepath.Join(dir, "merged.seg")
			var res Result
			for b.Loop() {
				med, err := m.new(dir)
				if err != nil {
					b.Fatal(err)
				}
				opts := Options{Medium: med}
				if err := opts.ensureDefaults(); err != nil {
					b.Fatal(err)
				}
				res, err = mergeSources(context.Background(), srcs, names, out, dst, opts, time.Now())
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
			b.ReportMetric(float64(res.Bitmaps.Milliseconds()), "bitmaps-ms")
		})
	}
}
