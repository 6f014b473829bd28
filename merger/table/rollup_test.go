package table

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

const hourMs = int64(time.Hour / time.Millisecond)

var (
	raw    = class{}
	byHour = class{rollup: true, gran: columns.GranularityHour}
)

// countSchema is the schema of the rollup tests' segments: a page, a count and a long sum,
// rolled up as c says.
func countSchema(c class) columns.Schema {
	return c.apply(columns.Schema{
		Dimensions: []columns.Dimension{{Name: "page"}},
		Metrics:    []columns.Metric{{Name: "n", Aggregator: agg.Count}, {Name: "added", Aggregator: agg.LongSum}},
	})
}

// countSeg writes into fsys at p a segment of countSchema(c) built from n rows (seeded), times
// from start, step ms apart, pages p0 to p4.
func countSeg(t testing.TB, fsys afero.Fs, p string, seed uint64, n int, start, step int64, c class) {
	t.Helper()
	require.NoError(t, fsys.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, afero.WriteFile(fsys, p, countSegBytes(t, seed, n, start, step, c), 0o644))
}

// countSegBytes returns the bytes of the segment countSeg writes.
func countSegBytes(t testing.TB, seed uint64, n int, start, step int64, c class) []byte {
	t.Helper()
	b, err := merger.NewBuilder(countSchema(c), merger.BuilderOptions{})
	require.NoError(t, err)
	defer func() { _ = b.Close() }()
	rng := rand.New(rand.NewPCG(seed, 11))
	for i := range n {
		require.NoError(t, b.Add(columns.Row{Time: start + int64(i)*step, Dims: [][]string{{fmt.Sprintf("p%d", rng.IntN(5))}},
			Metrics: []columns.Value{{}, {Long: rng.Int64N(1000)}}}))
	}
	dst := filepath.Join(t.TempDir(), "c.seg")
	_, err = b.Persist(context.Background(), dst, merger.PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
	require.NoError(t, err)
	data, err := os.ReadFile(dst)
	require.NoError(t, err)
	return data
}

// hourTotals are what a table's rows add up to, exactly under rollup at hour or coarser
// chunks: the counts, the sums of added, and those sums by hour and page.
type hourTotals struct {
	counted, added int64
	byHour         map[string]int64
}

// readHourTotals reads every live segment of the newest version, checking each against the
// log (footer, rows, interval, its schema the one the entry gives it), and returns the
// totals, the rows stored, and the classes of the segments.
func readHourTotals(t testing.TB, tb *Table) (hourTotals, int64, map[class]int) {
	t.Helper()
	ctx := context.Background()
	e, err := tb.Snapshot(ctx, 0)
	require.NoError(t, err)
	got := hourTotals{byHour: map[string]int64{}}
	var rows int64
	classes := map[class]int{}
	for _, s := range e.Segments {
		seg, closeSeg, err := tb.OpenSegment(ctx, s)
		require.NoError(t, err, s.Name)
		require.NoError(t, seg.Verify(), s.Name)
		require.Equal(t, s.Rows, int64(seg.Rows()), s.Name)
		require.Equal(t, s.Interval, seg.Interval().String(), s.Name)
		require.True(t, seg.Schema().Equal(e.SegmentSchema(s)), "%s: its schema is not the one the log gives it", s.Name)
		classes[classOf(seg.Schema())]++
		n, err := seg.Long("n")
		require.NoError(t, err)
		added, err := seg.Long("added")
		require.NoError(t, err)
		page, err := seg.Dim("page")
		require.NoError(t, err)
		nc, ac, tc, pc := n.Cursor(), added.Cursor(), seg.Time().Cursor(), page.Cursor()
		for r := range seg.Rows() {
			cnt, err := nc.At(r)
			require.NoError(t, err)
			a, err := ac.At(r)
			require.NoError(t, err)
			ts, err := tc.At(r)
			require.NoError(t, err)
			p, err := pc.Values(r)
			require.NoError(t, err)
			got.counted += cnt
			got.added += a
			got.byHour[fmt.Sprintf("%d/%s", columns.GranularityHour.Truncate(ts), p)] += a
		}
		pc.Release()
		rows += int64(seg.Rows())
		require.NoError(t, closeSeg())
	}
	require.Equal(t, e.Rows(), rows)
	return got, rows, classes
}

// rawSegments appends n raw segments of countSchema to tb, 200 to 600 rows each, a row every
// 7 s from an hour spread over days days; every fifth starts at 23:00 and crosses midnight.
func rawSegments(t testing.TB, tb *Table, fsys afero.Fs, dir string, n, days int) int64 {
	t.Helper()
	var paths []string
	var rows int64
	for i := range n {
		k := 200 + (i*131)%401
		hour := int64((i * 5) % 22)
		if i%5 == 4 {
			hour = 23
		}
		p := filepath.Join(dir, fmt.Sprintf("raw-%d.seg", i))
		countSeg(t, fsys, p, uint64(i), k, day+int64(i%days)*24*hourMs+hour*hourMs, 7000, raw)
		paths = append(paths, p)
		rows += int64(k)
	}
	for i := 0; i < len(paths); i += 4 {
		_, err := tb.Append(context.Background(), paths[i:min(i+4, len(paths))])
		require.NoError(t, err)
	}
	return rows
}

// TestCompactRollup rolls a raw table up at hour: every chunk's outputs are rolled up at hour,
// the counts, sums and hourly sums stay exact while the rows drop, the table's schema stays
// raw (the segments record their own rollup, format 2); the same compaction again does
// nothing, nor does one without rollup; a raw segment appended afterwards is packed only with
// raw ones until a rollup compaction rolls it up too.
func TestCompactRollup(t *testing.T) {
	stores(t, func(t *testing.T, loc string, o Options, fsys afero.Fs) {
		ctx := context.Background()
		tb, err := Create(ctx, loc, o)
		require.NoError(t, err)
		ingested := rawSegments(t, tb, fsys, "/in", 12, 3)
		// Alone in its day, and under the target: rewritten all the same.
		countSeg(t, fsys, "/in/lone.seg", 99, 500, day+6*24*hourMs, 3000, raw)
		_, err = tb.Append(ctx, []string{"/in/lone.seg"})
		require.NoError(t, err)
		before, rowsBefore, classes := readHourTotals(t, tb)
		require.Equal(t, ingested+500, before.counted)
		require.Equal(t, map[class]int{raw: 13}, classes)

		ro := CompactOptions{Rollup: true, RollupGranularity: columns.GranularityHour, TargetRows: 1000}
		res, err := tb.Compact(ctx, ro)
		require.NoError(t, err)
		require.NotEmpty(t, res.Replaced)
		var splits int
		for _, r := range res.Replaced {
			if r.Split {
				splits++
			}
		}
		require.Positive(t, splits, "segments crossing midnight are split")
		after, rowsAfter, classes := readHourTotals(t, tb)
		require.Equal(t, before, after)
		require.Less(t, rowsAfter, rowsBefore/5, "rolled up: 5 pages an hour")
		require.Equal(t, 1, len(classes), "every segment rolled up at hour: %v", classes)
		require.Positive(t, classes[byHour])
		e, err := tb.Snapshot(ctx, 0)
		require.NoError(t, err)
		require.True(t, e.Schema.Equal(countSchema(raw)), "the table's schema stays")
		require.Equal(t, Format2, e.Format)
		for _, s := range e.Segments {
			require.NotNil(t, s.Rollup, s.Name)
			require.True(t, *s.Rollup)
			require.Equal(t, columns.GranularityHour, *s.Granularity)
		}
		common, ok := e.CommonSchema()
		require.True(t, ok)
		require.Equal(t, byHour, classOf(common))
		requireCompacted(t, tb, ro.TargetRows)
		require.Empty(t, orphans(t, tb))

		// Again, with rollup or without: nothing to do.
		v, err := tb.Newest(ctx)
		require.NoError(t, err)
		for _, co := range []CompactOptions{ro, {TargetRows: ro.TargetRows}} {
			res, err = tb.Compact(ctx, co)
			require.NoError(t, err)
			require.Empty(t, res.Replaced, "%+v", co)
		}
		again, err := tb.Newest(ctx)
		require.NoError(t, err)
		require.Equal(t, v, again)

		// Raw appends after the rollup: kept apart from the rolled-up segments by a compaction
		// without rollup (the two raw ones of day 1 merge, raw), rolled up by one with it.
		countSeg(t, fsys, "/in/late-0.seg", 100, 300, day+2*hourMs+500, 3000, raw)
		countSeg(t, fsys, "/in/late-1.seg", 101, 200, day+3*hourMs, 5000, raw)
		_, err = tb.Append(ctx, []string{"/in/late-0.seg", "/in/late-1.seg"})
		require.NoError(t, err)
		before, _, classes = readHourTotals(t, tb)
		require.Equal(t, 2, classes[raw])
		res, err = tb.Compact(ctx, CompactOptions{TargetRows: 100_000})
		require.NoError(t, err)
		require.NotEmpty(t, res.Replaced)
		after, _, classes = readHourTotals(t, tb)
		require.Equal(t, before, after)
		require.Equal(t, 1, classes[raw], "the raw segments merged with each other only")
		require.Equal(t, 4, classes[byHour], "one rolled-up output a day")
		e, err = tb.Snapshot(ctx, 0)
		require.NoError(t, err)
		for _, s := range e.Segments {
			require.Equal(t, s.Rollup == nil, e.SegmentSchema(s).Equal(*e.Schema), s.Name)
		}

		res, err = tb.Compact(ctx, ro)
		require.NoError(t, err)
		require.Len(t, res.Replaced, 1, "day 1 only")
		after, _, classes = readHourTotals(t, tb)
		require.Equal(t, before, after)
		require.Equal(t, map[class]int{byHour: 4}, classes)
	})
}

// TestCompactRollupSharded: workers of two shards, and two unsharded, racing to roll a table
// up: all succeed, and the table ends rolled up, exact and compacted.
func TestCompactRollupSharded(t *testing.T) {
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	tb, err := Create(ctx, "/t", Options{Fs: fsys})
	require.NoError(t, err)
	rawSegments(t, tb, fsys, "/in", 16, 4)
	before, rowsBefore, _ := readHourTotals(t, tb)
	ro := CompactOptions{Rollup: true, RollupGranularity: columns.GranularityHour, TargetRows: 1000}
	opts := []CompactOptions{ro, ro, ro, ro}
	opts[0].Shard, opts[0].Shards = 0, 2
	opts[1].Shard, opts[1].Shards = 1, 2
	errs := make([]error, len(opts))
	race(len(opts), func(i int) { _, errs[i] = tb.Compact(ctx, opts[i]) })
	for i, err := range errs {
		require.NoError(t, err, "compact %d", i)
	}
	after, rowsAfter, classes := readHourTotals(t, tb)
	require.Equal(t, before, after)
	require.Less(t, rowsAfter, rowsBefore)
	require.Equal(t, 1, len(classes), "%v", classes)
	require.Positive(t, classes[byHour])
	requireCompacted(t, tb, ro.TargetRows)
	require.Empty(t, orphans(t, tb))

	// One shard alone on a fresh table rolls up its chunks only.
	tb2, err := Create(ctx, "/t2", Options{Fs: fsys})
	require.NoError(t, err)
	rawSegments(t, tb2, fsys, "/in2", 16, 4)
	o0 := ro
	o0.Shard, o0.Shards = 0, 2
	_, err = tb2.Compact(ctx, o0)
	require.NoError(t, err)
	e, err := tb2.Snapshot(ctx, 0)
	require.NoError(t, err)
	for _, s := range e.Segments {
		iv, err := ParseInterval(s.Interval)
		require.NoError(t, err)
		start := columns.GranularityDay.Truncate(iv.Start)
		if iv.End <= start+24*hourMs && ChunkShard(start, 2) == 0 {
			require.Equal(t, byHour, s.classIn(e.Schema), "%s: a chunk of shard 0", s.Name)
		}
	}
	p, err := PlanCompaction(e, o0)
	require.NoError(t, err)
	require.Empty(t, p.Chunks)
	require.Empty(t, p.Crossing)
}

// TestAppendOwnRollup: segments of the table's columns but another rollup append, each
// recording its own; other columns are ErrSchema; the first segment sets the table's schema.
func TestAppendOwnRollup(t *testing.T) {
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	countSeg(t, fsys, "/in/h.seg", 1, 100, day, 1000, byHour)
	countSeg(t, fsys, "/in/r.seg", 2, 100, day, 1000, raw)
	countSeg(t, fsys, "/in/d.seg", 3, 100, day, 1000, class{gran: columns.GranularityDay})
	require.NoError(t, afero.WriteFile(fsys, "/in/other.seg", segBytes(t, 4, 10, day, false), 0o644))

	tb, err := Create(ctx, "/t", Options{Fs: fsys})
	require.NoError(t, err)
	v, err := tb.Append(ctx, []string{"/in/h.seg", "/in/r.seg"})
	require.NoError(t, err)
	e, err := tb.Snapshot(ctx, v)
	require.NoError(t, err)
	require.True(t, e.Schema.Equal(countSchema(byHour)), "the first segment's schema")
	require.Equal(t, Format2, e.Format)
	require.Nil(t, e.Segments[0].Rollup)
	require.Equal(t, raw, e.Segments[1].classIn(e.Schema))
	require.True(t, e.SegmentSchema(e.Segments[1]).Equal(countSchema(raw)))
	common, ok := e.CommonSchema()
	require.True(t, ok)
	require.True(t, common.Equal(countSchema(raw)))

	v, err = tb.Append(ctx, []string{"/in/d.seg"})
	require.NoError(t, err)
	e, err = tb.Snapshot(ctx, v)
	require.NoError(t, err)
	require.Equal(t, class{gran: columns.GranularityDay}, e.Segments[2].classIn(e.Schema))
	// Other columns: refused, nothing added.
	_, err = tb.Append(ctx, []string{"/in/other.seg"})
	require.ErrorIs(t, err, ErrSchema)
	require.ErrorContains(t, err, "columns")

	// Chunks finer than a segment's granularity: refused without rollup; with rollup at hour
	// the day segment is split and rolled up, and the table ends rolled up at hour.
	_, err = tb.Compact(ctx, CompactOptions{SegmentGranularity: columns.GranularityHour})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "granularity")
	before, _, _ := readHourTotals(t, tb)
	_, err = tb.Compact(ctx, CompactOptions{SegmentGranularity: columns.GranularityHour, Rollup: true, RollupGranularity: columns.GranularityHour})
	require.NoError(t, err)
	after, _, classes := readHourTotals(t, tb)
	require.Equal(t, before.counted, after.counted)
	require.Equal(t, before.added, after.added)
	require.Equal(t, map[class]int{byHour: 1}, classes, "every row in day 1's first hour")
	e, err = tb.Snapshot(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, Format1, e.Format, "every segment has the table's schema again")

	// A commit's own rollup must be whole.
	s := e.Segments[0]
	s.Name, s.Rollup, s.Granularity = "segments/x.seg", new(true), nil
	_, err = tb.Commit(ctx, e.Version, Change{Kind: KindAppend, Added: []Segment{s}, Schema: e.Schema})
	require.ErrorIs(t, err, ErrInvalid)
}

