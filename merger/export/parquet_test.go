package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/ingest"
	"github.com/writeout/writeout/tmpfile"
)

// testSchema has every kind of column an export writes, with names Parquet readers may trip
// on (a comma, a dot, non-ASCII).
func testSchema(rollup bool) columns.Schema {
	g := columns.GranularityNone
	if rollup {
		g = columns.GranularityHour
	}
	return columns.Schema{
		Dimensions: []columns.Dimension{
			{Name: "page"},
			{Name: "lang,region"},
			{Name: "tags", MultiValue: true},
			{Name: "body", Raw: true},
			{Name: "ünï.code", NoBitmapIndex: true},
		},
		Metrics: []columns.Metric{
			{Name: "rows", Aggregator: agg.Count},
			{Name: "added", Aggregator: agg.LongSum},
			{Name: "ratio", Aggregator: agg.DoubleSum},
			{Name: "low", Aggregator: agg.LongMin},
			{Name: "peak", Aggregator: agg.DoubleMax},
			{Name: "pages", Aggregator: agg.HyperUnique, Field: "page"},
		},
		Rollup:      rollup,
		Granularity: g,
	}
}

// testRows returns n seeded rows of testSchema: nulls and "" in every dimension, multi-value
// rows of 0 to 3 values (duplicates included), extreme numbers.
func testRows(seed uint64, n int) []columns.Row {
	rng := rand.New(rand.NewPCG(seed, 1))
	pick := func(vals ...string) []string {
		v := vals[rng.IntN(len(vals))]
		if v == "<null>" {
			return nil
		}
		return []string{v}
	}
	longs := []int64{0, 1, -1, 42, math.MaxInt64 / 4, math.MinInt64 / 4}
	doubles := []float64{0, 0.1, -2.5, 1e300, math.SmallestNonzeroFloat64, math.Inf(1)}
	rows := make([]columns.Row, n)
	for i := range rows {
		var tags []string
		for range rng.IntN(4) {
			tags = append(tags, []string{"a", "b", "", "c,d", "é"}[rng.IntN(5)])
		}
		rows[i] = columns.Row{
			Time: 1_714_557_600_000 + int64(rng.IntN(4*3_600_000)),
			Dims: [][]string{
				pick("Main", "Talk", "Paris", "", "<null>"),
				pick("en", "fr", "<null>", ""),
				tags,
				pick("<null>", "", "a long body of text", string(bytes.Repeat([]byte("x"), 3000))),
				pick("ü", "<null>", "v"),
			},
			Metrics: []columns.Value{
				{},
				{Long: longs[rng.IntN(len(longs))]},
				{Double: doubles[rng.IntN(len(doubles))]},
				{Long: longs[rng.IntN(len(longs))]},
				{Double: doubles[rng.IntN(len(doubles))]},
				{},
			},
		}
	}
	return rows
}

// buildSegment persists rows through a merger.Builder, the one way rows become a segment.
func buildSegment(t testing.TB, s columns.Schema, rows []columns.Row) string {
	t.Helper()
	b, err := merger.NewBuilder(s, merger.BuilderOptions{})
	require.NoError(t, err)
	for _, r := range rows {
		require.NoError(t, b.Add(r))
	}
	dst := filepath.Join(t.TempDir(), "in.seg")
	_, err = b.Persist(t.Context(), dst, merger.PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
	require.NoError(t, err)
	return dst
}

func openSeg(t testing.TB, path string) *columns.Segment {
	t.Helper()
	seg, err := columns.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, seg.Close()) })
	return seg
}

// exported is a row read back from a Parquet export: dimension values (nil for null), long and
// double metrics (nil for null), sketch bytes.
type exported struct {
	time    int64
	dims    [][]string
	longs   []*int64
	doubles []*float64
	sketch  [][]byte
}

