package table

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

// totals are what a table's rows add up to: rows, the sum of metric added, the sum of times.
type totals struct{ rows, added, times int64 }

// tableTotals reads every live segment of the newest version, checking each against the log.
func tableTotals(t testing.TB, tb *Table) totals {
	t.Helper()
	ctx := context.Background()
	e, err := tb.Snapshot(ctx, 0)
	require.NoError(t, err)
	var got totals
	for _, s := range e.Segments {
		seg, closeSeg, err := tb.OpenSegment(ctx, s)
		require.NoError(t, err, s.Name)
		require.NoError(t, seg.Verify(), s.Name)
		require.Equal(t, s.Rows, int64(seg.Rows()), s.Name)
		require.Equal(t, s.Interval, seg.Interval().String(), s.Name)
		added, err := seg.Long("added")
		require.NoError(t, err)
		ac, tc := added.Cursor(), seg.Time().Cursor()
		for r := range seg.Rows() {
			v, err := ac.At(r)
			require.NoError(t, err)
			ts, err := tc.At(r)
			require.NoError(t, err)
			got.rows, got.added, got.times = got.rows+1, got.added+v, got.times+ts
		}
		require.NoError(t, closeSeg())
	}
	require.Equal(t, e.Rows(), got.rows)
	return got
}

// smallSegments appends n segments to tb, of 50 to 400 rows each (one a second), at hours
// spread over days days, in appends of 5; it returns the totals of what it appended.
func smallSegments(t testing.TB, tb *Table, fsys afero.Fs, dir string, n, days int) {
	t.Helper()
	require.NoError(t, fsys.MkdirAll(dir, 0o755))
	var paths []string
	for i := range n {
		rows := 50 + (i*37)%351
		start := day + int64(i%days)*24*3600_000 + int64((i*7)%23)*3600_000
		p := filepath.Join(dir, fmt.Sprintf("small-%d.seg", i))
		require.NoError(t, afero.WriteFile(fsys, p, segBytes(t, uint64(i), rows, start, false), 0o644))
		paths = append(paths, p)
	}
	for ps := range slices.Chunk(paths, 5) {
		_, err := tb.Append(context.Background(), ps)
		require.NoError(t, err)
	}
}

// requireCompacted checks that every live segment of the newest version lies inside one UTC
// day and has at most target rows, and that nothing is left to plan.
func requireCompacted(t testing.TB, tb *Table, target int64) {
	t.Helper()
	e, err := tb.Snapshot(context.Background(), 0)
	require.NoError(t, err)
	const dayMs = 24 * 3600_000
	for _, s := range e.Segments {
		iv, err := ParseInterval(s.Interval)
		require.NoError(t, err)
		require.Equal(t, iv.Start-iv.Start%dayMs, (iv.End-1)-(iv.End-1)%dayMs, "%s crosses a day: %s", s.Name, s.Interval)
		require.LessOrEqual(t, s.Rows, target, s.Name)
	}
	p, err := PlanCompaction(e, CompactOptions{TargetRows: target})
	require.NoError(t, err)
	require.Empty(t, p.Chunks)
}

// orphans returns the files under segments/ that no version of the log lists.
func orphans(t *testing.T, tb *Table) []string {
	t.Helper()
	log, err := tb.Log(context.Background())
	require.NoError(t, err)
	var out []string
	for _, n := range listSegments(t, tb) {
		if !slices.ContainsFunc(log, func(e *Entry) bool { return e.Live(segmentsDir + "/" + n) }) {
			out = append(out, n)
		}
	}
	return out
}

func TestCompact(t *testing.T) {
	stores(t, func(t *testing.T, loc string, o Options, fsys afero.Fs) {
		ctx := context.Background()
		tb, err := Create(ctx, loc, o)
		require.NoError(t, err)
		// Nothing to compact in an empty table.
		res, err := tb.Compact(ctx, CompactOptions{})
		require.NoError(t, err)
		require.Empty(t, res.Replaced)

		smallSegments(t, tb, fsys, "/in", 40, 4)
		before := tableTotals(t, tb)
		v0, err := tb.Newest(ctx)
		require.NoError(t, err)
		const target = 1500
		res, err = tb.Compact(ctx, CompactOptions{TargetRows: target})
		require.NoError(t, err)
		require.NotEmpty(t, res.Replaced)
		require.Equal(t, before, tableTotals(t, tb))
		requireCompacted(t, tb, target)
		require.Empty(t, orphans(t, tb))

		// Each replacement is one version of kind replace, in order, removing what it says.
		for i, r := range res.Replaced {
			require.Equal(t, v0+1+i, r.Version)
			e, err := tb.Snapshot(ctx, r.Version)
			require.NoError(t, err)
			require.Equal(t, KindReplace, e.Operation.Kind)
			require.ElementsMatch(t, r.Removed, e.Operation.Removed)
			require.Len(t, e.Operation.Added, len(r.Added))
			var out int64
			for _, s := range r.Added {
				out += s.Rows
			}
			require.Equal(t, r.RowsIn, out, "no rollup: the outputs hold the inputs' rows")
		}
		// Again: nothing left to do.
		v1, err := tb.Newest(ctx)
		require.NoError(t, err)
		res, err = tb.Compact(ctx, CompactOptions{TargetRows: target})
		require.NoError(t, err)
		require.Empty(t, res.Replaced)
		v2, err := tb.Newest(ctx)
		require.NoError(t, err)
		require.Equal(t, v1, v2)
	})
}

