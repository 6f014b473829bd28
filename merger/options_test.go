package merger

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
)

// TestOptionsInvalid: a bad option is refused before any work with an error wrapping
// ErrInvalid (and, for the options passed on to columns, columns.ErrInvalid), by Merge and by
// Builder.Persist alike, and nothing is written.
func TestOptionsInvalid(t *testing.T) {
	dir := t.TempDir()
	schema := columns.Schema{Dimensions: []columns.Dimension{{Name: "d"}}, Metrics: []columns.Metric{{Name: "n", Aggregator: agg.LongSum}}}
	rows := []columns.Row{{Time: 1, Dims: [][]string{{"a"}}, Metrics: []columns.Value{{Long: 1}}}}
	in := writeSegment(t, dir, "in.seg", schema, rows)
	b, err := NewBuilder(schema, BuilderOptions{})
	require.NoError(t, err)
	require.NoError(t, b.Add(rows[0]))

	f := func(name string, o Options, also error) {
		t.Helper()
		_, err := Merge(t.Context(), []*columns.Segment{in}, filepath.Join(dir, "out.seg"), o)
		require.ErrorIs(t, err, ErrInvalid, name)
		require.ErrorContains(t, err, "merger: ", name)
		if also != nil {
			require.ErrorIs(t, err, also, name)
		}
		_, err = b.Persist(t.Context(), filepath.Join(dir, "out.seg"), PersistOptions{
			Compression: o.Compression, ChunkRows: o.ChunkRows, Durability: o.Durability, Parallelism: o.Parallelism})
		require.ErrorIs(t, err, ErrInvalid, name+" (Persist)")
		if also != nil {
			require.ErrorIs(t, err, also, name+" (Persist)")
		}
	}
	f("ChunkRows negative", Options{ChunkRows: -1}, columns.ErrInvalid)
	f("ChunkRows too large", Options{ChunkRows: 1 << 20}, columns.ErrInvalid)
	f("Compression unknown", Options{Compression: 99}, columns.ErrInvalid)
	f("Durability", Options{Durability: medium.Durability{Sync: 99}}, medium.ErrInvalid)
	f("Parallelism", Options{Parallelism: -1}, nil)
	require.Equal(t, []string{"in.seg"}, dirNames(t, dir))

	// The limits themselves are valid.
	for _, o := range []Options{{ChunkRows: 1}, {ChunkRows: 65536, Compression: columns.CompressionZstd}} {
		_, err := Merge(t.Context(), []*columns.Segment{in}, filepath.Join(dir, "out.seg"), o)
		require.NoError(t, err)
		_, err = b.Persist(t.Context(), filepath.Join(dir, "out.seg"), PersistOptions{Compression: o.Compression, ChunkRows: o.ChunkRows, Replace: true})
		require.NoError(t, err)
		require.NoError(t, os.Remove(filepath.Join(dir, "out.seg")))
	}
}
