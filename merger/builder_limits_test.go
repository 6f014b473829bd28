package merger

import (
	"math"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
)

// TestBuilderRejectsTimesOutOfRange: a time outside [columns.MinTime, columns.MaxTime] is an
// error naming it (the ends themselves are fine), and leaves the builder unchanged.
func TestBuilderRejectsTimesOutOfRange(t *testing.T) {
	s := columns.Schema{Metrics: []columns.Metric{{Name: "n", Aggregator: agg.Count}},
		Rollup: true, Granularity: columns.GranularityDay}
	b, err := NewBuilder(s, BuilderOptions{})
	require.NoError(t, err)
	row := func(ms int64) columns.Row { return columns.Row{Time: ms, Metrics: []columns.Value{{}}} }
	for _, bad := range []int64{math.MinInt64, columns.MinTime - 1, columns.MaxTime + 1, math.MaxInt64} {
		err := b.Add(row(bad))
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorIs(t, err, columns.ErrInvalid)
		require.ErrorContains(t, err, "time "+itoa64(bad)+" outside")
	}
	require.Zero(t, b.Rows())
	require.NoError(t, b.Add(row(columns.MinTime)))
	require.NoError(t, b.Add(row(columns.MaxTime)))
	require.Equal(t, 2, b.Rows())
	_, err = b.Persist(t.Context(), filepath.Join(t.TempDir(), "ends.seg"), PersistOptions{})
	require.NoError(t, err, "the ends, truncated to days, are times a segment holds")
}

func itoa64(v int64) string { return strconv.FormatInt(v, 10) }

// longSumSchema: rows of one dimension and a longSum, rolled up.
var longSumSchema = columns.Schema{Dimensions: []columns.Dimension{{Name: "k"}},
	Metrics: []columns.Metric{{Name: "added", Aggregator: agg.LongSum}}, Rollup: true}

func longRow(ms int64, k string, v int64) columns.Row {
	return columns.Row{Time: ms, Dims: [][]string{{k}}, Metrics: []columns.Value{{Long: v}}}
}

// A longSum whose exact sum does not fit an int64 is an error naming the metric and the row,
// in a Builder's rollup and in a merge's; a sum out of range only on the way is exact.
func TestLongSumOverflow(t *testing.T) {
	dir := t.TempDir()
	noSync := medium.Durability{Sync: medium.SyncNone}
	build := func(rows ...columns.Row) *Builder {
		t.Helper()
		b, err := NewBuilder(longSumSchema, BuilderOptions{})
		require.NoError(t, err)
		for _, r := range rows {
			require.NoError(t, b.Add(r))
		}
		return b
	}
	// The Builder: MaxInt64 + 1 overflows; + 1 - 1 does not.
	b := build(longRow(5, "a", 1), longRow(7, "b", math.MaxInt64), longRow(7, "b", 1))
	_, err := b.Persist(t.Context(), filepath.Join(dir, "b.seg"), PersistOptions{Durability: noSync})
	require.ErrorIs(t, err, agg.ErrOverflow)
	require.ErrorContains(t, err, `metric "added"`)
	require.ErrorContains(t, err, "row 1 (time 7, truncated): the exact sum 9223372036854775808 is outside the int64 range")
	require.Empty(t, dirNames(t, dir))
	require.NoError(t, b.Add(longRow(7, "b", -1)))
	_, err = b.Persist(t.Context(), filepath.Join(dir, "b.seg"), PersistOptions{Durability: noSync})
	require.NoError(t, err)
	seg := openSeg(t, filepath.Join(dir, "b.seg"))
	require.Equal(t, int64(math.MaxInt64), readRows(t, seg)[1].Metrics[0].Long)

	// A merge with rollup: the same, whatever the inputs' order.
	segOf := func(name string, rows ...columns.Row) *columns.Segment {
		t.Helper()
		_, err := build(rows...).Persist(t.Context(), filepath.Join(dir, name), PersistOptions{Durability: noSync})
		require.NoError(t, err)
		return openSeg(t, filepath.Join(dir, name))
	}
	big := segOf("big.seg", longRow(7, "b", math.MaxInt64-1))
	two := segOf("two.seg", longRow(7, "b", 2))
	minus := segOf("minus.seg", longRow(7, "b", -3), longRow(9, "c", math.MinInt64))
	low := segOf("low.seg", longRow(9, "c", -1))
	for _, in := range [][]*columns.Segment{{big, two}, {two, big}} {
		_, err = Merge(t.Context(), in, filepath.Join(dir, "m.seg"), Options{Rollup: true, Durability: noSync})
		require.ErrorIs(t, err, agg.ErrOverflow)
		require.ErrorContains(t, err, `metric "added": the output row at time 7: the exact sum 9223372036854775808 is outside the int64 range`)
		require.NoFileExists(t, filepath.Join(dir, "m.seg"))
	}
	_, err = Merge(t.Context(), []*columns.Segment{minus, low}, filepath.Join(dir, "m.seg"), Options{Rollup: true, Durability: noSync})
	require.ErrorIs(t, err, agg.ErrOverflow)
	require.ErrorContains(t, err, "the exact sum -9223372036854775809 is outside")
	for _, in := range [][]*columns.Segment{{big, two, minus}, {two, minus, big}, {minus, big, two}} {
		mustMerge(t, in, filepath.Join(dir, "m.seg"), Options{Rollup: true, Durability: noSync, Replace: true})
		rows := readRows(t, openSeg(t, filepath.Join(dir, "m.seg")))
		require.Equal(t, int64(math.MaxInt64-2), rows[0].Metrics[0].Long)
	}
	// In phases, an intermediate segment stores its partial sums: one that does not fit fails
	// the merge (big and two meet first); never a wrapped value.
	_, err = Merge(t.Context(), []*columns.Segment{big, two, minus}, filepath.Join(dir, "p.seg"), Options{Rollup: true, Durability: noSync, MaxFanIn: 2})
	require.ErrorIs(t, err, agg.ErrOverflow)
	mustMerge(t, []*columns.Segment{big, minus, two}, filepath.Join(dir, "p.seg"), Options{Rollup: true, Durability: noSync, MaxFanIn: 2})
	require.Equal(t, int64(math.MaxInt64-2), readRows(t, openSeg(t, filepath.Join(dir, "p.seg")))[0].Metrics[0].Long)
}