// raceCompactions runs four compactions of tb at once, two of them sharded (0/2 and 1/2),
// with outputs of at most target rows, and requires each to succeed.
func raceCompactions(t *testing.T, tb *Table, target int64) {
	t.Helper()
	opts := []CompactOptions{{TargetRows: target}, {TargetRows: target}, {TargetRows: target, Shard: 0, Shards: 2}, {TargetRows: target, Shard: 1, Shards: 2}}
	errs := make([]error, len(opts))
	race(len(opts), func(i int) { _, errs[i] = tb.Compact(context.Background(), opts[i]) })
	for i, err := range errs {
		require.NoError(t, err, "compact %d", i)
	}
}

// TestCompactConcurrent: compactions racing on one table, some sharded, all succeed, and the
// table ends exact and compacted.
func TestCompactConcurrent(t *testing.T) {
	stores(t, func(t *testing.T, loc string, o Options, fsys afero.Fs) {
		ctx := context.Background()
		tb, err := Create(ctx, loc, o)
		require.NoError(t, err)
		smallSegments(t, tb, fsys, "/in", 40, 4)
		before := tableTotals(t, tb)
		const target = 1500
		raceCompactions(t, tb, target)
		require.Equal(t, before, tableTotals(t, tb))
		requireCompacted(t, tb, target)
		// Outputs of the compactions that lost were removed.
		require.Empty(t, orphans(t, tb))
	})
}

// TestCompactConflict: a chunk whose inputs another writer replaced first fails with
// ErrConflict and leaves none of its outputs behind; Compact then plans again.
func TestCompactConflict(t *testing.T) {
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	tb, err := Create(ctx, "/t", Options{Fs: fsys})
	require.NoError(t, err)
	smallSegments(t, tb, fsys, "/in", 10, 1)
	e, err := tb.Snapshot(ctx, 0)
	require.NoError(t, err)
	p, err := PlanCompaction(e, CompactOptions{})
	require.NoError(t, err)
	require.Len(t, p.Chunks, 1)

	res, err := tb.Compact(ctx, CompactOptions{})
	require.NoError(t, err)
	require.Len(t, res.Replaced, 1)
	before := listSegments(t, tb)

	_, err = tb.compactChunk(ctx, e, p.Chunks[0], CompactOptions{TargetRows: DefaultTargetRows})
	require.ErrorIs(t, err, ErrConflict)
	require.ErrorContains(t, err, "segments/")
	require.Equal(t, before, listSegments(t, tb), "the outputs of a lost compaction stay")
	require.Empty(t, orphans(t, tb))
}

// TestCompactOptionsInvalid: a rollup coarser than the chunks, a rollup granularity without
// rollup and a negative target are ErrInvalid, and change nothing.
func TestCompactOptionsInvalid(t *testing.T) {
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	tb, err := Create(ctx, "/t", Options{Fs: fsys})
	require.NoError(t, err)
	smallSegments(t, tb, fsys, "/in", 4, 1)
	v, err := tb.Newest(ctx)
	require.NoError(t, err)
	f := func(o CompactOptions, want string) {
		t.Helper()
		_, err := tb.Compact(ctx, o)
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, want)
		_, err = PlanCompaction(&Entry{Version: 1}, o)
		require.ErrorIs(t, err, ErrInvalid)
	}
	f(CompactOptions{Rollup: true, RollupGranularity: columns.GranularityDay, SegmentGranularity: columns.GranularityHour}, "rollup")
	f(CompactOptions{RollupGranularity: columns.GranularityHour}, "without rollup")
	f(CompactOptions{TargetRows: -5}, "target rows")
	after, err := tb.Newest(ctx)
	require.NoError(t, err)
	require.Equal(t, v, after)
}

