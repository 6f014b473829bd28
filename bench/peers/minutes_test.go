package peers

import (
	"cmp"
	"hash/maphash"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
)

// tuple is a row of any shape by value: dimensions and metrics in the shape's order.
type tuple struct {
	Time int64
	D    [MaxDims]string
	M    [MaxMetrics]int64
}

func compareTuples(a, b tuple) int {
	if c := cmp.Compare(a.Time, b.Time); c != 0 {
		return c
	}
	for d := range a.D {
		if c := cmp.Compare(a.D[d], b.D[d]); c != 0 {
			return c
		}
	}
	return 0
}

func tupleOf(s *Shape, r *Row) tuple {
	t := tuple{Time: r.Time, M: r.Mets}
	for d := range s.Dims {
		t.D[d] = s.Values()[d][r.Dims[d]]
	}
	return t
}

// readSegmentTuples reads every row of the segment at path.
func readSegmentTuples(t *testing.T, path string) []tuple {
	t.Helper()
	seg, err := columns.Open(path)
	require.NoError(t, err)
	defer seg.Close()
	rr := seg.RowReader()
	out := make([]tuple, seg.Rows())
	var r columns.Row
	for i := range out {
		require.NoError(t, rr.Read(i, &r))
		out[i].Time = r.Time
		for d := range r.Dims {
			out[i].D[d] = r.Dims[d][0]
		}
		for m := range r.Metrics {
			out[i].M[m] = r.Metrics[m].Long
		}
	}
	return out
}

func readMinutesParquet(t *testing.T, path string) []tuple {
	t.Helper()
	ms, err := ReadParquetOf[Minute](path)
	require.NoError(t, err)
	out := make([]tuple, len(ms))
	for i, m := range ms {
		out[i] = tuple{Time: m.Time, D: [MaxDims]string{m.D1, m.D2}, M: [MaxMetrics]int64{m.M1, m.M2}}
	}
	return out
}

// multiset is an order-free digest of tuples: the count and the sum of a hash of each.
func multiset(ts []tuple) [2]uint64 {
	var h uint64
	for _, x := range ts {
		h += maphash.Comparable(seed, x)
	}
	return [2]uint64{uint64(len(ts)), h}
}

// TestPeersAgreeMinutes is TestPeersAgree on the Minutes shape, from Prepare's inputs: every
// merge holds the generated rows in (time, d1, d2) order, and both hour rollups are the one
// computed in Go.
func TestPeersAgreeMinutes(t *testing.T) {
	const n = 20_000
	dir := t.TempDir()
	_, err := Prepare(dir, PrepareOptions{Shape: Minutes, Rows: n, NoCSV: true, BatchRows: 3000, RunRows: 3000})
	require.NoError(t, err)
	gen := GenerateRows(Minutes, n)
	want := make([]tuple, n)
	for i := range gen {
		want[i] = tupleOf(Minutes, &gen[i])
	}
	// The rollup in Go: rows of equal (hour, d1, d2) summed.
	sums := map[tuple]tuple{}
	for _, x := range want {
		k := tuple{Time: x.Time - x.Time%3_600_000, D: x.D}
		g := sums[k]
		g.Time, g.D = k.Time, k.D
		for m := range g.M {
			g.M[m] += x.M[m]
		}
		sums[k] = g
	}
	wantRollup := slices.SortedFunc(func(yield func(tuple) bool) {
		for _, g := range sums {
			if !yield(g) {
				return
			}
		}
	}, compareTuples)
	require.Less(t, len(wantRollup), n)

	db, err := OpenDuckDBWith(DuckDBOptions{MemoryLimit: "256MB", TempDirectory: filepath.Join(dir, "spill")})
	require.NoError(t, err)
	defer db.Close()
	limit, err := db.Setting(bg, "memory_limit")
	require.NoError(t, err)
	require.Contains(t, limit, "MiB", "memory_limit is set")

	for _, layout := range []Layout{Contiguous, Overlapping} {
		fx, err := StatFixture(dir, layout)
		require.NoError(t, err)
		merged := map[string][]tuple{}
		dst := filepath.Join(dir, string(layout)+"-w.seg")
		_, err = WriteoutMerge(bg, fx.Segs, dst, columns.CompressionDefault)
		require.NoError(t, err)
		merged["writeout"] = readSegmentTuples(t, dst)
		dst = filepath.Join(dir, "d.parquet")
		_, err = db.Exec(bg, Minutes.MergeSQL(fx.Parquets, dst))
		require.NoError(t, err)
		merged["duckdb"] = readMinutesParquet(t, dst)
		dst = filepath.Join(dir, "p.parquet")
		_, err = Minutes.ParquetGoMerge(fx.Parquets, dst)
		require.NoError(t, err)
		merged["parquet-go"] = readMinutesParquet(t, dst)
		for system, got := range merged {
			require.Equal(t, multiset(want), multiset(got), "%s: %s", layout, system)
			require.True(t, slices.IsSortedFunc(got, compareTuples), "%s: %s: sorted", layout, system)
		}
		// No two rows tie at this size: writeout's merge is the generated order itself.
		require.Equal(t, want, merged["writeout"], "%s: writeout", layout)

		dst = filepath.Join(dir, string(layout)+"-w-rollup.seg")
		_, err = Minutes.WriteoutRollupHour(bg, fx.Segs, dst, columns.CompressionZstd)
		require.NoError(t, err)
		require.Equal(t, wantRollup, readSegmentTuples(t, dst), "%s: writeout rollup", layout)
		dst = filepath.Join(dir, "d-rollup.parquet")
		_, err = db.Exec(bg, Minutes.RollupSQL(fx.Parquets, dst))
		require.NoError(t, err)
		require.Equal(t, wantRollup, readMinutesParquet(t, dst), "%s: duckdb rollup", layout)
	}
	t.Logf("%d rows; rollup-hour %d groups", n, len(wantRollup))
}