// TestEntryOwnRollup: an entry whose segments record their own rollup encodes in format 2,
// decodes to the same and re-encodes to the same bytes; SegmentSchema and CommonSchema read
// it; damage to the fields is ErrCorrupt.
func TestEntryOwnRollup(t *testing.T) {
	e := sampleEntry()
	e.Format = Format2
	e.Segments[0] = e.Segments[0].withClass(*e.Schema, byHour)
	b, err := AppendEntry(nil, e)
	require.NoError(t, err)
	require.Contains(t, string(b), `"footer":"5d2e8a1c","rollup":true,"granularity":"hour"}`)
	require.Contains(t, string(b), `"footer":"00000000"}`)
	got, err := DecodeEntry(b)
	require.NoError(t, err)
	require.Equal(t, e.Segments, got.Segments)
	again, err := AppendEntry(nil, got)
	require.NoError(t, err)
	require.Equal(t, string(b), string(again))
	require.True(t, got.SegmentSchema(got.Segments[0]).Equal(byHour.apply(testSchema(false))))
	require.True(t, got.SegmentSchema(got.Segments[1]).Equal(testSchema(false)))
	common, ok := got.CommonSchema()
	require.True(t, ok)
	require.True(t, common.Equal(testSchema(false)))

	// A format 1 entry as an earlier writer wrote it still reads.
	old := `{"format":1,"version":2,"time":"2026-12-06T15:04:05.123Z",` +
		`"operation":{"kind":"append","added":["segments/20240501T000000Z-9f86d081884c7d65.seg"],"removed":[]},` +
		`"schema":{"dimensions":[{"name":"page","type":"string","multiValue":false,"raw":false}],` +
		`"metrics":[{"name":"added","type":"long","aggregator":"longSum"}],"rollup":false,"granularity":"none"},` +
		`"segments":[{"name":"segments/20240501T000000Z-9f86d081884c7d65.seg",` +
		`"interval":"2024-05-01T00:00:00.000Z/2024-05-02T00:00:00.000Z","rows":75000,"bytes":1843210,"footer":"5d2e8a1c"}]}`
	got, err = DecodeEntry(appendWrapped(nil, []byte(old)))
	require.NoError(t, err)
	require.Equal(t, Format1, got.Format)
	require.True(t, got.SegmentSchema(got.Segments[0]).Equal(*got.Schema))

	// Damage, checksum right: each is ErrCorrupt.
	f := func(what, from, to string) {
		t.Helper()
		inner := b[len(`{"entry":`):bytes.LastIndex(b, []byte(`,"crc32c"`))]
		require.Contains(t, string(inner), from, what)
		_, err := DecodeEntry(appendWrapped(nil, []byte(strings.Replace(string(inner), from, to, 1))))
		require.ErrorIs(t, err, ErrCorrupt, what)
	}
	f("unknown granularity", `"granularity":"hour"}`, `"granularity":"fortnight"}`)
	f("granularity not a string", `"granularity":"hour"}`, `"granularity":3}`)
	f("rollup not a bool", `"rollup":true,`, `"rollup":"yes",`)
	f("rollup alone", `,"granularity":"hour"}`, `}`)
	f("granularity alone", `"rollup":true,`, ``)
	f("the entry's own rollup", `"rollup":true,"granularity":"hour"`, `"rollup":false,"granularity":"none"`)
	f("in format 1", `"format":2`, `"format":1`)
	_, err = DecodeEntry(appendWrapped(nil, bytes.Replace(b[len(`{"entry":`):bytes.LastIndex(b, []byte(`,"crc32c"`))], []byte(`"format":2`), []byte(`"format":3`), 1)))
	require.ErrorIs(t, err, ErrVersion)
}
