package merger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
)

// TestMergeStreamedGroups: a rollup to the hour whose hours hold far more rows than a window
// may (maxWindowRows) loads no window of more rows than that, whatever the layout of its
// inputs (one after another, sharing an hour, or interleaved over the same hours; after hours
// of a few rows or not), and writes
// the bytes of the same rollup with windows of whole hours and of the rollup without
// pre-aggregation; its rows are those of the naive merge (where it models the metrics). The
// streamed groups' keys are read again by the metric tasks from their first rows or past a
// few windows, or stay in memory; hours of more distinct keys than a window's rows load their
// slots a page at a time.
func TestMergeStreamedGroups(t *testing.T) {
	metrics := []columns.Metric{
		{Name: "rows", Aggregator: agg.Count},
		{Name: "sum", Aggregator: agg.LongSum},
		{Name: "min", Aggregator: agg.LongMin},
		{Name: "max", Aggregator: agg.LongMax},
		{Name: "first", Aggregator: agg.LongFirst},
		{Name: "last", Aggregator: agg.LongLast},
	}
	for i := range metrics {
		metrics[i].Type, metrics[i].Field = columns.MetricLong, metrics[i].Name
	}
	dims := []columns.Dimension{{Name: "a"}, {Name: "b"}}
	const hour = 3600_000
	const bound = 500
	saved, savedMem, savedNarrow := maxWindowRows, maxMemGroupRows, narrowSlots
	savedPreloads, savedAheads, savedStep := maxPreloads, maxAheads, ilStepRows
	t.Cleanup(func() {
		maxWindowRows, maxMemGroupRows, narrowSlots = saved, savedMem, savedNarrow
		maxPreloads, maxAheads, ilStepRows = savedPreloads, savedAheads, savedStep
	})
	for c := range 6 {
		seed := uint64(c)
		rng := rand.New(rand.NewPCG(seed, 34))
		dir := t.TempDir()
		nIn := 1 + c%3
		interleaved := c >= 3
		ms := metrics
		if c%2 == 0 {
			ms = metrics[:4] // no first or last: the oracle below does not model them
		}
		var schemas []columns.Schema
		var rows [][]columns.Row
		var segs []*columns.Segment
		for i := range nIn {
			s := columns.Schema{Granularity: columns.GranularityNone, Dimensions: dims, Metrics: ms}
			n := 20*bound + rng.IntN(10*bound) // two or three hours of many windows each
			rs := make([]columns.Row, n)
			for r := range rs {
				tm := int64(1_700_000_000_000) + rng.Int64N(2*hour+hour/2)
				if !interleaved {
					tm += int64(i) * 2 * hour // a shared hour at the edges
				}
				if c%2 == 1 && rng.IntN(10) == 0 {
					// Hours of a few rows before the full ones: windows of small groups, then
					// one that stops before a full hour (the next window streams it).
					tm = int64(1_700_000_000_000) - rng.Int64N(40*hour)
				}
				row := columns.Row{Time: tm, Dims: make([][]string, len(dims)), Metrics: make([]columns.Value, len(ms))}
				for d := range dims {
					if rng.IntN(16) > 0 {
						row.Dims[d] = []string{fmt.Sprintf("v%d", rng.IntN([]int{7, []int{300, 60}[c%2]}[d]))}
					}
				}
				for m, met := range ms {
					switch {
					case met.Aggregator == agg.Count:
						row.Metrics[m].Long = 1 + rng.Int64N(3)
					case c%2 == 1 && rng.IntN(6) == 0:
						row.Metrics[m].Null = true
					default:
						row.Metrics[m].Long = rng.Int64N(2001) - 1000
					}
				}
				rs[r] = row
			}
			slices.SortStableFunc(rs, func(x, y columns.Row) int { return cmp.Compare(x.Time, y.Time) })
			schemas, rows = append(schemas, s), append(rows, rs)
			segs = append(segs, writeSegment(t, dir, fmt.Sprintf("in%d.seg", i), s, rs))
		}
		opts := Options{Rollup: true, Granularity: columns.GranularityHour, Durability: medium.Durability{Sync: medium.SyncNone},
			Parallelism: 1 + c%3, ChunkRows: []int{0, 64, 1000}[c%3]}
		if c == 5 {
			opts.MaxFanIn = 2 // phases: intermediate segments rolled up, then merged
		}
		name := fmt.Sprintf("case %d (seed %d): %d inputs, interleaved %v, fan-in %d", c, seed, nIn, interleaved, opts.MaxFanIn)

		maxWindowRows = bound
		ilStepRows = []int{savedStep, 7}[c%2]               // steps of the whole windows, or of a few slots
		maxMemGroupRows = []int{0, 3 * bound, 1 << 30}[c%3] // keys read again from the start, past a few windows, never
		narrowSlots = []int{savedNarrow, 0}[c/3%2]          // the slots of groups kept in memory as uint16, or int32
		if c == 4 {
			med := medium.NewHeap() // the merge's scratch on the Go heap
			t.Cleanup(func() { require.NoError(t, med.Close()) })
			opts.Medium = med
		}
		windowRowsPeak.v.Store(0)
		before, rekeyed, paged := preAggGroups.Load(), rekeyedGroups.Load(), pagedGroups.Load()
		ahead, taken, slotSteps := aheadGroups.Load(), preloadsTaken.Load(), interleaveSlotRows.Load()
		fromStart, rowsRead, early := rekeyedFromStart.Load(), rowsReadGroups.Load(), earlyPreloads.Load()
		streamed := filepath.Join(dir, "streamed.seg")
		_, err := Merge(t.Context(), segs, streamed, opts)
		require.NoError(t, err, name)
		// Inputs over the same hours (or sharing one) page their slots through steps of
		// windows (see slotsInterleave); the heap loop alone writes the same bytes.
		require.Equal(t, nIn > 1, interleaveSlotRows.Load() > slotSteps, "%s: slots interleaved", name)
		if nIn > 1 {
			heapOnly := filepath.Join(dir, "heaponly.seg")
			require.NoError(t, mergeWithout(t, &interleaveOff, segs, heapOnly, opts), name)
			requireSameFiles(t, heapOnly, streamed, name)
		}
		require.Greater(t, preAggGroups.Load(), before, "%s: no group pre-aggregated", name)
		// Every group's rows' slots went back once every task had combined them.
		require.Equal(t, preAggGroups.Load()-before, rowsReadGroups.Load()-rowsRead, "%s: groups whose rows went back once read", name)
		// A cursor's first group keyed again keeps its keys until it grows past the bound
		// (a few windows, or none), and its next ones keep none from their first rows.
		require.Equal(t, c%3 != 2, rekeyedFromStart.Load() > fromStart, "%s: groups keyed again from the start after one was", name)
		require.Greater(t, aheadGroups.Load(), ahead, "%s: no group streamed ahead", name)
		require.Greater(t, preloadsTaken.Load(), taken, "%s: no group combined ahead", name)
		require.Greater(t, earlyPreloads.Load(), early, "%s: no group combined as soon as streamed ahead", name)

		// Without preloads the tasks combine every group, the first task a group keyed again
		// for every task (a claim) unless claims are off, and with one preload at a time some;
		// without groups streamed ahead each streams when the merge reaches it.
		for _, v := range []struct {
			preloads int
			claims   bool
		}{{0, true}, {0, false}, {1, true}} {
			maxPreloads, claimsOff = v.preloads, !v.claims
			taken, claimed := preloadsTaken.Load(), claimsTaken.Load()
			noPre := filepath.Join(dir, fmt.Sprintf("preloads%d-%v.seg", v.preloads, v.claims))
			_, err = Merge(t.Context(), segs, noPre, opts)
			maxPreloads, claimsOff = savedPreloads, false
			require.NoError(t, err, name)
			require.Equal(t, v.preloads > 0, preloadsTaken.Load() > taken, "%s: preloads at most %d", name, v.preloads)
			if v.preloads == 0 {
				// Every group keyed again is claimed, one claim taken by each long task.
				require.Equal(t, v.claims && c%3 != 2, claimsTaken.Load() > claimed, "%s: claims %v", name, v.claims)
			}
			requireSameFiles(t, noPre, streamed, name)
		}
		maxAheads = 0
		ahead = aheadGroups.Load()
		noAhead := filepath.Join(dir, "noahead.seg")
		_, err = Merge(t.Context(), segs, noAhead, opts)
		maxAheads = savedAheads
		require.NoError(t, err, name)
		require.Equal(t, ahead, aheadGroups.Load(), "%s: groups streamed ahead", name)
		requireSameFiles(t, noAhead, streamed, name)
		require.Equal(t, c%3 != 2, rekeyedGroups.Load() > rekeyed, "%s: groups keyed again", name)
		// Even cases' hours hold more distinct keys than a window's rows: their slots load a
		// page at a time.
		require.Equal(t, c%2 == 0, pagedGroups.Load() > paged, "%s: groups paged", name)
		require.Positive(t, windowRowsPeak.v.Load(), name)
		require.LessOrEqual(t, windowRowsPeak.v.Load(), int64(bound), "%s: a window loaded more rows than the bound", name)

		maxWindowRows, maxMemGroupRows = math.MaxInt, savedMem // windows of whole hours
		windowRowsPeak.v.Store(0)
		whole := filepath.Join(dir, "whole.seg")
		_, err = Merge(t.Context(), segs, whole, opts)
		require.NoError(t, err, name)
		require.Greater(t, windowRowsPeak.v.Load(), int64(4*bound), "%s: the reference loads whole hours", name)
		requireSameFiles(t, whole, streamed, name)

		off := filepath.Join(dir, "off.seg")
		require.NoError(t, mergeWithout(t, &preAggOff, segs, off, opts), name)
		requireSameFiles(t, off, streamed, name)

		if c%2 == 1 {
			continue
		}
		out, err := outputSchema(schemas, opts.inputName, nil, true, columns.GranularityHour)
		require.NoError(t, err)
		requireRowsEqual(t, oracleMerge(schemas, rows, out), readRows(t, openSeg(t, streamed)), false, name)
	}
}

