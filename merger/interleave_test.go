package merger

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
)

// TestMergeInterleave merges inputs that interleave row by row, of one to five dimensions,
// with many rows of equal keys within and across inputs, through the step of windows (interleave.go) and through the heap
// loop alone: the same bytes, and the oracle's rows in its order (equal keys by input, then by
// row: the metrics tell the rows apart).
func TestMergeInterleave(t *testing.T) {
	allDims := []columns.Dimension{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}, {Name: "e"}}
	metrics := []columns.Metric{
		{Name: "n", Field: "n", Type: columns.MetricLong, Aggregator: agg.LongSum},
		{Name: "x", Field: "x", Type: columns.MetricDouble, Aggregator: agg.DoubleSum},
	}
	const hour = 3600_000
	savedStep := ilStepRows
	defer func() { batchRows, ilKeyBits, ilStepRows = defaultBatchRows, 64, savedStep }()
	for c := range 12 {
		batchRows = []int{defaultBatchRows, 100, 7}[c%3] // steps that fill batches
		ilStepRows = []int{savedStep, 3, 37}[c/3%3]      // steps bounded inside the windows
		// Keys of fewer bits: steps that stop at the last time their keys hold (0: each step
		// takes the rows of the heads' least time only).
		ilKeyBits = []int{64, 64, 0, 31}[c%4]
		rng := rand.New(rand.NewPCG(uint64(c), 11))
		// One to five dimensions: a step reads the ids off its keys three dimensions a pass.
		dims := allDims[:1+(c+2)%5]
		dir := t.TempDir()
		nIn := 2 + rng.IntN(6)
		byKey := c%4 != 3 // else sorted by time alone: groups re-sort (the heap loop takes those)
		staggered := c%5 == 2
		var schemas []columns.Schema
		var rows [][]columns.Row
		var segs []*columns.Segment
		for i := range nIn {
			s := columns.Schema{Granularity: columns.GranularityNone, Metrics: metrics}
			for d, dim := range dims {
				if d == 0 || i != 1 || c%3 != 0 { // input 1 lacks b and c in a third of the cases
					s.Dimensions = append(s.Dimensions, dim)
				}
			}
			n := 1500 + rng.IntN(5000)
			if i == nIn-1 && c%2 == 1 {
				n = 1 + rng.IntN(20) // a short input: it is done early, the others go on
			}
			rs := make([]columns.Row, n)
			for r := range rs {
				// Few distinct times and values: many equal keys, within and across inputs.
				tm := 1_700_000_000_000 + rng.Int64N(int64(40+c*200))*hour/8
				if staggered {
					// Input i starts later than input i+1: a lazy cursor's stand-in (its first
					// time, null dimensions) ties rows of inputs after it, which must wait.
					tm = 1_700_000_000_000 + int64(nIn-1-i)*20*hour/8 + rng.Int64N(60)*hour/8
				}
				row := columns.Row{Time: tm,
					Dims: make([][]string, len(s.Dimensions)), Metrics: make([]columns.Value, len(metrics))}
				for d := range s.Dimensions {
					if rng.IntN(6) > 0 && (!staggered || rng.IntN(2) == 0) {
						row.Dims[d] = []string{fmt.Sprintf("v%d", rng.IntN([]int{2, 3, 40, 5, 300}[d]))}
					}
				}
				row.Metrics[0].Long = int64(i)<<32 | int64(r)
				row.Metrics[1].Double = float64(r) + float64(i)/8
				// Input 0 holds null values in a third of the cases: its metric is not
				// plain, and its rows are no step's values to pick (numTask.gather).
				if i == 0 && c%3 == 1 && r%5 == 0 {
					row.Metrics[0] = columns.Value{Null: true}
				}
				rs[r] = row
			}
			slices.SortStableFunc(rs, func(x, y columns.Row) int {
				if !byKey {
					return cmp.Compare(x.Time, y.Time)
				}
				return cmpOracle(x, y)
			})
			schemas, rows = append(schemas, s), append(rows, rs)
			segs = append(segs, writeSegment(t, dir, fmt.Sprintf("in%d.seg", i), s, rs))
		}
		opts := Options{Durability: medium.Durability{Sync: medium.SyncNone},
			Parallelism: 1 + rng.IntN(3), ChunkRows: []int{0, 64, 1000}[rng.IntN(3)]}
		if c == 4 {
			opts.Granularity = columns.GranularityHour // truncation makes groups of several times
		}
		if c == 7 {
			opts.MaxFanIn = 2
		}
		name := fmt.Sprintf("case %d: %d inputs, by key %v", c, nIn, byKey)

		before, gathered := interleaveRuns.Load(), interleaveGathered.Load()
		on := filepath.Join(dir, "on.seg")
		_, err := Merge(t.Context(), segs, on, opts)
		require.NoError(t, err, name)
		if byKey && opts.Granularity == columns.GranularityNone { // else groups re-sort
			require.Greater(t, interleaveRuns.Load(), before, "%s: no step merged runs of several inputs", name)
			require.Greater(t, interleaveGathered.Load(), gathered, "%s: no metric picked a step's values", name)
		}
		off := filepath.Join(dir, "off.seg")
		require.NoError(t, mergeWithout(t, &interleaveOff, segs, off, opts), name)
		requireSameFiles(t, off, on, name)

		out, err := outputSchema(schemas, opts.inputName, nil, false, opts.Granularity)
		require.NoError(t, err)
		requireRowsEqual(t, oracleMerge(schemas, rows, out), readRows(t, openSeg(t, on)), false, name)
	}
}

