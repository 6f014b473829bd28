package merger

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/fixture"
)

// cuts returns k random cut points of [0, n) (sorted, distinct, in (0, n)), plus 0 and n.
func cuts(rng *rand.Rand, n, k int) []int {
	set := map[int]bool{0: true, n: true}
	for i := 0; i < k && n > 1; i++ {
		set[1+rng.IntN(n-1)] = true
	}
	var out []int
	for c := range set {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// TestRowRangeOracle: inputs cut into random row ranges (pieces of one row, whole
// segments, several pieces of one segment in one merge) merge as the naive merge of exactly
// those rows, and a piece's dictionaries hold only the values its rows hold.
func TestRowRangeOracle(t *testing.T) {
	seed := fixture.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 37))
	cases := 40
	if testing.Short() || raceEnabled {
		cases = 10
	}
	grans := []columns.Granularity{columns.GranularityNone, columns.GranularityMinute, columns.GranularityDay}
	for c := 0; c < cases; c++ {
		nIn := 1 + rng.IntN(6)
		rc := newRandCase(rng, nIn, 1+rng.IntN(400))
		dir := t.TempDir()
		var inputs []Input
		var schemas []columns.Schema
		var rows [][]columns.Row
		for i := range nIn {
			path := filepath.Join(dir, fmt.Sprintf("in%02d.seg", i))
			seg := writeSegment(t, dir, filepath.Base(path), rc.Schemas[i], rc.Rows[i])
			held := readRows(t, seg)
			if len(held) == 0 {
				continue
			}
			cs := cuts(rng, len(held), rng.IntN(4))
			for k := 0; k+1 < len(cs); k++ {
				if rng.IntN(4) == 0 && len(cs) > 2 {
					continue // a range left out
				}
				lo, hi := cs[k], cs[k+1]
				inputs = append(inputs, RowRange(FileInput(path), lo, hi))
				schemas = append(schemas, rc.Schemas[i])
				rows = append(rows, held[lo:hi])
			}
		}
		if len(inputs) == 0 {
			continue
		}
		opts := Options{
			Rollup:      rng.IntN(2) == 0,
			Granularity: grans[rng.IntN(len(grans))],
			Durability:  medium.Durability{Sync: medium.SyncNone},
			Parallelism: 1 + rng.IntN(3),
		}
		if rng.IntN(4) == 0 {
			opts.MaxFanIn = 2 + rng.IntN(3)
		}
		out, err := outputSchema(schemas, opts.inputName, nil, opts.Rollup, opts.Granularity)
		require.NoError(t, err)
		dst := filepath.Join(dir, "out.seg")
		res, err := MergeInputs(t.Context(), inputs, dst, opts)
		msg := fmt.Sprintf("case %d (seed %d): %d pieces rollup=%v gran=%v fanin=%d", c, seed, len(inputs), opts.Rollup, opts.Granularity, opts.MaxFanIn)
		require.NoError(t, err, msg)
		merged := openSeg(t, dst)
		require.True(t, res.Schema.Equal(merged.Schema()), "%s: Result.Schema %+v, the footer's %+v", msg, res.Schema, merged.Schema())
		want := oracleMerge(schemas, rows, out)
		got := readRows(t, merged)
		requireRowsEqual(t, want, got, opts.Rollup && opts.MaxFanIn > 0, msg)
		checkBitmaps(t, merged)
		requireDictsUsed(t, merged, got, msg)
		var in int64
		for _, r := range rows {
			in += int64(len(r))
		}
		require.Equal(t, in, res.RowsIn, msg)
	}
}

// requireDictsUsed requires every dictionary dimension of seg to hold exactly the values its
// rows hold (null when a row is null).
func requireDictsUsed(t *testing.T, seg *columns.Segment, rows []columns.Row, msg string) {
	t.Helper()
	for d, dim := range seg.Schema().Dimensions {
		if dim.Raw {
			continue
		}
		col, err := seg.Dim(dim.Name)
		require.NoError(t, err, msg)
		held := map[string]bool{}
		null := false
		for _, r := range rows {
			if r.Dims[d] == nil {
				null = true
			}
			for _, v := range r.Dims[d] {
				held[v] = true
			}
		}
		n := len(held)
		if null {
			n++
		}
		require.Equal(t, n, col.Cardinality(), "%s: dimension %s: cardinality", msg, dim.Name)
		require.Equal(t, null, col.HasNull(), "%s: dimension %s: null", msg, dim.Name)
	}
}

// TestRowRangeWholeIdentical: a segment merged whole and merged as its pieces (cut at random
// rows and at chunk boundaries) gives the same bytes, rolled up or not.
func TestRowRangeWholeIdentical(t *testing.T) {
	dir := t.TempDir()
	rows := 30_000
	if testing.Short() || raceEnabled {
		rows = 9_000 // still past two chunks of 4096 rows
	}
	seg := fixture.GenSegment(t, dir, 7, rows)
	path := seg.Name()
	rng := rand.New(rand.NewPCG(fixture.Seed(t), 3))
	for _, rollup := range []bool{false, true} {
		opts := Options{Rollup: rollup, Granularity: columns.GranularityHour, Durability: medium.Durability{Sync: medium.SyncNone}}
		whole := filepath.Join(dir, fmt.Sprintf("whole-%v.seg", rollup))
		_, err := MergeInputs(t.Context(), []Input{FileInput(path)}, whole, opts)
		require.NoError(t, err)
		for _, cs := range [][]int{cuts(rng, seg.Rows(), 1), cuts(rng, seg.Rows(), 9), {0, 1, 2, 4096, 8192, 8193, seg.Rows() - 1, seg.Rows()}} {
			var ins []Input
			for k := 0; k+1 < len(cs); k++ {
				ins = append(ins, RowRange(FileInput(path), cs[k], cs[k+1]))
			}
			pieces := filepath.Join(dir, fmt.Sprintf("pieces-%v-%d.seg", rollup, len(ins)))
			_, err := MergeInputs(t.Context(), ins, pieces, opts)
			require.NoError(t, err)
			requireSameFiles(t, whole, pieces, fmt.Sprintf("rollup %v, cuts %v", rollup, cs))
		}
	}
}

func TestRowRangeInvalid(t *testing.T) {
	dir := t.TempDir()
	seg := fixture.GenSegment(t, dir, 7, 100)
	for _, r := range [][2]int{{-1, 5}, {5, 5}, {6, 5}, {0, 101}} {
		_, err := MergeInputs(t.Context(), []Input{RowRange(FileInput(seg.Name()), r[0], r[1])}, filepath.Join(dir, "o.seg"), Options{})
		require.ErrorIs(t, err, ErrInvalid, "%v", r)
		require.ErrorContains(t, err, fmt.Sprintf("rows [%d, %d) of a segment of 100 rows", r[0], r[1]))
	}
	require.NoFileExists(t, filepath.Join(dir, "o.seg"))
}