// readExport reads the rows of a Parquet export back with parquet-go, by the levels of each
// value, and checks every row has one value per column it should.
func readExport(t testing.TB, f *parquet.File, s columns.Schema) []exported {
	t.Helper()
	nd, nm := len(s.Dimensions), len(s.Metrics)
	var out []exported
	buf := make([]parquet.Row, 100)
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, row := range buf[:n] {
				e := exported{dims: make([][]string, nd), longs: make([]*int64, nm), doubles: make([]*float64, nm), sketch: make([][]byte, nm)}
				seen := make([]int, 1+nd+nm)
				for _, v := range row {
					c := v.Column()
					seen[c]++
					switch {
					case c == 0:
						require.False(t, v.IsNull())
						e.time = v.Int64()
					case c <= nd:
						d := s.Dimensions[c-1]
						if v.IsNull() {
							require.Equal(t, 0, v.DefinitionLevel(), "column %s", d.Name)
							continue
						}
						if d.MultiValue {
							require.Equal(t, 2, v.DefinitionLevel())
							require.Equal(t, len(e.dims[c-1]) > 0, v.RepetitionLevel() == 1)
						} else {
							require.Equal(t, 1, v.DefinitionLevel())
						}
						e.dims[c-1] = append(e.dims[c-1], string(v.ByteArray()))
					default:
						k := c - 1 - nd
						if v.IsNull() {
							continue
						}
						switch s.Metrics[k].ValueType() {
						case columns.MetricLong:
							x := v.Int64()
							e.longs[k] = &x
						case columns.MetricDouble:
							x := v.Double()
							e.doubles[k] = &x
						case columns.MetricHyperUnique:
							e.sketch[k] = slices.Clone(v.ByteArray())
						}
					}
				}
				for c, k := range seen {
					require.GreaterOrEqual(t, k, 1, "row %d: no value of column %d", len(out), c)
				}
				out = append(out, e)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
		}
		require.NoError(t, rows.Close())
	}
	return out
}

// requireExportEqual checks the export's rows against the segment's, value by value.
func requireExportEqual(t testing.TB, seg *columns.Segment, got []exported) {
	t.Helper()
	s := seg.Schema()
	require.Len(t, got, seg.Rows())
	rr := seg.RowReader()
	sketches := make([]*columns.SketchCursor, len(s.Metrics))
	for k, m := range s.Metrics {
		if m.ValueType() == columns.MetricHyperUnique {
			sc, err := seg.Sketch(m.Name)
			require.NoError(t, err)
			sketches[k] = sc.Cursor()
		}
	}
	var row columns.Row
	for r := range got {
		require.NoError(t, rr.Read(r, &row))
		e := got[r]
		require.Equal(t, row.Time, e.time, "row %d", r)
		for i, d := range s.Dimensions {
			want := row.Dims[i]
			if len(want) == 0 {
				want = nil
			}
			require.Equal(t, want, e.dims[i], "row %d dimension %s", r, d.Name)
		}
		for k, m := range s.Metrics {
			v := row.Metrics[k]
			switch m.ValueType() {
			case columns.MetricLong:
				require.NotNil(t, e.longs[k], "row %d metric %s", r, m.Name)
				require.Equal(t, v.Long, *e.longs[k], "row %d metric %s", r, m.Name)
			case columns.MetricDouble:
				require.NotNil(t, e.doubles[k], "row %d metric %s", r, m.Name)
				require.Equal(t, math.Float64bits(v.Double), math.Float64bits(*e.doubles[k]), "row %d metric %s", r, m.Name)
			case columns.MetricHyperUnique:
				want, err := sketches[k].Bytes(r)
				require.NoError(t, err)
				require.Equal(t, want, e.sketch[k], "row %d metric %s", r, m.Name)
				require.NotEmpty(t, e.sketch[k])
			}
		}
	}
}

func openParquet(t testing.TB, data []byte) *parquet.File {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	return f
}

