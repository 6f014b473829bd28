package columns

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/writeout/writeout/columns/agg"
)

func TestSmoke(t *testing.T) {
	schema := Schema{
		Dimensions: []Dimension{{Name: "page"}, {Name: "tags", MultiValue: true}, {Name: "body", Raw: true}},
		Metrics:    []Metric{{Name: "count", Aggregator: agg.Count}, {Name: "added", Aggregator: agg.DoubleSum}, {Name: "u", Aggregator: agg.HyperUnique}},
	}
	w, err := newRowsWriter(schema, writerOptions{})
	require.NoError(t, err)
	rows := []Row{
		{Time: 10, Dims: [][]string{{"b"}, {"x", "y"}, {"hello"}}, Metrics: []Value{{Long: 1}, {Double: 1.5}, {}}},
		{Time: 10, Dims: [][]string{nil, nil, nil}, Metrics: []Value{{Long: 2}, {Double: 2}, {}}},
		{Time: 20, Dims: [][]string{{"a"}, {"y"}, {""}}, Metrics: []Value{{Long: 3}, {Double: -1}, {}}},
	}
	for _, r := range rows {
		require.NoError(t, w.AddRow(r))
	}
	var buf bytes.Buffer
	info, err := w.FinishTo(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(buf.Len()), info.Size)
	s, err := newSegmentBytes(buf.Bytes())
	require.NoError(t, err)
	require.NoError(t, s.Verify())
	require.Equal(t, 3, s.Rows())
	require.Equal(t, Interval{10, 21}, s.Interval())
	for i, want := range rows {
		got, err := s.ReadRow(i)
		require.NoError(t, err)
		require.Equal(t, want.Time, got.Time)
		require.Equal(t, want.Dims, got.Dims)
		require.Equal(t, want.Metrics[0], got.Metrics[0])
		require.Equal(t, want.Metrics[1], got.Metrics[1])
	}
}
