package merger

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/fixture"
	"github.com/writeout/writeout/merger/internal/scratch"
)

// A builder with ScratchArrays persists every batch byte for byte as a builder on the Go heap
// does, through batches that grow its arrays, keep them (ResetKeep) and drop them (a bound
// below their size), while other scratch arrays are taken from the pool and scribbled on
// between rows: an array of the builder given back to the pool while still in use (a lost
// owner, a reset that frees what it keeps) would show as rows that differ. Its arrays are in
// mappings, counted whole by arrayBytes and MemBytes; after Close it takes no rows.
func TestBuilderScratchArrays(t *testing.T) {
	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "d"}, {Name: "tags", MultiValue: true}, {Name: "r", Raw: true}},
		Metrics: []columns.Metric{{Name: "n", Aggregator: "count"}, {Name: "s", Aggregator: "longSum"},
			{Name: "f", Aggregator: "doubleSum"}, {Name: "l", Aggregator: "longLast"}},
	}
	rng := rand.New(rand.NewPCG(testSeed(t), 31))
	sizes := []int{300_000, 40_000, 330_000, 5_000}
	if raceEnabled {
		sizes = []int{2_000, 1_000, 135_000}
	}
	heap, err := NewBuilder(schema, BuilderOptions{})
	require.NoError(t, err)
	scr, err := NewBuilder(schema, BuilderOptions{ScratchArrays: true})
	require.NoError(t, err)
	dir := t.TempDir()
	noSync := PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}}
	scribble := func() {
		a := scratch.New[uint64](1 << 19) // 4 MiB: from the pool when it holds a freed array
		for i := range a.S {
			a.S[i] = 0xdeadbeefdeadbeef
		}
		require.NoError(t, a.Free())
	}
	var vals, tagVals []string
	for i := range 50 {
		vals = append(vals, fmt.Sprint(i))
	}
	for i := range 5 {
		tagVals = append(tagVals, fmt.Sprint("t", i))
	}
	var tm int64
	for k, n := range sizes {
		for i := range n {
			tm += int64(rng.IntN(3))
			var tags []string
			for range rng.IntN(3) {
				tags = append(tags, tagVals[rng.IntN(5)])
			}
			r := columns.Row{Time: tm, Dims: [][]string{{vals[rng.IntN(50)]}, tags, {"raw"}},
				Metrics: []columns.Value{{}, {Long: rng.Int64N(1000)}, {Double: float64(rng.IntN(100)) / 4}, {Long: int64(i)}}}
			if rng.IntN(20) == 0 {
				r.Dims[0], r.Metrics[1] = nil, columns.Value{Null: true}
			}
			require.NoError(t, heap.Add(r))
			require.NoError(t, scr.Add(r))
			if i%50_000 == 0 {
				scribble()
			}
		}
		if runtime.GOOS == "linux" && n >= 140_000 {
			// times (8 bytes a row) are in a mapping: whole 2 MiB units.
			got := scr.arrs.times.Bytes()
			require.GreaterOrEqual(t, got, 8*n)
			require.Zero(t, got%(2<<20), "batch %d: times are not in a mapping", k)
			require.GreaterOrEqual(t, scr.arrayBytes(), int64(got+scr.mets[1].arrs.longs.Bytes()))
			require.GreaterOrEqual(t, scr.MemBytes(), scr.arrayBytes())
		}
		a, b := filepath.Join(dir, fmt.Sprintf("heap-%d.seg", k)), filepath.Join(dir, fmt.Sprintf("scratch-%d.seg", k))
		_, err := heap.Persist(t.Context(), a, noSync)
		require.NoError(t, err)
		scribble()
		_, err = scr.Persist(t.Context(), b, noSync)
		require.NoError(t, err)
		// A second persist takes its scratch arrays (the view's sorted ids, the merge's id
		// logs) from the pool and gives them all back.
		pooled := scratch.PoolBytes()
		_, err = scr.Persist(t.Context(), b+".again", noSync)
		require.NoError(t, err)
		require.Equal(t, pooled, scratch.PoolBytes(), "batch %d: a persist kept scratch memory", k)
		ab, err := os.ReadFile(a)
		require.NoError(t, err)
		bb, err := os.ReadFile(b)
		require.NoError(t, err)
		require.Equal(t, ab, bb, "batch %d of %d rows: the scratch builder's segment differs", k, n)
		heap.Reset()
		if k == 1 {
			scr.ResetKeep(scr.arrayBytes() - 1) // dropped: back to the pool
		} else {
			scr.ResetKeep(1 << 40)
		}
		require.Zero(t, scr.Rows())
		scribble()
	}
	// Close gives every mapping back to the pool: each array of at least 1 MiB is in one (of
	// whole 2 MiB units, maybe more when the pool gave a larger one).
	want := 0
	mapped := func(bytes int) {
		if runtime.GOOS == "linux" && bytes >= 1<<20 {
			want += (bytes + 2<<20 - 1) / (2 << 20) * (2 << 20)
		}
	}
	mapped(cap(scr.times) * 8)
	for _, d := range scr.dims {
		mapped(cap(d.ids) * 4)
	}
	for _, m := range scr.mets {
		mapped(cap(m.longs) * 8)
		mapped(cap(m.dbls) * 8)
		mapped(cap(m.times) * 8)
	}
	require.Positive(t, want)
	pooled := scratch.PoolBytes()
	require.NoError(t, scr.Close())
	require.GreaterOrEqual(t, scratch.PoolBytes()-pooled, want, "Close gave back fewer bytes than the builder's arrays map")
	require.Zero(t, scr.Rows())
	require.Less(t, scr.arrayBytes(), int64(1024))
	require.ErrorIs(t, scr.Add(columns.Row{Time: 1, Dims: make([][]string, 3), Metrics: make([]columns.Value, 4)}), medium.ErrClosed)
	_, err = scr.Persist(t.Context(), filepath.Join(dir, "closed.seg"), noSync)
	require.ErrorIs(t, err, medium.ErrClosed)
	scr.Grow(10)
	scr.ResetKeep(1 << 40)
	require.Less(t, scr.arrayBytes(), int64(1024))
	require.NoError(t, scr.Close(), "a second Close")
}

