package merger

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
)

// TestMergeOracle: for seeded random inputs, Merge equals the naive merge, and every value's
// bitmap holds exactly the rows holding the value.
func TestMergeOracle(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WRITEOUT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	t.Logf("seed %d (set WRITEOUT_SEED to repeat)", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	cases := 60
	if testing.Short() || raceEnabled {
		cases = 12
	}
	grans := []columns.Granularity{columns.GranularityNone, columns.GranularitySecond, columns.GranularityMinute, columns.GranularityHour, columns.GranularityDay}
	defer func() { batchRows = defaultBatchRows }()
	for c := 0; c < cases; c++ {
		batchRows = []int{defaultBatchRows, 4096, 64, 7}[rng.IntN(4)] // batches full mid-window, mid-group
		nIn := 1 + rng.IntN(20)
		rc := newRandCase(rng, nIn, 1+rng.IntN(300))
		dir := t.TempDir()
		segs := make([]*columns.Segment, nIn)
		for i := range segs {
			segs[i] = writeSegment(t, dir, fmt.Sprintf("in%02d.seg", i), rc.Schemas[i], rc.Rows[i])
		}
		opts := Options{
			Rollup:      rng.IntN(2) == 0,
			Granularity: grans[rng.IntN(len(grans))],
			Durability:  medium.Durability{Sync: medium.SyncNone},
			Parallelism: 1 + rng.IntN(3),
			ChunkRows:   []int{0, 7, 64}[rng.IntN(3)],
		}
		if rng.IntN(4) == 0 {
			opts.MaxFanIn = 2 + rng.IntN(4)
		}
		if rng.IntN(3) == 0 {
			opts.Medium = medium.NewHeap()
		}
		union, err := outputSchema(rc.Schemas, opts.inputName, nil, opts.Rollup, opts.Granularity)
		require.NoError(t, err)
		if rng.IntN(3) == 0 { // a random order, sometimes dropping dimensions
			for _, k := range rng.Perm(len(union.Dimensions)) {
				if rng.IntN(5) > 0 {
					opts.Dimensions = append(opts.Dimensions, union.Dimensions[k].Name)
				}
			}
			if opts.Dimensions == nil {
				opts.Dimensions = []string{}
			}
		}
		out, err := outputSchema(rc.Schemas, opts.inputName, opts.Dimensions, opts.Rollup, opts.Granularity)
		require.NoError(t, err)
		dst := filepath.Join(dir, "out.seg")
		res, err := Merge(t.Context(), segs, dst, opts)
		require.NoError(t, err, "case %d", c)
		merged := openSeg(t, dst)
		require.True(t, out.Equal(merged.Schema()), "case %d: schema %+v, want %+v", c, merged.Schema(), out)
		want := oracleMerge(rc.Schemas, rc.Rows, out)
		got := readRows(t, merged)
		requireRowsEqual(t, want, got, opts.Rollup && opts.MaxFanIn > 0,
			fmt.Sprintf("case %d: %d inputs rollup=%v gran=%v fanin=%d dims=%v", c, nIn, opts.Rollup, opts.Granularity, opts.MaxFanIn, opts.Dimensions))
		checkBitmaps(t, merged)
		var in int64
		for _, r := range rc.Rows {
			in += int64(len(r))
		}
		require.Equal(t, in, res.RowsIn)
		require.Equal(t, int64(len(want)), res.RowsOut)
		require.Equal(t, merged.Info().Size, res.Bytes)
		for _, name := range dirNames(t, dir) {
			require.Regexp(t, `^(in\d\d|out)\.seg$`, name, "case %d: leftover", c)
		}
	}
}

func TestMergeSchemaConflicts(t *testing.T) {
	dir := t.TempDir()
	a := writeSegment(t, dir, "a.seg", columns.Schema{Metrics: []columns.Metric{{Name: "m", Aggregator: agg.LongSum}}}, nil)
	b := writeSegment(t, dir, "b.seg", columns.Schema{Metrics: []columns.Metric{{Name: "m", Aggregator: agg.DoubleSum}}}, nil)
	_, err := Merge(t.Context(), []*columns.Segment{a, b}, filepath.Join(dir, "o.seg"), Options{InputNames: []string{"A.seg", "B.seg"}})
	require.ErrorIs(t, err, ErrSchemaConflict)
	require.ErrorContains(t, err, `metric "m" is longSum(long) in A.seg and doubleSum(double) in B.seg`)

	c := writeSegment(t, dir, "c.seg", columns.Schema{Metrics: []columns.Metric{{Name: "m", Aggregator: agg.LongMax}}}, nil)
	_, err = Merge(t.Context(), []*columns.Segment{a, c}, filepath.Join(dir, "o.seg"), Options{})
	require.ErrorIs(t, err, ErrSchemaConflict)
	// Unnamed by the options, inputs opened from files are named by their paths.
	require.ErrorContains(t, err, `metric "m" is longSum(long) in `+filepath.Join(dir, "a.seg")+` and longMax(long) in `+filepath.Join(dir, "c.seg"))

	d := writeSegment(t, dir, "d.seg", columns.Schema{Dimensions: []columns.Dimension{{Name: "m"}}}, nil)
	_, err = Merge(t.Context(), []*columns.Segment{a, d}, filepath.Join(dir, "o.seg"), Options{})
	require.ErrorIs(t, err, ErrSchemaConflict)

	e := writeSegment(t, dir, "e.seg", columns.Schema{Dimensions: []columns.Dimension{{Name: "p"}}}, nil)
	f := writeSegment(t, dir, "f.seg", columns.Schema{Dimensions: []columns.Dimension{{Name: "p", Raw: true}}}, nil)
	_, err = Merge(t.Context(), []*columns.Segment{e, f}, filepath.Join(dir, "o.seg"), Options{})
	require.ErrorIs(t, err, ErrSchemaConflict)
	require.ErrorContains(t, err, `dimension "p" is dictionary-encoded in `+filepath.Join(dir, "e.seg")+` and raw in `+filepath.Join(dir, "f.seg"))

	_, err = Merge(t.Context(), []*columns.Segment{e}, filepath.Join(dir, "o.seg"), Options{Dimensions: []string{"nope"}})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = Merge(t.Context(), nil, filepath.Join(dir, "o.seg"), Options{})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = Merge(t.Context(), []*columns.Segment{e}, filepath.Join(dir, "o.seg"), Options{MaxFanIn: 1})
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, []string{"a.seg", "b.seg", "c.seg", "d.seg", "e.seg", "f.seg"}, dirNames(t, dir))
}