// TestWriteParquet exports segments with and without rollup, in row groups of 1, 1000 and all
// rows, staged in memory and in a tmpfile medium, and reads them back with parquet-go: the
// schema, the codecs and encodings, the metadata and every value.
func TestWriteParquet(t *testing.T) {
	n := 2500
	if testing.Short() {
		n = 700
	}
	for _, rollup := range []bool{false, true} {
		s := testSchema(rollup)
		seg := openSeg(t, buildSegment(t, s, testRows(7, n)))
		if rollup {
			require.Less(t, seg.Rows(), n, "the rollup case should combine rows")
		}
		for _, groupRows := range []int{1, 1000, 0} {
			for _, med := range []string{"heap", "tmpfile"} {
				if groupRows == 1 && med == "tmpfile" {
					continue
				}
				t.Run(fmt.Sprintf("rollup=%v/rowgroup=%d/medium=%s", rollup, groupRows, med), func(t *testing.T) {
					opts := Options{RowGroupRows: groupRows}
					if med == "tmpfile" {
						m, err := tmpfile.New(tmpfile.Options{Dir: t.TempDir()})
						require.NoError(t, err)
						defer func() { require.NoError(t, m.Close()) }()
						opts.Medium = m
					}
					var buf bytes.Buffer
					info, err := WriteParquet(context.Background(), &buf, seg, opts)
					require.NoError(t, err)
					require.Equal(t, int64(buf.Len()), info.Size)
					require.Equal(t, seg.Rows(), info.Rows)
					f := openParquet(t, buf.Bytes())
					wantGroups := 1
					if groupRows > 0 {
						wantGroups = (seg.Rows() + groupRows - 1) / groupRows
					}
					require.Len(t, f.RowGroups(), wantGroups)
					require.Equal(t, wantGroups, info.RowGroups)
					require.Equal(t, int64(seg.Rows()), f.NumRows())
					checkFileSchema(t, f, seg.Schema())
					requireExportEqual(t, seg, readExport(t, f, seg.Schema()))
					if rollup {
						require.Equal(t, []string{"rows"}, info.CountsAbove1)
					} else {
						require.Empty(t, info.CountsAbove1)
					}
				})
			}
		}
	}
}

// checkFileSchema checks the Parquet schema of an export of a segment of schema s: the
// columns in schema order, their physical and logical types and repetition, zstd in every
// column chunk, dictionary encoding in every dictionary dimension's, and the schema metadata.
func checkFileSchema(t testing.TB, f *parquet.File, s columns.Schema) {
	t.Helper()
	fields := f.Schema().Fields()
	require.Len(t, fields, 1+len(s.Dimensions)+len(s.Metrics))
	names := []string{columns.TimeColumn}
	for _, d := range s.Dimensions {
		names = append(names, d.Name)
	}
	for _, m := range s.Metrics {
		names = append(names, m.Name)
	}
	for i, fl := range fields {
		require.Equal(t, names[i], fl.Name(), "column %d", i)
	}

	tf := fields[0]
	require.True(t, tf.Required())
	require.Equal(t, parquet.Int64, tf.Type().Kind())
	lt := tf.Type().LogicalType()
	require.NotNil(t, lt)
	ts, ok := lt.Value.(*format.TimestampType)
	require.True(t, ok, "__time: logical type %v", lt)
	require.True(t, ts.IsAdjustedToUTC)
	require.IsType(t, &format.MilliSeconds{}, ts.Unit.Value)

	for i, d := range s.Dimensions {
		fl := fields[1+i]
		require.True(t, fl.Optional(), d.Name)
		leaf := parquet.Node(fl)
		if d.MultiValue {
			lt := fl.Type().LogicalType()
			require.NotNil(t, lt, d.Name)
			require.IsType(t, &format.ListType{}, lt.Value, "%s: want a LIST", d.Name)
			list := fl.Fields()
			require.Len(t, list, 1)
			require.True(t, list[0].Repeated())
			el := list[0].Fields()
			require.Len(t, el, 1)
			require.Equal(t, "element", el[0].Name())
			require.True(t, el[0].Required(), "a list element is never null")
			leaf = el[0]
		}
		require.True(t, leaf.Leaf())
		require.Equal(t, parquet.ByteArray, leaf.Type().Kind())
		require.IsType(t, &format.StringType{}, leaf.Type().LogicalType().Value, "%s: want STRING", d.Name)
	}
	for k, m := range s.Metrics {
		fl := fields[1+len(s.Dimensions)+k]
		require.True(t, fl.Optional(), m.Name)
		want := map[columns.MetricType]parquet.Kind{
			columns.MetricLong: parquet.Int64, columns.MetricDouble: parquet.Double, columns.MetricHyperUnique: parquet.ByteArray,
		}[m.ValueType()]
		require.Equal(t, want, fl.Type().Kind(), m.Name)
	}

	md := f.Metadata()
	for _, rg := range md.RowGroups {
		require.Len(t, rg.Columns, 1+len(s.Dimensions)+len(s.Metrics))
		for _, cc := range rg.Columns {
			require.Equal(t, format.Zstd, cc.MetaData.Codec, "%v", cc.MetaData.PathInSchema)
			name := cc.MetaData.PathInSchema[0]
			if d := s.Dimension(name); d >= 0 && !s.Dimensions[d].Raw {
				require.Contains(t, cc.MetaData.Encoding, format.RLEDictionary, "%s: not dictionary-encoded", name)
				require.NotZero(t, cc.MetaData.DictionaryPageOffset, name)
			}
		}
	}

	meta, ok := f.Lookup(schemaKey)
	require.True(t, ok, "no %s metadata", schemaKey)
	got, err := columns.ParseSchema([]byte(meta))
	require.NoError(t, err)
	require.True(t, s.Equal(got), "schema metadata %s", meta)
}