// AddRows adds rows as Add does, one after the other: the same segment; at a bad row it stops,
// returning how many it added and the row's error, and the rows before it stay.
func TestBuilderAddRows(t *testing.T) {
	schema := columns.Schema{Dimensions: []columns.Dimension{{Name: "d"}},
		Metrics: []columns.Metric{{Name: "s", Aggregator: "longSum"}}, Rollup: true, Granularity: columns.GranularityMinute}
	var rows []columns.Row
	for i := range 3000 {
		rows = append(rows, columns.Row{Time: int64(i * 1000), Dims: [][]string{{fmt.Sprint(i % 7)}}, Metrics: []columns.Value{{Long: int64(i)}}})
	}
	one, err := NewBuilder(schema, BuilderOptions{})
	require.NoError(t, err)
	for _, r := range rows {
		require.NoError(t, one.Add(r))
	}
	batch, err := NewBuilder(schema, BuilderOptions{ScratchArrays: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, batch.Close()) }()
	for i := 0; i < len(rows); i += 700 {
		n, err := batch.AddRows(rows[i:min(i+700, len(rows))])
		require.NoError(t, err)
		require.Equal(t, min(700, len(rows)-i), n)
	}
	requireSamePersisted(t, t.TempDir(), "", one, batch)

	before := batch.Rows()
	bad := []columns.Row{rows[0], {Time: columns.MaxTime + 1, Dims: [][]string{{"x"}}, Metrics: []columns.Value{{}}}, {Time: 1 << 40, Dims: [][]string{{"y"}}, Metrics: []columns.Value{{}}}}
	n, err := batch.AddRows(bad)
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, 1, n)
	require.Equal(t, before, batch.Rows(), "rows[0] rolled up into its row; the bad row and the one after it not added")
}

// Runs (ingestion's intermediate segments): Persist leaves out the bitmap indexes of
// single-value dimensions, and PersistAfter of such runs writes the same bytes as PersistAfter
// of segments persisted whole, bitmap indexes included, whatever the schema (multi-value,
// raw, rollup); an empty builder too.
func TestBuilderPersistRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 33))
	cases := 10
	if testing.Short() || raceEnabled {
		cases = 4
	}
	noSync := medium.Durability{Sync: medium.SyncNone}
	for c := 0; c < cases; c++ {
		schema, rows := fixture.NewBuilderCase(rng, 20+rng.IntN(500))
		dir := t.TempDir()
		parts := 1 + rng.IntN(3)
		var whole, runs []*columns.Segment
		b, err := NewBuilder(schema, BuilderOptions{})
		require.NoError(t, err)
		for k := 0; k <= parts; k++ {
			b.Reset()
			if k == parts && c%3 == 2 {
				break // an empty builder
			}
			for _, r := range rows[len(rows)*k/(parts+1) : len(rows)*(k+1)/(parts+1)] {
				require.NoError(t, b.Add(r))
			}
			if k == parts {
				break // the last part stays in b
			}
			w, r := filepath.Join(dir, fmt.Sprintf("whole-%d.seg", k)), filepath.Join(dir, fmt.Sprintf("run-%d.seg", k))
			_, err := b.Persist(t.Context(), w, PersistOptions{Durability: noSync})
			require.NoError(t, err)
			_, err = b.Persist(t.Context(), r, PersistOptions{Durability: noSync, Runs: true})
			require.NoError(t, err)
			whole, runs = append(whole, openSeg(t, w)), append(runs, openSeg(t, r))
			for _, d := range runs[k].Schema().Dimensions {
				if !d.Raw {
					want := !d.MultiValue || schema.Dimensions[schema.Dimension(d.Name)].NoBitmapIndex
					require.Equal(t, want, d.NoBitmapIndex, "case %d: dimension %q of a run", c, d.Name)
				}
			}
		}
		a, r := filepath.Join(dir, "whole.seg"), filepath.Join(dir, "runs.seg")
		_, err = b.PersistAfter(t.Context(), whole, a, PersistOptions{Durability: noSync})
		require.NoError(t, err)
		_, err = b.PersistAfter(t.Context(), runs, r, PersistOptions{Durability: noSync, Runs: true})
		require.NoError(t, err)
		ab, err := os.ReadFile(a)
		require.NoError(t, err)
		rb, err := os.ReadFile(r)
		require.NoError(t, err)
		require.Equal(t, ab, rb, "case %d (rollup %v, %d parts, %d rows left)", c, schema.Rollup, parts, b.Rows())
	}
}
