package merger

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
)

// TestNullsMergeV2V3 merges a segment whose metrics have null rows (format version 3) with one
// without (version 2), with rollup: the nulls are skipped, a row that is null in every input
// stays null, and an output without nulls is version 2 again.
func TestNullsMergeV2V3(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "page"}},
		Metrics: []columns.Metric{
			{Name: "rows", Aggregator: agg.Count},
			{Name: "delay", Aggregator: agg.LongMin},
			{Name: "price", Aggregator: agg.DoubleSum},
			{Name: "last", Aggregator: agg.DoubleLast},
		},
		Rollup: true, Granularity: columns.GranularityHour,
	}
	noSync := medium.Durability{Sync: medium.SyncNone}
	persist := func(name string, rows []columns.Row) *columns.Segment {
		t.Helper()
		b, err := NewBuilder(schema, BuilderOptions{})
		require.NoError(t, err)
		for _, r := range rows {
			require.NoError(t, b.Add(r))
		}
		path := filepath.Join(dir, name)
		// Compression none: no version 4 part, so the versions are 2 and 3.
		_, err = b.Persist(ctx, path, PersistOptions{Durability: noSync, Compression: columns.CompressionNone})
		require.NoError(t, err)
		seg, err := columns.Open(path)
		require.NoError(t, err)
		t.Cleanup(func() { _ = seg.Close() })
		require.NoError(t, seg.Verify())
		return seg
	}
	null := columns.Value{Null: true}
	page := func(p string) [][]string { return [][]string{{p}} }
	a := persist("a.seg", []columns.Row{
		{Time: 10, Dims: page("x"), Metrics: []columns.Value{{}, {Long: 7}, {Double: 1.5}, {Double: 1}}},
		{Time: 20, Dims: page("x"), Metrics: []columns.Value{{}, null, null, null}},
		{Time: 30, Dims: page("y"), Metrics: []columns.Value{{}, null, null, null}},
		{Time: 40, Dims: page("z"), Metrics: []columns.Value{{}, null, null, null}},
	})
	b := persist("b.seg", []columns.Row{
		{Time: 50, Dims: page("x"), Metrics: []columns.Value{{}, {Long: 3}, {Double: 2}, {Double: 2}}},
		{Time: 60, Dims: page("y"), Metrics: []columns.Value{{}, {Long: 9}, {Double: 4}, {Double: 3}}},
	})
	version := func(s *columns.Segment) byte {
		b, err := os.ReadFile(s.Name())
		require.NoError(t, err)
		return b[5]
	}
	require.Equal(t, byte(3), version(a))
	require.Equal(t, byte(2), version(b))

	out := filepath.Join(dir, "m.seg")
	_, err := Merge(ctx, []*columns.Segment{a, b}, out, Options{Rollup: true, Granularity: columns.GranularityHour, Durability: noSync, Compression: columns.CompressionNone})
	require.NoError(t, err)
	m, err := columns.Open(out)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Verify())
	require.Equal(t, byte(3), version(m)) // z is null in every input
	var got []columns.Row
	rr := m.RowReader()
	for i := range m.Rows() {
		var r columns.Row
		require.NoError(t, rr.Read(i, &r))
		got = append(got, r)
	}
	require.Len(t, got, 3)
	require.Equal(t, []columns.Value{{Long: 3}, {Long: 3}, {Double: 3.5}, {Double: 2}}, got[0].Metrics, "x")
	require.Equal(t, []columns.Value{{Long: 2}, {Long: 9}, {Double: 4}, {Double: 3}}, got[1].Metrics, "y")
	require.Equal(t, []columns.Value{{Long: 1}, null, null, null}, got[2].Metrics, "z: null in every input")

	// An input whose only row of x is null, merged with b: x takes b's values, nothing is
	// null, and the output is version 2 again.
	c := persist("c.seg", []columns.Row{{Time: 15, Dims: page("x"), Metrics: []columns.Value{{}, null, null, null}}})
	require.Equal(t, byte(3), version(c))
	out2 := filepath.Join(dir, "m2.seg")
	_, err = Merge(ctx, []*columns.Segment{c, b}, out2, Options{Rollup: true, Granularity: columns.GranularityHour, Durability: noSync, Compression: columns.CompressionNone})
	require.NoError(t, err)
	m2, err := columns.Open(out2)
	require.NoError(t, err)
	defer m2.Close()
	require.NoError(t, m2.Verify())
	require.Equal(t, byte(2), version(m2))
	r, err := m2.ReadRow(0)
	require.NoError(t, err)
	require.Equal(t, []columns.Value{{Long: 2}, {Long: 3}, {Double: 2}, {Double: 2}}, r.Metrics)
}