// A group combined ahead that fails fails the merge with the preload's error, whichever task
// takes it, and the merge leaves no output; a merge cancelled while groups are combined ahead
// stops too.
func TestMergePreloadFailure(t *testing.T) {
	saved, savedMem := maxWindowRows, maxMemGroupRows
	t.Cleanup(func() { maxWindowRows, maxMemGroupRows, preloadFault = saved, savedMem, nil })
	maxWindowRows, maxMemGroupRows = 200, 0 // every hour streamed, its keys read again
	ms := []columns.Metric{{Name: "sum", Aggregator: agg.LongSum}, {Name: "max", Aggregator: agg.LongMax}}
	for i := range ms {
		ms[i].Type, ms[i].Field = columns.MetricLong, ms[i].Name
	}
	s := columns.Schema{Granularity: columns.GranularityNone, Dimensions: []columns.Dimension{{Name: "a"}}, Metrics: ms}
	rng := rand.New(rand.NewPCG(7, 7))
	rs := make([]columns.Row, 5000)
	for r := range rs {
		rs[r] = columns.Row{Time: 1_700_000_000_000 + int64(r)*3_000, Dims: [][]string{{fmt.Sprintf("v%d", rng.IntN(400))}},
			Metrics: []columns.Value{{Long: rng.Int64N(100)}, {Long: rng.Int64N(100)}}}
	}
	dir := t.TempDir()
	seg := writeSegment(t, dir, "in.seg", s, rs)
	opts := Options{Rollup: true, Granularity: columns.GranularityHour, Durability: medium.Durability{Sync: medium.SyncNone}}

	boom := errors.New("boom")
	var calls atomic.Int32
	preloadFault = func(*groupAgg) error {
		if calls.Add(1) == 2 {
			return boom
		}
		return nil
	}
	out := t.TempDir()
	_, err := Merge(t.Context(), []*columns.Segment{seg}, filepath.Join(out, "o.seg"), opts)
	require.ErrorIs(t, err, boom)
	require.Empty(t, dirNames(t, out))

	ctx, cancel := context.WithCancel(t.Context())
	preloadFault = func(*groupAgg) error {
		cancel()
		return nil
	}
	_, err = Merge(ctx, []*columns.Segment{seg}, filepath.Join(out, "o.seg"), opts)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, dirNames(t, out))
}

