package merger

import (
	"cmp"
	"fmt"
	"math/big"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
)

// TestMergePreAggregate: a rollup to the hour of inputs whose hours re-sort, with single-value
// dimensions and long metrics of every aggregator (nulls, inputs lacking a metric, values that
// overflow a sum), pre-aggregates its groups and gives the rows of the naive merge and the
// file of the same merge without pre-aggregation, byte for byte.
func TestMergePreAggregate(t *testing.T) {
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
	dims := []columns.Dimension{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	const hour = 3600_000
	for c := range 12 {
		rng := rand.New(rand.NewPCG(uint64(c), 7))
		dir := t.TempDir()
		nIn := 1 + rng.IntN(4)
		if c == 3 {
			nIn = 1 // sums that overflow in a plain group (no null)
		}
		contiguous := c%2 == 0
		var schemas []columns.Schema
		var rows [][]columns.Row
		var segs []*columns.Segment
		for i := range nIn {
			s := columns.Schema{Granularity: columns.GranularityNone, Dimensions: dims}
			for k, m := range metrics {
				if k >= 4 && c%3 == 2 {
					continue // no first or last: the oracle below does not model them
				}
				if i == 0 || rng.IntN(4) > 0 { // the first input has every metric
					s.Metrics = append(s.Metrics, m)
				}
			}
			n := 500 + rng.IntN(3000)
			rs := make([]columns.Row, n)
			for r := range rs {
				tm := int64(1_700_000_000_000) + rng.Int64N(3*hour)
				switch {
				case c >= 9: // hours of a few rows: windows of many groups, some in order, some not
					tm = int64(1_700_000_000_000) + rng.Int64N(int64(n/3+1)*hour)
				case contiguous:
					tm = int64(1_700_000_000_000) + int64(i)*2*hour + rng.Int64N(2*hour+hour/2) // a shared hour at the edges
				}
				if rng.IntN(8) == 0 { // at an hour's edge: the last millisecond of a bucket, the first of the next
					tm += -tm%hour + rng.Int64N(3) - 1
				}
				row := columns.Row{Time: tm, Dims: make([][]string, len(dims)), Metrics: make([]columns.Value, len(s.Metrics))}
				for d := range dims {
					if rng.IntN(8) > 0 {
						row.Dims[d] = []string{fmt.Sprintf("v%d", rng.IntN([]int{3, 20, 200}[d]))}
					}
				}
				for m, met := range s.Metrics {
					switch {
					case met.Aggregator == agg.Count:
						row.Metrics[m].Long = 1 + rng.Int64N(3)
					case c%3 == 0 && i > 0 && rng.IntN(6) == 0: // the first input of a third of the cases has no null
						row.Metrics[m].Null = true
					case c%3 != 0 && rng.IntN(6) == 0:
						row.Metrics[m].Null = true
					case met.Aggregator == agg.LongSum && (c == 3 || rng.IntN(50) == 0):
						row.Metrics[m].Long = 1<<62 + rng.Int64N(1<<61) // sums may overflow: an error then
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
			Parallelism: 1 + rng.IntN(3), ChunkRows: []int{0, 64, 1000}[rng.IntN(3)]}
		if c%4 == 1 {
			opts.MaxFanIn = 2 // phases: intermediate segments rolled up, then merged
		}
		name := fmt.Sprintf("case %d: %d inputs, contiguous %v, fan-in %d", c, nIn, contiguous, opts.MaxFanIn)

		before := preAggGroups.Load()
		on := filepath.Join(dir, "on.seg")
		var rowsDone []Progress // each phase's last count of rows merged: all its rows
		opts.Progress = func(p Progress) {
			if p.Step == StepRows {
				if len(rowsDone) < p.Phase {
					rowsDone = append(rowsDone, p)
				}
				rowsDone[p.Phase-1] = p
			}
		}
		_, errOn := Merge(t.Context(), segs, on, opts)
		opts.Progress = nil
		require.Greater(t, preAggGroups.Load(), before, "%s: no group pre-aggregated", name)
		if errOn == nil && opts.MaxFanIn == 0 { // one merge (a phase of several counts on over them)
			require.Len(t, rowsDone, 1, name)
			for _, p := range rowsDone {
				require.Equal(t, p.RowsTotal, p.RowsDone, "%s: phase %d: rows merged", name, p.Phase)
			}
		}
		off := filepath.Join(dir, "off.seg")
		errOff := mergeWithout(t, &preAggOff, segs, off, opts)
		if errOff != nil { // an overflowing sum: the same error either way
			t.Logf("%s: %v", name, errOff)
			require.Error(t, errOn, name)
			require.ErrorIs(t, errOn, agg.ErrOverflow, name)
			require.Equal(t, errOff.Error(), errOn.Error(), name)
			continue
		}
		require.NoError(t, errOn, name)
		requireSameFiles(t, off, on, name)
		if c%3 == 2 {
			out, err := outputSchema(schemas, opts.inputName, nil, true, columns.GranularityHour)
			require.NoError(t, err)
			requireRowsEqual(t, oracleMerge(schemas, rows, out), readRows(t, openSeg(t, on)), false, name)
		}
	}
}

// TestAddPlainSumBound: a plain sum's adds go unchecked while its bound shows no sum can
// leave the int64 range, and checked for a carry past it (values that pass the bound after
// some chunks, then sums that overflow), with exact sums (v plus carries) all along; the
// values' magnitudes come from their chunk's bound or from the values.
func TestAddPlainSumBound(t *testing.T) {
	const slots = 4
	// 2^52, all positive: chunks pass the per-chunk check (2^53 by 255 rows), and the last
	// slot's sum leaves the int64 range after some 2^11 of them.
	for c, mag := range []int64{1 << 20, 1 << 50, 1 << 52, 1 << 61} {
		rng := rand.New(rand.NewPCG(uint64(c), 62))
		task := &longTask{}
		task.agg.Kind = agg.Sum
		g := &groupAgg{slots: slots, pre: &preAgg{}}
		sa := &slotAccs{g: g, plain: true}
		sa.mem.tables = &g.pre.tables
		v, err := accsFor(&sa.mem, &sa.mem.v, slots)
		require.NoError(t, err)
		clear(v)
		sa.v = v
		want := make([]*big.Int, slots)
		for s := range want {
			want[s] = new(big.Int)
		}
		checked := false
		overflowed := false
		for range 80 {
			n := 1 + rng.IntN(255)
			vs, gid := make([]int64, n), make([]int32, n+rng.IntN(3)) // gid may hold more
			for j := range vs {
				vs[j] = rng.Int64N(mag) + mag/2
				if mag != 1<<52 && rng.IntN(3) == 0 {
					vs[j] = -vs[j]
				}
				gid[j] = int32(min(rng.IntN(slots+2), slots-1)) // the last slot most
				want[gid[j]].Add(want[gid[j]], big.NewInt(vs[j]))
			}
			// A chunk's bound from its header (the values' largest magnitude, or more), or none.
			var mag uint64
			for _, x := range vs {
				mag = max(mag, uint64(max(x, -x)))
			}
			bounded := rng.IntN(2) == 0
			if bounded && rng.IntN(2) == 0 {
				mag *= 2
			}
			require.NoError(t, task.addPlain(sa, vs, gid, mag, bounded))
			checked = checked || sa.bound >= sumBound
			overflowed = overflowed || len(sa.c) > 0
			for s := range slots {
				got := new(big.Int).Lsh(big.NewInt(sa.carry(uint32(s))), 64)
				got.Add(got, big.NewInt(sa.v[s]))
				require.Zero(t, want[s].Cmp(got), "magnitude %d, slot %d: sum %s, want %s", mag, s, got, want[s])
			}
		}
		require.Equal(t, mag >= 1<<50, checked, "magnitude %d: adds checked", mag)
		require.Equal(t, mag >= 1<<52, overflowed, "magnitude %d: a sum carried", mag)
		require.NoError(t, sa.mem.free())
	}
}
