package export

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/location"
)

// countedInput is a segment file as a merger.Input that counts the inputs open at once.
type countedInput struct {
	path       string
	open, peak *atomic.Int32
}

func (in countedInput) Name() string { return in.path }

func (in countedInput) Open(ctx context.Context) (*columns.Segment, func() error, error) {
	seg, closeSeg, err := merger.FileInput(in.path).Open(ctx)
	if err != nil {
		return nil, nil, err
	}
	n := in.open.Add(1)
	if n > in.peak.Load() {
		in.peak.Store(n)
	}
	return seg, func() error { in.open.Add(-1); return closeSeg() }, nil
}

// TestParquetInputsTo exports three segments of one schema into one file: their rows one
// after the other, row groups cut across segments, the columns and metadata of one
// segment's export, one input open at a time, progress over them all. A segment of other
// columns fails the export and leaves nothing.
func TestParquetInputsTo(t *testing.T) {
	s := testSchema(true)
	ns := []int{300, 450, 250}
	var paths []string
	var segs []*columns.Segment
	for i, n := range ns {
		p := buildSegment(t, s, testRows(uint64(20+i), n))
		paths = append(paths, p)
		segs = append(segs, openSeg(t, p))
	}
	var open, peak atomic.Int32
	inputs := make([]merger.Input, len(paths))
	total := 0
	for i, p := range paths {
		inputs[i] = countedInput{path: p, open: &open, peak: &peak}
		total += segs[i].Rows()
	}
	dir := t.TempDir()
	out := func(name string) *location.File {
		return &location.File{Path: filepath.Join(dir, name), Options: columns.PublishOptions{Durability: medium.Durability{Sync: medium.SyncNone}}}
	}
	var progress []int64
	opts := Options{RowGroupRows: 256, ProgressRows: 300, Progress: func(n int64) { progress = append(progress, n) }}
	info, err := ParquetInputsTo(t.Context(), out("all.parquet"), s, inputs, opts)
	require.NoError(t, err)
	require.Equal(t, total, info.Rows)
	require.Equal(t, (total+255)/256, info.RowGroups)
	require.Equal(t, []string{"rows"}, info.CountsAbove1)
	require.Equal(t, int32(1), peak.Load(), "inputs open at once")
	require.Zero(t, open.Load(), "inputs left open")
	require.NotEmpty(t, progress)
	require.IsIncreasing(t, progress)
	require.Equal(t, int64(total), progress[len(progress)-1])

	data, err := os.ReadFile(filepath.Join(dir, "all.parquet"))
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), info.Size)
	f := openParquet(t, data)
	require.Len(t, f.RowGroups(), info.RowGroups)
	checkFileSchema(t, f, s)
	got := readExport(t, f, s)
	require.Len(t, got, total)
	at := 0
	for _, seg := range segs {
		requireExportEqual(t, seg, got[at:at+seg.Rows()])
		at += seg.Rows()
	}

	// One input: the bytes ParquetTo writes of that segment.
	_, err = ParquetInputsTo(t.Context(), out("one.parquet"), s, inputs[:1], Options{})
	require.NoError(t, err)
	_, err = ParquetTo(t.Context(), out("seg.parquet"), segs[0], Options{})
	require.NoError(t, err)
	one, err := os.ReadFile(filepath.Join(dir, "one.parquet"))
	require.NoError(t, err)
	single, err := os.ReadFile(filepath.Join(dir, "seg.parquet"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(single, one), "%d bytes, ParquetTo %d", len(one), len(single))

	// Other columns: an error naming the input, nothing published.
	otherSchema := columns.Schema{Dimensions: []columns.Dimension{{Name: "page"}}, Metrics: []columns.Metric{{Name: "added", Aggregator: agg.LongSum}}}
	other := buildSegment(t, otherSchema, []columns.Row{{Time: 5, Dims: [][]string{{"p"}}, Metrics: []columns.Value{{Long: 1}}}})
	_, err = ParquetInputsTo(t.Context(), out("bad.parquet"), s, append(inputs[:2:2], merger.FileInput(other)), Options{})
	require.ErrorIs(t, err, columns.ErrSchema)
	require.Contains(t, err.Error(), other)
	require.NoFileExists(t, filepath.Join(dir, "bad.parquet"))
	_, err = ParquetInputsTo(t.Context(), out("bad.parquet"), columns.Schema{Metrics: []columns.Metric{{Name: "x"}}}, inputs, Options{})
	require.ErrorIs(t, err, ErrInvalid)
}

// TestParquetInputsToRollupClasses exports a table's segments that share their columns but
// not their rollup: a raw segment and one rolled up at hour. The file holds each row as its
// segment stores it, under the schema given (one both fit: no rollup), and the count column
// still adds up to the rows ingested (a rolled-up row's count is its count).
func TestParquetInputsToRollupClasses(t *testing.T) {
	raw, rolled := testSchema(false), testSchema(true)
	rawRows, rolledRows := testRows(31, 200), testRows(32, 300)
	paths := []string{buildSegment(t, raw, rawRows), buildSegment(t, rolled, rolledRows)}
	segs := []*columns.Segment{openSeg(t, paths[0]), openSeg(t, paths[1])}
	require.Less(t, segs[1].Rows(), len(rolledRows), "rolled up: fewer rows")
	inputs := []merger.Input{merger.FileInput(paths[0]), merger.FileInput(paths[1])}
	dst := filepath.Join(t.TempDir(), "mixed.parquet")
	info, err := ParquetInputsTo(t.Context(), &location.File{Path: dst, Options: columns.PublishOptions{Durability: medium.Durability{Sync: medium.SyncNone}}},
		raw, inputs, Options{})
	require.NoError(t, err)
	require.Equal(t, segs[0].Rows()+segs[1].Rows(), info.Rows)
	require.Equal(t, []string{"rows"}, info.CountsAbove1)
	require.True(t, info.Schema.Equal(raw.Normalized()))
	f := openParquet(t, mustRead(t, dst))
	checkFileSchema(t, f, raw)
	got := readExport(t, f, raw)
	requireExportEqual(t, segs[0], got[:segs[0].Rows()])
	requireExportEqual(t, segs[1], got[segs[0].Rows():])
	var counted int64
	for _, r := range got {
		counted += *r.longs[0]
	}
	require.Equal(t, int64(len(rawRows)+len(rolledRows)), counted, "the count column adds up to the rows ingested")
}