// TestMergeSlotTables: hours of 30,000 distinct keys have slot tables past 64 KiB, mapped
// outside the heap. Under a budget of 1 GiB they fit their share: no task gives their pages
// back, and tables pass from group to group, so that the merge makes no more of them than it
// holds at once, however many hours it reads. Under the smallest budget they do not fit: as
// its rows go out, a task gives the pages of the slots below them back. Either way the output
// is the same as without pre-aggregation.
func TestMergeSlotTables(t *testing.T) {
	saved := maxWindowRows
	t.Cleanup(func() { maxWindowRows = saved })
	maxWindowRows = 1000
	ms := []columns.Metric{{Name: "sum", Aggregator: agg.LongSum}, {Name: "min", Aggregator: agg.LongMin}, {Name: "last", Aggregator: agg.LongLast}}
	for i := range ms {
		ms[i].Type, ms[i].Field = columns.MetricLong, ms[i].Name
	}
	s := columns.Schema{Granularity: columns.GranularityNone, Dimensions: []columns.Dimension{{Name: "a"}, {Name: "b"}}, Metrics: ms}
	rng := rand.New(rand.NewPCG(9, 9))
	dir := t.TempDir()
	const inputs, hours, hourRows = 2, 8, 60_000
	var segs []*columns.Segment
	for i := range inputs {
		rs := make([]columns.Row, hours*hourRows)
		for r := range rs {
			k := rng.IntN(30_000)
			rs[r] = columns.Row{Time: 1_700_000_000_000 + int64(r)*3600_000/hourRows, Dims: [][]string{{fmt.Sprintf("a%d", k%300)}, {fmt.Sprintf("b%d", k/300)}},
				Metrics: []columns.Value{{Long: rng.Int64N(1000)}, {Long: rng.Int64N(1000)}, {Long: rng.Int64N(1000)}}}
		}
		segs = append(segs, writeSegment(t, dir, fmt.Sprintf("in%d.seg", i), s, rs))
	}
	opts := Options{Rollup: true, Granularity: columns.GranularityHour, Durability: medium.Durability{Sync: medium.SyncNone}}
	off := filepath.Join(dir, "off.seg")
	require.NoError(t, mergeWithout(t, &preAggOff, segs, off, opts))

	drops, made := slotDrops.Load(), slotTablesMade.Load()
	fit := filepath.Join(dir, "fit.seg")
	opts.MemoryLimit = 1 << 30
	_, err := Merge(t.Context(), segs, fit, opts)
	require.NoError(t, err)
	require.Equal(t, drops, slotDrops.Load(), "slot tables' pages released under their share")
	// Held at once, a task's: a group of each input, one of each group combined ahead (up to
	// one an input and one more), and maxPreloads given back for the next.
	most := int64(len(ms) * (inputs + max(maxPreloads, inputs+1) + maxPreloads))
	require.LessOrEqual(t, slotTablesMade.Load()-made, most, "slot tables made anew for later groups")
	requireSameFiles(t, off, fit, "pre-aggregated, tables kept")

	opts.MemoryLimit = minMemoryLimit
	small := filepath.Join(dir, "small.seg")
	_, err = Merge(t.Context(), segs, small, opts)
	require.NoError(t, err)
	require.Greater(t, slotDrops.Load(), drops, "no slot table's pages released past their share")
	requireSameFiles(t, off, small, "pre-aggregated, tables released")
}

