package query

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/internal/fixture"
)

// A longSum whose exact sum in a group does not fit an int64 fails the query, naming the
// metric and the group, whether the values meet in one input, across inputs or in a builder;
// a sum out of range only on the way is exact. (It wrapped silently.)
func TestQueryLongSumOverflow(t *testing.T) {
	dir := t.TempDir()
	s := columns.Schema{Dimensions: []columns.Dimension{{Name: "k"}},
		Metrics: []columns.Metric{{Name: "n", Aggregator: agg.Count}, {Name: "added", Aggregator: agg.LongSum}}}
	row := func(ms int64, k string, v int64) columns.Row {
		return columns.Row{Time: ms, Dims: [][]string{{k}}, Metrics: []columns.Value{{}, {Long: v}}}
	}
	one := fixture.WriteSegment(t, dir, "one.seg", s, []columns.Row{row(1, "a", 5), row(2, "b", math.MaxInt64), row(3, "b", 1)})
	big := fixture.WriteSegment(t, dir, "big.seg", s, []columns.Row{row(1, "b", math.MaxInt64)})
	small := fixture.WriteSegment(t, dir, "small.seg", s, []columns.Row{row(4, "b", 1)})
	back := fixture.WriteSegment(t, dir, "back.seg", s, []columns.Row{row(5, "b", -2)})
	b, err := merger.NewBuilder(s, merger.BuilderOptions{})
	require.NoError(t, err)
	for _, r := range []columns.Row{row(1, "b", math.MaxInt64), row(2, "b", 1)} {
		require.NoError(t, b.Add(r))
	}
	spec := Spec{GroupBy: []string{"k"}, All: true}
	for name, qs := range map[string][]Queryable{
		"one segment": {one}, "two segments": {big, small}, "two segments reversed": {small, big}, "a builder": {b},
	} {
		_, err := RunMany(t.Context(), qs, spec)
		require.ErrorIs(t, err, agg.ErrOverflow, name)
		require.ErrorContains(t, err, `query: metric "added": the group at time `, name)
		require.ErrorContains(t, err, `, k "b": the exact sum 9223372036854775808 is outside the int64 range`, name)
		// Grouped by time, the rows of "one.seg" fall in different groups: no overflow.
		if name == "one segment" {
			res, err := RunMany(t.Context(), qs, Spec{GroupBy: []string{"k"}})
			require.NoError(t, err)
			require.Len(t, res.Rows, 3)
		}
	}
	for _, qs := range [][]Queryable{{big, small, back}, {small, back, big}, {back, big, small}, {one, back}} {
		res, err := RunMany(t.Context(), qs, spec)
		require.NoError(t, err)
		last := res.Rows[len(res.Rows)-1]
		require.Equal(t, "b", last.Groups[0].Value)
		require.Equal(t, int64(math.MaxInt64-1), last.Values[1].Long)
	}
}