// TestCompactAfterVacuum: a compaction planned on a version whose entry and inputs a vacuum
// then removed (after another compaction replaced them) reports a conflict, leaves none of
// its outputs, and Compact goes on from the newest version.
func TestCompactAfterVacuum(t *testing.T) {
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	tb, err := Create(ctx, "/t", Options{Fs: fsys})
	require.NoError(t, err)
	smallSegments(t, tb, fsys, "/in", 10, 2)
	want := tableTotals(t, tb)
	e, err := tb.Snapshot(ctx, 0)
	require.NoError(t, err)
	p, err := PlanCompaction(e, CompactOptions{})
	require.NoError(t, err)
	require.Len(t, p.Chunks, 2)
	_, err = tb.Compact(ctx, CompactOptions{})
	require.NoError(t, err)
	_, err = tb.Vacuum(ctx, VacuumOptions{PendingAge: -1})
	require.NoError(t, err)
	before := listSegments(t, tb)

	// Its inputs are gone: the merge fails, as a conflict.
	_, err = tb.compactChunk(ctx, e, p.Chunks[0], CompactOptions{TargetRows: DefaultTargetRows})
	require.ErrorIs(t, err, ErrConflict)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Equal(t, before, listSegments(t, tb))
	// Its base version is gone (inputs still there, as if read before the vacuum): a conflict.
	e2, err := tb.Snapshot(ctx, 0)
	require.NoError(t, err)
	smallSegments(t, tb, fsys, "/in2", 4, 1)
	e3, err := tb.Snapshot(ctx, 0)
	require.NoError(t, err)
	p3, err := PlanCompaction(e3, CompactOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, p3.Chunks)
	stale := *e3
	stale.Version = e2.Version - 1 // an entry the vacuum removed
	before = listSegments(t, tb)
	_, err = tb.compactChunk(ctx, &stale, p3.Chunks[0], CompactOptions{TargetRows: DefaultTargetRows})
	require.ErrorIs(t, err, ErrConflict)
	require.ErrorIs(t, err, ErrNotExist)
	require.Equal(t, before, listSegments(t, tb))

	_, err = tb.Compact(ctx, CompactOptions{})
	require.NoError(t, err)
	got := tableTotals(t, tb)
	require.Greater(t, got.rows, want.rows)
}

// TestCompactRollupTable: a table whose segments are rolled up at hour granularity compacts
// with rollup: rows of one hour and page in several inputs combine into one, the sums stay,
// and the outputs keep the table's schema.
func TestCompactRollupTable(t *testing.T) {
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	schema := testSchema(false)
	schema.Rollup, schema.Granularity = true, columns.GranularityHour
	var paths []string
	var sum int64
	for i := range 6 {
		b, err := merger.NewBuilder(schema, merger.BuilderOptions{})
		require.NoError(t, err)
		for r := range 100 {
			v := int64(i*1000 + r)
			sum += v
			require.NoError(t, b.Add(columns.Row{Time: day + int64(r%3)*3600_000 + int64(i)*1000, Dims: [][]string{{fmt.Sprintf("p%d", r%4)}},
				Metrics: []columns.Value{{Long: v}}}))
		}
		p := filepath.Join(t.TempDir(), "r.seg")
		_, err = b.Persist(ctx, p, merger.PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
		require.NoError(t, err)
		require.NoError(t, b.Close())
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		in := fmt.Sprintf("/in/r%d.seg", i)
		require.NoError(t, afero.WriteFile(fsys, in, data, 0o644))
		paths = append(paths, in)
	}
	tb, err := Create(ctx, "/t", Options{Fs: fsys})
	require.NoError(t, err)
	_, err = tb.Append(ctx, paths)
	require.NoError(t, err)
	before := tableTotals(t, tb)
	require.Equal(t, sum, before.added)
	require.Equal(t, int64(6*12), before.rows, "each input: 3 hours x 4 pages")

	res, err := tb.Compact(ctx, CompactOptions{Rollup: true, RollupGranularity: columns.GranularityHour})
	require.NoError(t, err)
	require.Len(t, res.Replaced, 1)
	after := tableTotals(t, tb)
	require.Equal(t, sum, after.added)
	require.Equal(t, int64(12), after.rows, "one row an hour and page")
	e, err := tb.Snapshot(ctx, 0)
	require.NoError(t, err)
	require.True(t, e.Schema.Equal(schema))
	require.Equal(t, Format1, e.Format, "the outputs have the table's schema: nothing of their own")

	// Rolled up further, at day: one row a page, each output recording its own rollup; the
	// table's schema stays.
	res, err = tb.Compact(ctx, CompactOptions{Rollup: true, RollupGranularity: columns.GranularityDay})
	require.NoError(t, err)
	require.Len(t, res.Replaced, 1)
	after = tableTotals(t, tb)
	require.Equal(t, sum, after.added)
	require.Equal(t, int64(4), after.rows, "one row a day and page")
	e, err = tb.Snapshot(ctx, 0)
	require.NoError(t, err)
	require.True(t, e.Schema.Equal(schema))
	require.Equal(t, Format2, e.Format)
	for _, s := range e.Segments {
		require.Equal(t, class{rollup: true, gran: columns.GranularityDay}, classOf(e.SegmentSchema(s)), s.Name)
	}
}
