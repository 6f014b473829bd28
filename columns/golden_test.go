package columns

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/axiomhq/hyperloglog"

	"github.com/stretchr/testify/require"
	"github.com/writeout/writeout/columns/agg"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.seg and the fuzz seeds")

// goldenRows is the content of testdata/golden.seg: every kind of column, nulls, an empty
// string, a multi-value row with a duplicate, unicode; rolled up at hour granularity, so the
// rows are in key order (the null page before "Main_Page") and written column by column.
func goldenRows() (Schema, []Row) {
	s := Schema{
		Dimensions: []Dimension{
			{Name: "page", Type: DimString},
			{Name: "tags", MultiValue: true},
			{Name: "body", Raw: true},
			{Name: "country", NoBitmapIndex: true},
		},
		Metrics: []Metric{
			{Name: "count", Aggregator: agg.Count},
			{Name: "added", Type: MetricLong, Aggregator: agg.LongSum},
			{Name: "delta", Aggregator: agg.DoubleMax},
			{Name: "users", Aggregator: agg.HyperUnique, Field: "user"},
		},
		Rollup:      true,
		Granularity: GranularityHour,
	}
	sk := func(vals ...string) agg.Sketch {
		h := hyperloglog.New()
		for _, v := range vals {
			h.Insert([]byte(v))
		}
		return hllOf(h)
	}
	const hour = 3_600_000
	t0 := int64(946_684_800_000) // 2000-01-01
	rows := []Row{
		{Time: t0, Dims: [][]string{nil, {"b", "b"}, nil, {"FR"}}, Metrics: []Value{{Long: 2}, {Long: -3}, {Double: -0.25}, {Sketch: sk("bob", "carol")}}},
		{Time: t0, Dims: [][]string{{"Main_Page"}, {"a", "b"}, {"hello"}, {"DE"}}, Metrics: []Value{{Long: 1}, {Long: 10}, {Double: 1.5}, {Sketch: sk("alice")}}},
		{Time: t0 + hour, Dims: [][]string{{""}, nil, {""}, nil}, Metrics: []Value{{Long: 1}, {Long: 1 << 40}, {Double: 7}, {Sketch: sk()}}},
		{Time: t0 + 2*hour, Dims: [][]string{{"Zürich"}, {"日本語"}, {"payload"}, {"DE"}}, Metrics: []Value{{Long: 5}, {Long: 0}, {Double: 7}, {Sketch: sk("alice")}}},
	}
	return s, rows
}

func goldenBytes(t testing.TB) []byte {
	s, rows := goldenRows()
	return writeColumns(t, s, rows, writerOptions{Compression: CompressionNone, ChunkRows: 3})
}

// TestGolden pins the bytes of a small segment: a change to the format shows here first. Run
// with -update to rewrite testdata/golden.seg after a deliberate change (and bump Version if
// old files no longer read).
func TestGolden(t *testing.T) {
	got := goldenBytes(t)
	path := filepath.Join("testdata", "golden.seg")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		writeSeeds(t)
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	if !bytes.Equal(want, got) {
		t.Fatalf("the segment bytes changed (run with -update if deliberate)\nwant:\n%s\ngot:\n%s", hex.Dump(want), hex.Dump(got))
	}
	// The pinned file reads back.
	seg, err := Open(path)
	require.NoError(t, err)
	defer seg.Close()
	require.NoError(t, seg.Verify())
	s, rows := goldenRows()
	checkSegment(t, seg, s, rows, marshalSketches(t, s, rows))
	require.Equal(t, "2000-01-01T00:00:00.000Z/2000-01-01T03:00:00.000Z", seg.Interval().String())
}

