package merger

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/fixture"
)

// TestBuilderPersist (bar 5): a builder's persisted segment equals the naive merge of its
// rows, and is the same, byte for byte, with and without live bitmaps. (merger/query's
// TestBuilderQueries checks queries on builders.)
func TestBuilderPersist(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 17))
	cases := 20
	if testing.Short() || raceEnabled {
		cases = 6
	}
	for c := 0; c < cases; c++ {
		schema, rows := fixture.NewBuilderCase(rng, 1+rng.IntN(400))
		dir := t.TempDir()
		var paths []string
		for _, live := range []bool{true, false} {
			b, err := NewBuilder(schema, BuilderOptions{LiveBitmaps: live})
			require.NoError(t, err)
			for _, r := range rows {
				require.NoError(t, b.Add(r))
			}
			dst := filepath.Join(dir, fmt.Sprintf("persisted-live=%v.seg", live))
			res, err := b.Persist(t.Context(), dst, PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
			require.NoError(t, err)
			require.Equal(t, int64(b.Rows()), res.RowsOut)
			paths = append(paths, dst)
		}
		persisted := openSeg(t, paths[0])
		require.True(t, schema.Equal(persisted.Schema()))
		// The naive merge of the rows, unrolled and in time order.
		plain := schema
		plain.Rollup, plain.Granularity = false, columns.GranularityNone
		sorted := slices.Clone(rows)
		for i := range sorted {
			sorted[i].Time = schema.Granularity.Truncate(sorted[i].Time)
		}
		slices.SortStableFunc(sorted, func(a, b columns.Row) int { return cmp.Compare(a.Time, b.Time) })
		want := oracleMerge([]columns.Schema{plain}, [][]columns.Row{sorted}, withRollup(plain, schema.Rollup, schema.Granularity))
		requireRowsEqual(t, want, readRows(t, persisted), false, fmt.Sprintf("case %d persisted", c))
		checkBitmaps(t, persisted)
		a, err := os.ReadFile(paths[0])
		require.NoError(t, err)
		b, err := os.ReadFile(paths[1])
		require.NoError(t, err)
		require.Equal(t, a, b, "case %d: persisted with and without live bitmaps differ", c)
	}
}

func withRollup(s columns.Schema, rollup bool, g columns.Granularity) columns.Schema {
	s.Rollup, s.Granularity = rollup, g
	return s
}