// TestMergeInterleaveIDsFillKey: four dimensions of 65,536 ids each pack into all 64 bits of
// a step's key, which then holds no time (every row of a step shares one): the step's rows
// are those the heap loop gives, with their times.
func TestMergeInterleaveIDsFillKey(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 131,070 rows of four dimensions of 65,535 values")
	}
	s := columns.Schema{Granularity: columns.GranularityNone,
		Dimensions: []columns.Dimension{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}},
		Metrics:    []columns.Metric{{Name: "n", Field: "n", Type: columns.MetricLong, Aggregator: agg.LongSum}}}
	dir := t.TempDir()
	const per = 65_535 // values of a dimension, each input holding every one: with null, 65,536 ids
	var segs []*columns.Segment
	var rows [][]columns.Row
	for i := range 2 {
		rs := make([]columns.Row, per)
		for r := range rs {
			v := func(d int) []string { return []string{fmt.Sprintf("%c%05d", 'a'+d, (r*(d+1)+i)%per)} }
			rs[r] = columns.Row{Time: int64(r / 7 * 1000), Dims: [][]string{v(0), v(1), v(2), v(3)},
				Metrics: []columns.Value{{Long: int64(i)<<32 | int64(r)}}}
		}
		slices.SortStableFunc(rs, cmpOracle)
		rows = append(rows, rs)
		segs = append(segs, writeSegment(t, dir, fmt.Sprintf("in%d.seg", i), s, rs))
	}
	opts := Options{Durability: medium.Durability{Sync: medium.SyncNone}}
	before := interleaveRows.Load()
	on := filepath.Join(dir, "on.seg")
	_, err := Merge(t.Context(), segs, on, opts)
	require.NoError(t, err)
	require.Greater(t, interleaveRows.Load(), before, "no step took a row")
	off := filepath.Join(dir, "off.seg")
	require.NoError(t, mergeWithout(t, &interleaveOff, segs, off, opts))
	requireSameFiles(t, off, on, "ids of 64 bits")
	out, err := outputSchema([]columns.Schema{s, s}, opts.inputName, nil, false, opts.Granularity)
	require.NoError(t, err)
	requireRowsEqual(t, oracleMerge([]columns.Schema{s, s}, rows, out), readRows(t, openSeg(t, on)), false, "ids of 64 bits")
}

