package merger

import (
	"math"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
)

// TestBuilderRejectsTimesOutOfRange: a time outside [columns.MinTime, columns.MaxTime] is an
// error naming it (the ends themselves are fine), and leaves the builder unchanged.
func TestBuilderRejectsTimesOutOfRange(t *testing.T) {
	s := columns.Schema{Metrics: []columns.Metric{{Name: "n", Aggregator: columns.AggCount}},
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
