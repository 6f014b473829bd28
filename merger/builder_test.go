package merger

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

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

// ResetKeep reuses the row arrays: a builder that takes batch after batch of rows through
// ResetKeep persists each batch byte for byte as a fresh builder does (the kept arrays hold
// nothing of the rows before: no stale value, null, sum or sketch), whatever the schema
// (multi-value, raw, rollup, every aggregator). MemBytes counts the memory kept, and a
// bound below the arrays' capacity keeps nothing.
func TestBuilderResetKeep(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 18))
	cases := 12
	if testing.Short() || raceEnabled {
		cases = 4
	}
	for c := 0; c < cases; c++ {
		schema, rows := fixture.NewBuilderCase(rng, 3+rng.IntN(600))
		dir := t.TempDir()
		kept, err := NewBuilder(schema, BuilderOptions{})
		require.NoError(t, err)
		// Batches of decreasing size, so that later ones fill only part of the kept arrays.
		for k, part := range [][]columns.Row{rows[:len(rows)/2], rows[len(rows)/2 : len(rows)*5/6], rows[len(rows)*5/6:]} {
			fresh, err := NewBuilder(schema, BuilderOptions{})
			require.NoError(t, err)
			for _, r := range part {
				require.NoError(t, kept.Add(r))
				require.NoError(t, fresh.Add(r))
			}
			requireSamePersisted(t, dir, fmt.Sprint(k), fresh, kept, "case %d batch %d: the reused builder's segment differs", c, k)
			held := kept.MemBytes()
			kept.ResetKeep(1 << 40)
			require.Zero(t, kept.Rows())
			if len(part) > 0 {
				empty, err := NewBuilder(schema, BuilderOptions{})
				require.NoError(t, err)
				require.Greater(t, kept.MemBytes(), empty.MemBytes(), "case %d: the kept arrays are counted", c)
				require.Less(t, kept.MemBytes(), held)
			}
		}
	}
	// A bound below the arrays' capacity keeps nothing (only the small rollup key buffers
	// stay, as with Reset); a bound at it keeps them all, counted.
	schema := columns.Schema{Dimensions: []columns.Dimension{{Name: "d"}},
		Metrics: []columns.Metric{{Name: "s", Aggregator: "longSum"}}}
	b, err := NewBuilder(schema, BuilderOptions{})
	require.NoError(t, err)
	fill := func() {
		for i := range 5000 {
			require.NoError(t, b.Add(columns.Row{Time: int64(i), Dims: [][]string{{fmt.Sprint(i % 3)}}, Metrics: []columns.Value{{Long: 1}}}))
		}
	}
	fill()
	arrays := b.arrayBytes()
	require.Positive(t, arrays)
	b.ResetKeep(arrays - 1)
	require.Less(t, b.MemBytes(), arrays/2)
	fill()
	b.ResetKeep(arrays)
	require.GreaterOrEqual(t, b.MemBytes(), arrays)
	b.Reset()
	require.Less(t, b.MemBytes(), arrays/2)
}

// A new dictionary value is copied: the builder does not keep the string it came in (a CSV
// record) alive.
func TestBuilderCopiesValues(t *testing.T) {
	schema := columns.Schema{Dimensions: []columns.Dimension{{Name: "d"}}, Metrics: []columns.Metric{{Name: "n", Aggregator: "count"}}}
	b, err := NewBuilder(schema, BuilderOptions{})
	require.NoError(t, err)
	record := "value,other fields of the record"
	v := record[:5]
	require.NoError(t, b.Add(columns.Row{Time: 1, Dims: [][]string{{v}}, Metrics: make([]columns.Value, 1)}))
	kept := b.dims[0].vals[1]
	require.Equal(t, v, kept)
	require.NotSame(t, unsafe.StringData(record), unsafe.StringData(kept))
}