// seedSegments are the segments FuzzOpen starts from, kept in testdata/seeds: small (the fuzzer
// minimizes every interesting input, calling the fuzz function for each try), each with a few
// kinds of column, together covering every encoding.
func seedSegments(t testing.TB) map[string][]byte {
	gen := func(s Schema, n int, seed uint64) []Row {
		g := newRowGen(seed, s)
		rows := make([]Row, n)
		for i := range rows {
			rows[i] = g.next()
		}
		return rows
	}
	out := map[string][]byte{}
	out["golden.seg"] = goldenBytes(t)
	out["golden-v4-bitmaps.seg"] = goldenV4BitmapsBytes(t)
	out["empty.seg"] = writeRows(t, Schema{Dimensions: []Dimension{{Name: "d"}}}, nil, writerOptions{})
	out["noschema.seg"] = writeRows(t, Schema{}, []Row{{Time: 1}, {Time: 1}, {Time: 5}}, writerOptions{})
	dim := Schema{Dimensions: []Dimension{{Name: "d"}}}
	out["dim-zstd.seg"] = writeRows(t, dim, gen(dim, 20, 1), writerOptions{Compression: CompressionZstd, ChunkRows: 8})
	multi := Schema{Dimensions: []Dimension{{Name: "m", MultiValue: true}}}
	out["multi-s2.seg"] = writeRows(t, multi, gen(multi, 20, 2), writerOptions{Compression: CompressionS2, ChunkRows: 8})
	nums := Schema{
		Dimensions: []Dimension{{Name: "r", Raw: true}, {Name: "n", NoBitmapIndex: true}},
		Metrics:    []Metric{{Name: "l", Aggregator: agg.LongSum}, {Name: "f", Aggregator: agg.DoubleMin}},
	}
	out["nums-none.seg"] = writeRows(t, nums, gen(nums, 20, 3), writerOptions{Compression: CompressionNone, ChunkRows: 8})
	out["nums-zstd.seg"] = writeRows(t, nums, gen(nums, 300, 4), writerOptions{Compression: CompressionZstd, ChunkRows: 100})
	out["nulls-none.seg"] = nullsSegment(t, 12, 6, writerOptions{Compression: CompressionNone, ChunkRows: 4})
	sk := Schema{Metrics: []Metric{{Name: "u", Aggregator: agg.HyperUnique}}}
	out["sketch.seg"] = writeRows(t, sk, gen(sk, 3, 5), writerOptions{})
	out["v4-zstd.seg"] = v4FlipSegment(t) // the planes form and ranked ids (version 4)
	// Ids derived from the bitmaps (version 6): Elias-Fano, roaring arrays and runs, nulls.
	derived := Schema{Dimensions: deriveSchema().Dimensions[:3]}
	rows := deriveRows(2, 400)
	for i := range rows {
		rows[i].Dims, rows[i].Metrics = rows[i].Dims[:3], nil
	}
	out["v6-zstd.seg"] = writeRows(t, derived, rows, writerOptions{Compression: CompressionZstd})
	return out
}

func writeSeeds(t testing.TB) {
	dir := filepath.Join("testdata", "seeds")
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, b := range seedSegments(t) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
}

// TestReadVersion1 reads the golden segment as format version 1 wrote it (before the metrics'
// side parts): it opens, its checksums hold and it reads back the same rows; its doubleSum
// metrics would have no tails.
func TestReadVersion1(t *testing.T) {
	path := filepath.Join("testdata", "golden-v1.seg")
	seg, err := Open(path)
	require.NoError(t, err)
	defer seg.Close()
	require.Equal(t, byte(1), seg.f.version)
	require.NoError(t, seg.verifyChecksums())
	// The version 1 writer's AddRow stamped rollup on rows it never rolled up nor sorted:
	// Verify now says so.
	err = seg.Verify()
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "rollup")
	s, rows := goldenRows()
	rows[0], rows[1] = rows[1], rows[0] // the order AddRow took them in then
	rr := seg.RowReader()
	var got Row
	for i, want := range rows {
		require.NoError(t, rr.Read(i, &got))
		requireRowEqual(t, s, i, want, got)
	}
}