// TestParquetFile publishes an export: never over an existing file without Replace, nothing left
// behind by a failure.
func TestParquetFile(t *testing.T) {
	s := testSchema(false)
	seg := openSeg(t, buildSegment(t, s, testRows(3, 300)))
	dir := t.TempDir()
	dst := filepath.Join(dir, "out.parquet")
	info, err := ParquetFile(t.Context(), dst, seg, Options{RowGroupRows: 100}, columns.PublishOptions{})
	require.NoError(t, err)
	require.Equal(t, dst, info.Path)
	require.Equal(t, 3, info.RowGroups)
	require.Equal(t, 2, info.Syncs)
	data, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), info.Size)
	requireExportEqual(t, seg, readExport(t, openParquet(t, data), s))

	_, err = ParquetFile(t.Context(), dst, seg, Options{}, columns.PublishOptions{})
	require.ErrorIs(t, err, os.ErrExist)
	again, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, data, again)

	_, err = ParquetFile(t.Context(), dst, seg, Options{RowGroupRows: 1000}, columns.PublishOptions{Replace: true})
	require.NoError(t, err)
	f := openParquet(t, mustRead(t, dst))
	require.Len(t, f.RowGroups(), 1)

	// A cancelled export leaves nothing behind.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = ParquetFile(ctx, filepath.Join(dir, "cancelled.parquet"), seg, Options{}, columns.PublishOptions{})
	require.ErrorIs(t, err, context.Canceled)
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, names, 1)

	_, err = ParquetFile(t.Context(), filepath.Join(dir, "x.parquet"), seg, Options{RowGroupRows: -1}, columns.PublishOptions{})
	require.ErrorIs(t, err, ErrInvalid)
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// TestWriteParquetCorrupt: a segment whose part does not read back fails the export with an
// error naming the segment and wrapping columns.ErrCorrupt; it never panics.
func TestWriteParquetCorrupt(t *testing.T) {
	s := testSchema(false)
	path := buildSegment(t, s, testRows(5, 400))
	good := mustRead(t, path)
	seg := openSeg(t, path)
	var want bytes.Buffer
	_, err := WriteParquet(t.Context(), &want, seg, Options{})
	require.NoError(t, err)
	for _, p := range seg.Info().Parts {
		data := slices.Clone(good)
		data[p.Offset+p.Length/2] ^= 0x20
		bad := filepath.Join(t.TempDir(), "bad.seg")
		require.NoError(t, os.WriteFile(bad, data, 0o644))
		bseg, err := columns.Open(bad)
		if err != nil {
			require.ErrorIs(t, err, columns.ErrCorrupt)
			continue
		}
		var got bytes.Buffer
		_, err = WriteParquet(t.Context(), &got, bseg, Options{})
		require.NoError(t, bseg.Close())
		if err == nil {
			// An export reads no bitmap index, nor a dictionary dimension's null bitmap (its
			// dictionary says which rows are null): damaging one changes nothing it writes.
			require.Contains(t, []segfmt.PartKind{segfmt.PartBitmaps, segfmt.PartNulls}, p.Kind, "column %s part %s: damaged, yet exported", p.Column, p.Kind)
			require.Equal(t, want.Bytes(), got.Bytes())
			continue
		}
		require.ErrorIs(t, err, columns.ErrCorrupt, "column %s part %s", p.Column, p.Kind)
		require.ErrorContains(t, err, bad)
	}
}