// Grow reserves room for n rows: adding them grows no array (arrayBytes stays), and the rows
// persist as without Grow.
func TestBuilderGrow(t *testing.T) {
	schema := columns.Schema{Dimensions: []columns.Dimension{{Name: "d"}, {Name: "r", Raw: true}},
		Metrics: []columns.Metric{{Name: "n", Aggregator: "count"}, {Name: "s", Aggregator: "longSum"},
			{Name: "f", Aggregator: "doubleLast"}}}
	const n = 20_000
	grown, err := NewBuilder(schema, BuilderOptions{})
	require.NoError(t, err)
	plain, err := NewBuilder(schema, BuilderOptions{})
	require.NoError(t, err)
	grown.Grow(n)
	reserved := grown.arrayBytes()
	require.Greater(t, reserved, int64(n*(8+4+16+1+8+8+8+8)))
	for i := range n {
		r := columns.Row{Time: int64(i), Dims: [][]string{{fmt.Sprint(i % 7)}, {"raw"}},
			Metrics: []columns.Value{{}, {Long: int64(i)}, {Double: float64(i)}}}
		require.NoError(t, grown.Add(r))
		require.NoError(t, plain.Add(r))
	}
	// Only the dictionary's values (7 here) took more room.
	require.Less(t, grown.arrayBytes()-reserved, int64(1024), "a row array grew")
	requireSamePersisted(t, t.TempDir(), "", plain, grown)
}

// requireSamePersisted persists want and got into dir (files named after tag, no sync) and
// requires the same bytes.
func requireSamePersisted(t *testing.T, dir, tag string, want, got *Builder, msgAndArgs ...any) {
	t.Helper()
	noSync := PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}}
	var files [2][]byte
	for i, b := range []*Builder{want, got} {
		p := filepath.Join(dir, fmt.Sprintf("%s-%d.seg", tag, i))
		_, err := b.Persist(t.Context(), p, noSync)
		require.NoError(t, err)
		files[i], err = os.ReadFile(p)
		require.NoError(t, err)
	}
	require.Equal(t, files[0], files[1], msgAndArgs...)
}

// PersistAfter merges segments and then the builder's rows: the same bytes as persisting the
// builder as one more segment and merging it after them, with rollup (ties of first/last
// decided by that order) and without.
func TestBuilderPersistAfter(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 20))
	cases := 10
	if testing.Short() || raceEnabled {
		cases = 4
	}
	noSync := medium.Durability{Sync: medium.SyncNone}
	for c := 0; c < cases; c++ {
		schema, rows := fixture.NewBuilderCase(rng, 20+rng.IntN(500))
		dir := t.TempDir()
		parts := 1 + rng.IntN(4)
		var segs []*columns.Segment
		b, err := NewBuilder(schema, BuilderOptions{})
		require.NoError(t, err)
		for k := 0; k <= parts; k++ {
			b.Reset()
			for _, r := range rows[len(rows)*k/(parts+1) : len(rows)*(k+1)/(parts+1)] {
				require.NoError(t, b.Add(r))
			}
			if k == parts {
				break // the last part stays in b
			}
			p := filepath.Join(dir, fmt.Sprintf("part-%d.seg", k))
			_, err := b.Persist(t.Context(), p, PersistOptions{Durability: noSync})
			require.NoError(t, err)
			segs = append(segs, openSeg(t, p))
		}
		after := filepath.Join(dir, "after.seg")
		res, err := b.PersistAfter(t.Context(), segs, after, PersistOptions{Durability: noSync})
		require.NoError(t, err)
		last := filepath.Join(dir, "last.seg")
		_, err = b.Persist(t.Context(), last, PersistOptions{Durability: noSync})
		require.NoError(t, err)
		merged := filepath.Join(dir, "merged.seg")
		want, err := Merge(t.Context(), append(segs, openSeg(t, last)), merged, Options{Durability: noSync,
			Rollup: schema.Rollup, Granularity: schema.Granularity})
		require.NoError(t, err)
		require.Equal(t, want.RowsOut, res.RowsOut)
		a, err := os.ReadFile(after)
		require.NoError(t, err)
		m, err := os.ReadFile(merged)
		require.NoError(t, err)
		require.Equal(t, m, a, "case %d (rollup %v, %d parts)", c, schema.Rollup, parts)
	}
}
