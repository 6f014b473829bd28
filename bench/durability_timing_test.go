package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/mmapfile"
	"github.com/writeout/writeout/offheap"
	"github.com/writeout/writeout/tmpfile"
)

// mergeMedia are the media a merge can stage in, by name. The file-backed ones get the
// merge's Durability, as the merger's default tmpfile does: with TrickleBytes they pace their
// writes (no medium syncs its stages, in any mode).
var mergeMedia = []struct {
	name string
	new  func(dir string, d medium.Durability) (medium.Medium, error)
}{
	{"heap", func(string, medium.Durability) (medium.Medium, error) { return medium.NewHeap(), nil }},
	{"offheap", func(string, medium.Durability) (medium.Medium, error) { return offheap.New(offheap.Options{}) }},
	{"tmpfile", func(dir string, d medium.Durability) (medium.Medium, error) {
		return tmpfile.New(tmpfile.Options{Dir: dir, Durability: d})
	}},
	{"mmapfile", func(dir string, d medium.Durability) (medium.Medium, error) {
		return mmapfile.New(mmapfile.Options{Dir: dir, Durability: d})
	}},
}

// durabilityModes are the settings BenchmarkDurabilityMerge compares: each sync mode without
// trickle, and SyncOutput with an 8 MiB trickle.
var durabilityModes = []struct {
	name string
	d    medium.Durability
}{
	{"none", medium.Durability{Sync: medium.SyncNone}},
	{"output", medium.Durability{Sync: medium.SyncOutput}},
	{"all", medium.Durability{Sync: medium.SyncAll}},
	{"output-trickle8MiB", medium.Durability{Sync: medium.SyncOutput, TrickleBytes: 8 << 20}},
}

// BenchmarkDurabilityMerge is Pinot's table of issue 12: the wide schema (25 columns, 64-byte
// payloads), 500,000 rows in 5 input segments of 100,000 (seeds BasicSeed..BasicSeed+4, made
// outside the timer), merged with rollup off into a file in b.TempDir(), staged in each
// medium and published with each durability setting. The modes of one medium run one after
// the other, so that benchstat -col /durability compares runs made side by side.
//
// Every iteration starts with no writeback in flight (a sync(2) outside the timer), so that a
// mode does not pay for the dirty pages the one before it left. publish-ms is
// merger.Result.Publish; syncs, trickles and bytes-written are the Result's counters.
func BenchmarkDurabilityMerge(b *testing.B) {
	dir := b.TempDir()
	paths, inBytes := writeWideInputs(b, dir)
	for _, m := range mergeMedia {
		for _, mode := range durabilityModes {
			b.Run(fmt.Sprintf("medium=%s/durability=%s", m.name, mode.name), func(b *testing.B) {
				b.SetBytes(inBytes)
				dst := filepath.Join(dir, "merged.seg")
				var res merger.Result
				var publish float64
				for b.Loop() {
					res = durabilityMerge(b, dir, paths, dst, m.new, mode.d)
					publish += float64(res.Publish.Microseconds()) / 1000
					b.StopTimer()
					if err := os.Remove(dst); err != nil {
						b.Fatal(err)
					}
					syncAll()
					b.StartTimer()
				}
				b.ReportMetric(publish/float64(b.N), "publish-ms")
				b.ReportMetric(float64(res.Syncs), "syncs")
				b.ReportMetric(float64(res.Trickles), "trickles")
				b.ReportMetric(float64(res.BytesWritten), "bytes-written")
				b.ReportMetric(float64(res.Bytes), "out-bytes")
			})
		}
	}
}

// writeWideInputs writes into dir the inputs the merge benchmarks share: 5 segments of
// 100,000 rows of the wide table (seeds gen.BasicSeed+0..4), outside any timer, synced.
func writeWideInputs(b *testing.B, dir string) (paths []string, inBytes int64) {
	const segments, rows = 5, 100_000
	for i := range segments {
		p := filepath.Join(dir, fmt.Sprintf("in%d.seg", i))
		info, err := persistWide(p, gen.BasicSeed+int64(i), rows)
		if err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
		inBytes += info.Size
	}
	syncAll()
	return paths, inBytes
}

// durabilityMerge opens the inputs, merges them into dst staged in a new medium, and closes
// everything.
func durabilityMerge(b *testing.B, dir string, paths []string, dst string, newMedium func(string, medium.Durability) (medium.Medium, error), d medium.Durability) merger.Result {
	inputs := openAll(b, paths)
	med, err := newMedium(dir, d)
	if err != nil {
		b.Fatal(err)
	}
	res, err := merger.Merge(context.Background(), inputs, dst, merger.Options{Medium: med, Durability: d})
	if err != nil {
		b.Fatal(err)
	}
	if err := med.Close(); err != nil {
		b.Fatal(err)
	}
	closeAll(b, inputs)
	return res
}

// persistWide writes rows rows of the wide table (64-byte payloads) seeded by seed as a
// segment at dst, through a merger.Builder with rollup off.
func persistWide(dst string, seed int64, rows int) (columns.Info, error) {
	g, err := gen.Wide(seed, rows, gen.WideOptions{PayloadLen: 64})
	if err != nil {
		return columns.Info{}, err
	}
	var schema columns.Schema
	var dimSlot, metSlot []int
	byName := map[string]gen.Column{}
	for _, c := range g.Schema() {
		byName[c.Name] = c
		if c.Kind != gen.String {
			continue
		}
		schema.Dimensions = append(schema.Dimensions, columns.Dimension{Name: c.Name, MultiValue: c.MultiValue,
			Raw: c.Raw, NoBitmapIndex: !c.Raw && !c.Bitmap})
		dimSlot = append(dimSlot, c.Slot)
	}
	for _, a := range g.Aggregators() {
		src, ok := byName[a.Source]
		if !ok || src.Kind != gen.Long {
			return columns.Info{}, fmt.Errorf("bench: wide aggregator %s reads %q, not a Long column", a.Name, a.Source)
		}
		schema.Metrics = append(schema.Metrics, columns.Metric{Name: a.Name, Aggregator: columns.Aggregator(a.Aggregator), Field: a.Source})
		metSlot = append(metSlot, src.Slot)
	}
	bld, err := merger.NewBuilder(schema, merger.BuilderOptions{})
	if err != nil {
		return columns.Info{}, err
	}
	var src gen.Row
	r := columns.Row{Dims: make([][]string, len(dimSlot)), Metrics: make([]columns.Value, len(metSlot))}
	for g.Next(&src) {
		r.Time = src.Time
		for i, slot := range dimSlot {
			r.Dims[i] = append(r.Dims[i][:0], src.Strings[slot].Values...)
		}
		for i, slot := range metSlot {
			r.Metrics[i] = columns.Value{Long: src.Longs[slot]}
		}
		if err := bld.Add(r); err != nil {
			return columns.Info{}, err
		}
	}
	res, err := bld.Persist(context.Background(), dst, merger.PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
	if err != nil {
		return columns.Info{}, err
	}
	return res.Info, nil
}