// TestWriteParquetWriteError: an error of the output is returned, wrapped.
func TestWriteParquetWriteError(t *testing.T) {
	seg := openSeg(t, buildSegment(t, testSchema(false), testRows(9, 3000)))
	errDisk := errors.New("disk full")
	for _, after := range []int64{0, 1000, 20_000} {
		_, err := WriteParquet(t.Context(), &failingWriter{left: after, err: errDisk}, seg, Options{RowGroupRows: 500})
		require.ErrorIs(t, err, errDisk, "failing after %d bytes", after)
	}
}

type failingWriter struct {
	left int64
	err  error
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > f.left {
		n := int(f.left)
		f.left = 0
		return n, f.err
	}
	f.left -= int64(len(p))
	return len(p), nil
}

// TestIngestSpec: the spec reads every column back from the export; a count above 1 becomes a
// longSum, a metric's other fieldName becomes its name, a sketch of a non-dimension field has no
// spec.
func TestIngestSpec(t *testing.T) {
	s := testSchema(false)
	s.Metrics = append(s.Metrics, columns.Metric{Name: "chars", Aggregator: agg.LongMax, Field: "chars_added"})
	info := Info{Schema: s}
	sp, err := info.IngestSpec()
	require.NoError(t, err)
	data, err := json.Marshal(sp)
	require.NoError(t, err)
	require.Contains(t, string(data), `"timestamp":{"field":"__time","format":"millis"}`)
	require.Equal(t, columns.Aggregator(agg.Count), sp.Schema.Metrics[0].Aggregator)
	require.Equal(t, "page", sp.Schema.Metrics[5].Field, "a sketch of a dimension keeps its field")
	require.Equal(t, "chars", sp.Schema.Metrics[6].Field)
	require.Empty(t, sp.Schema.Metrics[1].Field)
	// The JSON segtool writes with --spec-out parses back to the same spec.
	back, err := ingestParse(data)
	require.NoError(t, err)
	require.True(t, sp.Schema.Equal(back.Schema))

	info.CountsAbove1 = []string{"rows"}
	sp, err = info.IngestSpec()
	require.NoError(t, err)
	require.Equal(t, columns.Aggregator(agg.LongSum), sp.Schema.Metrics[0].Aggregator)
	require.Equal(t, "rows", sp.Schema.Metrics[0].Field)

	s.Metrics[5].Field = "user"
	sp, err = Info{Schema: s}.IngestSpec()
	require.NoError(t, err)
	require.True(t, sp.Schema.Metrics[5].InputSketch, "a sketch of another field is read as sketches")
	require.Equal(t, s.Metrics[5].Name, sp.Schema.Metrics[5].Field)
}

func ingestParse(data []byte) (*ingest.Spec, error) { return ingest.ParseSpec(data) }

// Progress counts the rows written in batches, up to the segment's rows, in order.
func TestWriteParquetProgress(t *testing.T) {
	seg := openSeg(t, buildSegment(t, testSchema(false), testRows(3, 1000)))
	var got []int64
	opts := Options{ProgressRows: 300, Progress: func(done int64) { got = append(got, done) }}
	_, err := WriteParquet(context.Background(), io.Discard, seg, opts)
	require.NoError(t, err)
	// Rows go to parquet-go 256 at a time: a call at the first batch end past each 300 rows.
	require.Equal(t, []int64{512, 1000}, got)

	got = nil
	opts.ProgressRows = 0 // every 65536 rows: only the end
	_, err = WriteParquet(context.Background(), io.Discard, seg, opts)
	require.NoError(t, err)
	require.Equal(t, []int64{1000}, got)

	_, err = WriteParquet(context.Background(), io.Discard, seg, Options{ProgressRows: -1})
	require.ErrorIs(t, err, ErrInvalid)
}
