package table

import (
	"context"
	"fmt"
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

// tableRows returns every row of the newest version as "time page added", sorted.
func tableRows(t testing.TB, tb *Table) []string {
	t.Helper()
	ctx := context.Background()
	e, err := tb.Snapshot(ctx, 0)
	require.NoError(t, err)
	var out []string
	for _, s := range e.Segments {
		seg, closeSeg, err := tb.OpenSegment(ctx, s)
		require.NoError(t, err, s.Name)
		rr := seg.RowReader()
		var row columns.Row
		for r := range seg.Rows() {
			require.NoError(t, rr.Read(r, &row))
			out = append(out, fmt.Sprint(row.Time, row.Dims, row.Metrics[0].Long))
		}
		require.NoError(t, closeSeg())
	}
	slices.Sort(out)
	return out
}

// TestCompactSplits: segments crossing days (one over four days), a segment of more rows than
// the target and small ones compact into segments inside one day of at most the target rows
// each, holding exactly the rows the table held; the crossing ones are split first, one
// replacement each; nothing is left unreferenced.
func TestCompactSplits(t *testing.T) {
	stores(t, func(t *testing.T, loc string, o Options, fsys afero.Fs) {
		ctx := context.Background()
		tb, err := Create(ctx, loc, o)
		require.NoError(t, err)
		const h = int64(3600_000)
		require.NoError(t, fsys.MkdirAll("/in", 0o755))
		write := func(name string, seed uint64, n int, start, step int64) string {
			p := filepath.Join("/in", name)
			require.NoError(t, afero.WriteFile(fsys, p, segBytesStep(t, seed, n, start, step, false), 0o644))
			return p
		}
		paths := []string{
			write("long.seg", 1, 3000, day+20*h, 100_000), // 3.5 days from 20:00
			write("night.seg", 2, 700, day+23*h, 10_000),  // 23:00 to 00:56
			write("big.seg", 3, 2500, day+48*h, 1000),     // one day, over the target
			write("edge.seg", 4, 10, day+24*h-5000, 1000), // 5 rows each side of midnight
		}
		_, err = tb.Append(ctx, paths)
		require.NoError(t, err)
		smallSegments(t, tb, fsys, "/small", 12, 4)
		before, rows := tableTotals(t, tb), tableRows(t, tb)

		const target = 1000
		res, err := tb.Compact(ctx, CompactOptions{TargetRows: target})
		require.NoError(t, err)
		var splits []string
		for _, r := range res.Replaced {
			if r.Split {
				require.Len(t, r.Removed, 1)
				splits = append(splits, r.Removed[0])
				for _, s := range r.Added {
					require.LessOrEqual(t, s.Rows, int64(target))
				}
			}
		}
		require.Len(t, splits, 3, "long, night and edge cross midnight")
		require.Equal(t, before, tableTotals(t, tb))
		require.Equal(t, rows, tableRows(t, tb), "the rows, each exactly once")
		requireCompacted(t, tb, target)
		require.Empty(t, orphans(t, tb))

		// Nothing left: a second compaction commits nothing.
		v, err := tb.Newest(ctx)
		require.NoError(t, err)
		res, err = tb.Compact(ctx, CompactOptions{TargetRows: target})
		require.NoError(t, err)
		require.Empty(t, res.Replaced)
		v2, err := tb.Newest(ctx)
		require.NoError(t, err)
		require.Equal(t, v, v2)

		// Hour chunks split the day segments again, and the sums stay.
		_, err = tb.Compact(ctx, CompactOptions{TargetRows: target, SegmentGranularity: columns.GranularityHour})
		require.NoError(t, err)
		require.Equal(t, rows, tableRows(t, tb))
		e, err := tb.Snapshot(ctx, 0)
		require.NoError(t, err)
		for _, s := range e.Segments {
			iv, err := ParseInterval(s.Interval)
			require.NoError(t, err)
			require.Equal(t, iv.Start/h, (iv.End-1)/h, "%s crosses an hour: %s", s.Name, s.Interval)
		}
	})
}

// TestCompactGranularityTooFine: chunks finer than the table's granularity are refused: every
// segment would cross them.
func TestCompactGranularityTooFine(t *testing.T) {
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	tb, err := Create(ctx, "/t", Options{Fs: fsys})
	require.NoError(t, err)
	schema := testSchema(false)
	schema.Rollup, schema.Granularity = true, columns.GranularityDay
	b, err := merger.NewBuilder(schema, merger.BuilderOptions{})
	require.NoError(t, err)
	defer func() { _ = b.Close() }()
	require.NoError(t, b.Add(columns.Row{Time: day + 5, Dims: [][]string{{"p"}}, Metrics: []columns.Value{{Long: 1}}}))
	p := filepath.Join(t.TempDir(), "r.seg")
	_, err = b.Persist(ctx, p, merger.PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
	require.NoError(t, err)
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	require.NoError(t, afero.WriteFile(fsys, "/r.seg", data, 0o644))
	_, err = tb.Append(ctx, []string{"/r.seg"})
	require.NoError(t, err)
	_, err = tb.Compact(ctx, CompactOptions{SegmentGranularity: columns.GranularityHour})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "granularity")
	_, err = tb.Compact(ctx, CompactOptions{})
	require.NoError(t, err)
}

// TestShardsSplitTheirCrossings: sharded workers run one after the other, each to its end,
// leave nothing for an unsharded plan: a worker splits every segment that reaches one of its
// chunks, so no piece lands in the chunk of a worker already done.
func TestShardsSplitTheirCrossings(t *testing.T) {
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	tb, err := Create(ctx, "/t", Options{Fs: fsys})
	require.NoError(t, err)
	require.NoError(t, fsys.MkdirAll("/in", 0o755))
	var paths []string
	for i := range 8 {
		p := filepath.Join("/in", fmt.Sprintf("s%d.seg", i))
		// Each over about three days, starting a day apart: every day holds pieces of three.
		require.NoError(t, afero.WriteFile(fsys, p, segBytesStep(t, uint64(60+i), 300, day+int64(i)*24*3600_000+3600_000, 800_000, false), 0o644))
		paths = append(paths, p)
	}
	_, err = tb.Append(ctx, paths)
	require.NoError(t, err)
	want := tableRows(t, tb)
	const shards = 3
	for i := range shards {
		_, err := tb.Compact(ctx, CompactOptions{TargetRows: 1000, Shard: i, Shards: shards})
		require.NoError(t, err)
	}
	require.Equal(t, want, tableRows(t, tb))
	requireCompacted(t, tb, 1000)
	e, err := tb.Snapshot(ctx, 0)
	require.NoError(t, err)
	p, err := PlanCompaction(e, CompactOptions{TargetRows: 1000})
	require.NoError(t, err)
	require.Empty(t, p.Crossing)
	require.Empty(t, p.Chunks)
}

// TestSplitConcurrent: compactions racing on a table of crossing segments (some sharded) all
// succeed; the table ends with exactly its rows, compacted; the pieces of the splits that lost
// were removed.
func TestSplitConcurrent(t *testing.T) {
	stores(t, func(t *testing.T, loc string, o Options, fsys afero.Fs) {
		ctx := context.Background()
		tb, err := Create(ctx, loc, o)
		require.NoError(t, err)
		require.NoError(t, fsys.MkdirAll("/in", 0o755))
		var paths []string
		for i := range 6 {
			p := filepath.Join("/in", fmt.Sprintf("c%d.seg", i))
			require.NoError(t, afero.WriteFile(fsys, p, segBytesStep(t, uint64(80+i), 400, day+int64(i)*24*3600_000+7*3600_000, 600_000, false), 0o644))
			paths = append(paths, p)
		}
		_, err = tb.Append(ctx, paths)
		require.NoError(t, err)
		want := tableRows(t, tb)
		const target = 500
		raceCompactions(t, tb, target)
		require.Equal(t, want, tableRows(t, tb))
		requireCompacted(t, tb, target)
		require.Empty(t, orphans(t, tb))
	})
}