func TestMerge2(t *testing.T) {
	a := []ilItem{{5, 0}, {6, 1}, {6, 2}, {1 << 63, 3}}
	b := []ilItem{{4, 10}, {6, 11}, {7, 12}, {1<<63 - 1, 13}, {^uint64(0), 14}}
	dst := make([]ilItem, len(a)+len(b))
	merge2(dst, a, b)
	var refs []uint64
	for _, it := range dst {
		refs = append(refs, it.ref)
	}
	// Equal keys: a's first. Keys compare as unsigned words.
	require.Equal(t, []uint64{10, 0, 1, 2, 11, 12, 13, 3, 14}, refs)
	merge2(dst[:len(a)], a, nil)
	require.Equal(t, a, dst[:len(a)])
	merge2(dst[:len(b)], nil, b)
	require.Equal(t, b, dst[:len(b)])

	// Runs of few distinct keys, of every length to 40 each: a stable merge's order (a's rows
	// first on equal keys), whichever end a run runs out at.
	rng := rand.New(rand.NewPCG(2, 0))
	run := func(n int, x uint64) []ilItem {
		s := make([]ilItem, n)
		k := uint64(rng.IntN(3))
		for i := range s {
			k += uint64(rng.IntN(3))
			s[i] = ilItem{key: k, ref: x<<32 | uint64(i)}
		}
		return s
	}
	for na := range 40 {
		for nb := range 40 {
			a, b := run(na, 0), run(nb, 1)
			want := append(make([]ilItem, 0, na+nb), slices.Concat(a, b)...)
			slices.SortStableFunc(want, func(x, y ilItem) int { return cmp.Compare(x.key, y.key) })
			got := make([]ilItem, na+nb)
			merge2(got, a, b)
			require.Equal(t, want, got, "runs of %d and %d", na, nb)
			clear(got)
			merge2Apart(got, a, b)
			require.Equal(t, want, got, "runs of %d and %d, merged from both ends", na, nb)
		}
	}
}

// TestInterleavesTwoWindows: a step of windows needs two loaded windows or more. Inputs that
// follow one another in time hold one window at a time (the others wait as stand-ins); its
// rows go over in runs by the heap loop, not one by one through steps, however hot the
// window (packed keys).
func TestInterleavesTwoWindows(t *testing.T) {
	loaded := func() *cursor { return &cursor{packState: packState{packed: true}} }
	lazy := func() *cursor { return &cursor{window: window{lazy: true}} }
	require.False(t, interleaves([]*cursor{loaded(), lazy(), lazy()}))
	require.False(t, interleaves([]*cursor{lazy(), lazy(), loaded()}))
	require.True(t, interleaves([]*cursor{loaded(), lazy(), loaded()}))
	require.False(t, interleaves([]*cursor{loaded(), {}}), "a window without packed keys")
	require.False(t, interleaves([]*cursor{loaded()}))

	// Inputs in time order, rows of distinct times and keys: no step takes a row.
	dir := t.TempDir()
	s := columns.Schema{Dimensions: []columns.Dimension{{Name: "a"}, {Name: "b"}},
		Metrics: []columns.Metric{{Name: "n", Aggregator: agg.LongSum}}}
	rng := rand.New(rand.NewPCG(3, 4))
	var segs []*columns.Segment
	const rows = 20_000
	for i := range 4 {
		rs := make([]columns.Row, rows)
		for r := range rs {
			rs[r] = columns.Row{Time: int64(i*rows + r), Dims: [][]string{{fmt.Sprintf("a%d", rng.IntN(50))}, {fmt.Sprintf("b%d", rng.IntN(500))}},
				Metrics: []columns.Value{{Long: int64(r)}}}
		}
		segs = append(segs, writeSegment(t, dir, fmt.Sprintf("in%d.seg", i), s, rs))
	}
	// Batches of 100 rows cut each window's run several times: each cut compares through
	// the window, which packs its keys after packAfter comparisons (then every later one).
	batchRows = 100
	defer func() { batchRows = defaultBatchRows }()
	before := interleaveRows.Load()
	res, err := Merge(t.Context(), segs, filepath.Join(dir, "out.seg"), Options{Durability: medium.Durability{Sync: medium.SyncNone}})
	require.NoError(t, err)
	require.Equal(t, int64(4*rows), res.RowsOut)
	require.Zero(t, interleaveRows.Load()-before, "rows of inputs in time order went through steps")
}
