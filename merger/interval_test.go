package merger

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
)

// hourAt returns 2000-01-01 h:m in milliseconds.
func hourAt(h, m int64) int64 { return 946_684_800_000 + h*3_600_000 + m*60_000 }

// TestPersistInterval: a Builder at hour granularity persists one row at 10:17 as a segment of
// interval 10:00/11:00 (the row's hour), not 10:00/10:00:00.001.
func TestPersistInterval(t *testing.T) {
	for _, rollup := range []bool{false, true} {
		schema := columns.Schema{
			Dimensions:  []columns.Dimension{{Name: "page"}},
			Metrics:     []columns.Metric{{Name: "rows", Aggregator: agg.Count}},
			Rollup:      rollup,
			Granularity: columns.GranularityHour,
		}
		b, err := NewBuilder(schema, BuilderOptions{})
		require.NoError(t, err)
		require.NoError(t, b.Add(columns.Row{Time: hourAt(10, 17), Dims: [][]string{{"home"}}, Metrics: []columns.Value{{}}}))
		dst := filepath.Join(t.TempDir(), "one.seg")
		res, err := b.Persist(context.Background(), dst, PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
		require.NoError(t, err)
		require.Equal(t, "2000-01-01T10:00:00.000Z/2000-01-01T11:00:00.000Z", res.Info.Interval.String(), "rollup %v", rollup)
		seg := openSeg(t, dst)
		require.Equal(t, res.Info.Interval, seg.Interval())
		require.NoError(t, seg.Verify())
	}
}

// TestMergeRollupInterval: a rollup merge at hour granularity of raw (granularity none)
// segments ends its interval on a bucket boundary, the end of the last row's hour.
func TestMergeRollupInterval(t *testing.T) {
	dir := t.TempDir()
	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "page"}},
		Metrics:    []columns.Metric{{Name: "rows", Aggregator: agg.Count}},
	}
	row := func(tm int64, page string) columns.Row {
		return columns.Row{Time: tm, Dims: [][]string{{page}}, Metrics: []columns.Value{{Long: 1}}}
	}
	a := writeSegment(t, dir, "a.seg", schema, []columns.Row{row(hourAt(0, 17), "home"), row(hourAt(0, 59), "home")})
	b := writeSegment(t, dir, "b.seg", schema, []columns.Row{row(hourAt(0, 30), "about"), row(hourAt(1, 5), "home")})
	require.Equal(t, "2000-01-01T00:17:00.000Z/2000-01-01T00:59:00.001Z", a.Interval().String())

	dst := filepath.Join(dir, "hourly.seg")
	res := mustMerge(t, []*columns.Segment{a, b}, dst, Options{Rollup: true, Granularity: columns.GranularityHour,
		Durability: medium.Durability{Sync: medium.SyncNone}})
	require.Equal(t, int64(3), res.RowsOut) // 00:00 about, 00:00 home, 01:00 home
	require.Equal(t, "2000-01-01T00:00:00.000Z/2000-01-01T02:00:00.000Z", res.Info.Interval.String())
	seg := openSeg(t, dst)
	require.Equal(t, res.Info.Interval, seg.Interval())
	checkBitmaps(t, seg) // and Verify

	// Without rollup and granularity the merge keeps the rows' own span.
	dst = filepath.Join(dir, "raw.seg")
	res = mustMerge(t, []*columns.Segment{a, b}, dst, Options{Durability: medium.Durability{Sync: medium.SyncNone}})
	require.Equal(t, "2000-01-01T00:17:00.000Z/2000-01-01T01:05:00.001Z", res.Info.Interval.String())
	require.NoError(t, openSeg(t, dst).Verify())
}