// TestPreloadsMost: up to one group a source and one more combined ahead, at least
// maxPreloads, none with preloads off; past maxPreloads only while the tables hold less than
// their share for it.
func TestPreloadsMost(t *testing.T) {
	saved := maxPreloads
	t.Cleanup(func() { maxPreloads = saved })
	for _, c := range []struct{ preloads, sources, most int }{{4, 1, 4}, {4, 3, 4}, {4, 5, 6}, {4, 40, 41}, {1, 2, 3}, {0, 5, 0}} {
		maxPreloads = c.preloads
		ps := preloads{sources: c.sources}
		require.Equal(t, c.most, ps.most(), "%d preloads, %d sources", c.preloads, c.sources)
	}
	m := tableMem{budget: 1 << 10, ahead: 4 << 10}
	m.add(4<<10 - 1)
	require.False(t, m.aheadFull())
	m.add(1)
	require.True(t, m.aheadFull())
}

// TestMergeSplitCombine: with Parallelism above 1, a group combined ahead while no other is
// combines on two goroutines, the first half of the long tasks on the preload's and the rest
// on a helper's, and the rollup writes the bytes of one combined on one goroutine
// (Parallelism 1); the tasks' errors come in row order (splitCombine.stop).
func TestMergeSplitCombine(t *testing.T) {
	saved, savedMem := maxWindowRows, maxMemGroupRows
	t.Cleanup(func() { maxWindowRows, maxMemGroupRows = saved, savedMem })
	ms := []columns.Metric{{Name: "sum", Aggregator: agg.LongSum}, {Name: "min", Aggregator: agg.LongMin},
		{Name: "max", Aggregator: agg.LongMax}}
	for i := range ms {
		ms[i].Type, ms[i].Field = columns.MetricLong, ms[i].Name
	}
	s := columns.Schema{Granularity: columns.GranularityNone, Dimensions: []columns.Dimension{{Name: "a"}, {Name: "b"}}, Metrics: ms}
	rng := rand.New(rand.NewPCG(8, 34))
	rs := make([]columns.Row, 3*slotsReadRows+5000) // hours of a few pieces each
	for r := range rs {
		rs[r] = columns.Row{Time: 1_700_000_000_000 + int64(r)*100, Dims: [][]string{{fmt.Sprintf("v%d", rng.IntN(40))}, {fmt.Sprintf("w%d", rng.IntN(300))}},
			Metrics: []columns.Value{{Long: rng.Int64N(1000)}, {Long: rng.Int64N(1000) - 500}, {Long: rng.Int64N(1 << 40)}}}
	}
	dir := t.TempDir()
	seg := writeSegment(t, dir, "in.seg", s, rs)
	for _, memRows := range []int{0, 1 << 30} { // keys read again, or slots kept in memory
		maxWindowRows, maxMemGroupRows = 2000, memRows
		var outs []string
		for _, par := range []int{1, 2} {
			opts := Options{Rollup: true, Granularity: columns.GranularityHour, Durability: medium.Durability{Sync: medium.SyncNone}, Parallelism: par}
			before := splitCombines.Load()
			out := filepath.Join(dir, fmt.Sprintf("out-%d-%d.seg", memRows, par))
			_, err := Merge(t.Context(), []*columns.Segment{seg}, out, opts)
			require.NoError(t, err)
			require.Equal(t, par > 1, splitCombines.Load() > before, "Parallelism %d, memory rows %d: groups split", par, memRows)
			outs = append(outs, out)
		}
		requireSameFiles(t, outs[0], outs[1], fmt.Sprintf("memory rows %d", memRows))
	}

	// The error of the first piece that failed; on one piece, the preload goroutine's (its
	// tasks come first).
	mine, helpers := errors.New("the preload's"), errors.New("the helper's")
	for _, c := range []struct {
		mine, helper int // the pieces that failed, -1: none
		want         error
	}{{-1, -1, nil}, {3, -1, mine}, {-1, 3, helpers}, {5, 3, helpers}, {3, 5, mine}, {4, 4, mine}} {
		s := &splitCombine{jobs: make(chan splitJob), free: make(chan []int32, splitBuffers), done: make(chan struct{}), pool: make(chan [][]int32, 1)}
		close(s.done)
		var err error
		if c.mine >= 0 {
			err = mine
		}
		if c.helper >= 0 {
			s.errPiece, s.err = c.helper, helpers
		}
		require.Equal(t, c.want, s.stop(c.mine, err), "preload's piece %d, helper's %d", c.mine, c.helper)
	}
}
