package query

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/internal/fixture"
	"github.com/writeout/writeout/merger/internal/source"
)

// TestQueryDenseIndex: groups found through dense indexes (the default for segments grouped
// by single-value dictionary dimensions), through maps (denseSlots 0), or some inputs one way
// and some the other, give the oracle's result, in windows of every size; the parts RunEach
// hands on, copied with Clone, make the same result.
func TestQueryDenseIndex(t *testing.T) {
	defer func(n, s int) { windowRows, denseSlots = n, s }(windowRows, denseSlots)
	rng := rand.New(rand.NewPCG(fixture.Seed(t), 29))
	cases := 8
	if testing.Short() || fixture.Race {
		cases = 3
	}
	single := []string{"country", "page", "user", "noidx"}
	for c := 0; c < cases; c++ {
		n := 1 + rng.IntN(3)
		rc := fixture.NewCase(rng, n, 1+rng.IntN(2000))
		qs := writeCase(t, rc)
		for q := 0; q < 6; q++ {
			spec := randSpec(rng, rc.Schemas...)
			if rng.IntN(4) > 0 { // mostly single-value dictionary dimensions, which a dense index takes
				spec.GroupBy = nil
				for _, k := range rng.Perm(len(single))[:1+rng.IntN(3)] {
					for _, s := range rc.Schemas {
						if s.Dimension(single[k]) >= 0 {
							spec.GroupBy = append(spec.GroupBy, single[k])
							break
						}
					}
				}
			}
			want := oracleQuery(rc.Schemas, rc.Rows, spec)
			for _, slots := range []int{defaultDenseSlots, 0, 1 + rng.IntN(60)} {
				for _, w := range []int{2 + rng.IntN(300), defaultWindowRows} {
					windowRows, denseSlots = w, slots
					msg := fmt.Sprintf("case %d query %d, %d slots, window %d: %+v filter %v", c, q, slots, w, spec, spec.Filter)
					got, err := RunMany(t.Context(), qs, spec)
					require.NoError(t, err, msg)
					requireResultsEqual(t, want, got, false, msg)
					var parts Result
					require.NoError(t, RunEach(t.Context(), qs, spec, func(part Result) error {
						part = part.Clone()
						if parts.Rows == nil {
							parts = part
						} else {
							parts.Rows = append(parts.Rows, part.Rows...)
						}
						return nil
					}), msg)
					requireResultsEqual(t, want, parts, false, msg+" (RunEach)")
				}
			}
		}
	}
}

// TestDenseIndexApplies: a segment grouped by single-value dictionary dimensions gets a dense
// index of the product of their cardinalities (a dimension it lacks counts 1), unless that is
// past the bound; multi-value and raw dimensions, and builders, keep the maps.
func TestDenseIndexApplies(t *testing.T) {
	schema := columns.Schema{Dimensions: []columns.Dimension{{Name: "a"}, {Name: "b"}, {Name: "tags", MultiValue: true}, {Name: "body", Raw: true}},
		Metrics: []columns.Metric{{Name: "rows", Aggregator: agg.Count}}}
	var rows []columns.Row
	for i := range 40 {
		rows = append(rows, columns.Row{Time: int64(i) * 1000, Dims: [][]string{{fmt.Sprint(i % 5)}, {fmt.Sprint(i % 7)}, {"x", "y"}, {"p"}},
			Metrics: []columns.Value{{Long: 1}}})
	}
	rows[3].Dims[0] = nil // a null: the dictionary of a has 6 ids
	seg := fixture.WriteSegment(t, t.TempDir(), "s.seg", schema, rows)
	f := func(groupBy []string, maxSlots int, want []uint32) {
		t.Helper()
		spec := Spec{Granularity: columns.GranularityMinute, GroupBy: groupBy}
		r := &runner{ctx: t.Context(), src: source.OfSegment(seg), spec: &spec, metrics: schema.Metrics}
		require.NoError(t, r.setup())
		d := newDenseIndex(r, maxSlots, true)
		if want == nil {
			require.Nil(t, d, "%v", groupBy)
			return
		}
		require.NotNil(t, d, "%v", groupBy)
		require.Equal(t, want, d.cards)
		size := 1
		for _, c := range want {
			size *= int(c)
		}
		require.Len(t, d.group, size)
		require.Len(t, d.bits, (size+63)/64)
	}
	f([]string{"a", "b"}, defaultDenseSlots, []uint32{6, 7})
	f([]string{"b", "a", "missing"}, defaultDenseSlots, []uint32{7, 6, 1})
	f([]string{"a", "b"}, 42, []uint32{6, 7})
	f([]string{"a", "b"}, 41, nil)
	f([]string{"a", "tags"}, defaultDenseSlots, nil)
	f([]string{"body"}, defaultDenseSlots, nil)
	f(nil, defaultDenseSlots, nil) // no group-by dimension: one group a bucket, no index needed
	got, err := Run(t.Context(), seg, Spec{Granularity: columns.GranularityMinute, GroupBy: []string{"b", "a"}})
	require.NoError(t, err)
	want := oracleQuery([]columns.Schema{schema}, [][]columns.Row{rows}, Spec{Granularity: columns.GranularityMinute, GroupBy: []string{"b", "a"}})
	requireResultsEqual(t, want, got, false, "b, a")
}

// TestRunEachStops: each's error, a panic in each, and a cancelled context each end the
// query at once, and RunEach returns (or panics) only after its producer goroutine has
// stopped reading the inputs.
func TestRunEachStops(t *testing.T) {
	defer func(n int) { windowRows = n }(windowRows)
	windowRows = 2 // many parts
	rng := rand.New(rand.NewPCG(fixture.Seed(t), 37))
	schema := columns.Schema{Dimensions: []columns.Dimension{{Name: "a"}}, Metrics: []columns.Metric{{Name: "rows", Aggregator: agg.Count}}}
	var rows []columns.Row
	for i := range 5000 {
		rows = append(rows, columns.Row{Time: int64(i) * 60_000, Dims: [][]string{{fmt.Sprint(rng.IntN(9))}}, Metrics: []columns.Value{{Long: 1}}})
	}
	seg := fixture.WriteSegment(t, t.TempDir(), "s.seg", schema, rows)
	spec := Spec{Granularity: columns.GranularityMinute, GroupBy: []string{"a"}}
	all, err := Run(t.Context(), seg, spec)
	require.NoError(t, err)
	require.Len(t, all.Rows, 5000)
	base := runtime.NumGoroutine()
	settled := func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		require.LessOrEqual(t, runtime.NumGoroutine(), base, "the producer goroutine is gone")
	}

	stop := errors.New("stop")
	calls := 0
	err = RunEach(t.Context(), []Queryable{seg}, spec, func(Result) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 3, calls)
	settled()

	calls = 0
	func() {
		defer func() {
			require.Equal(t, "boom", recover())
		}()
		_ = RunEach(t.Context(), []Queryable{seg}, spec, func(Result) error {
			calls++
			panic("boom")
		})
	}()
	require.Equal(t, 1, calls)
	settled()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	calls = 0
	err = RunEach(ctx, []Queryable{seg}, spec, func(Result) error {
		calls++
		cancel()
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, calls, 5, "the producer stops at its next read")
	settled()

	// A query of one window (All) runs on the caller's goroutine: each's error and panic
	// come back the same way.
	one := Spec{All: true, GroupBy: []string{"a"}}
	err = RunEach(t.Context(), []Queryable{seg}, one, func(part Result) error {
		require.Len(t, part.Rows, 9)
		return stop
	})
	require.ErrorIs(t, err, stop)
	require.PanicsWithValue(t, "boom", func() {
		_ = RunEach(t.Context(), []Queryable{seg}, one, func(Result) error { panic("boom") })
	})
	settled()

	// The parts in turn reuse two buffers: each part's rows are the groups of its window,
	// whatever the part before held.
	var got []Row
	bufs := map[*Row]bool{}
	parts := 0
	require.NoError(t, RunEach(t.Context(), []Queryable{seg}, spec, func(part Result) error {
		parts++
		if len(part.Rows) > 0 {
			bufs[&part.Rows[:1][0]] = true
		}
		got = append(got, part.Clone().Rows...)
		return nil
	}))
	require.Greater(t, parts, 1000)
	require.Less(t, len(bufs), 10, "parts' memory is reused (two buffers, grown a few times)")
	require.True(t, slices.EqualFunc(all.Rows, got, func(a, b Row) bool { return cmpResultRows(a, b) == 0 && a.Rows == b.Rows }))
}

// TestDenseIndexOrders: a dense index puts each bucket's groups in value order both ways it
// can: reading its bits (a bucket of many groups) and sorting their slots (a bucket of a few
// groups spread over many slots), in windows of one bucket and of several.
func TestDenseIndexOrders(t *testing.T) {
	defer func(n int) { windowRows = n }(windowRows)
	rng := rand.New(rand.NewPCG(fixture.Seed(t), 41))
	schema := columns.Schema{Dimensions: []columns.Dimension{{Name: "a"}, {Name: "b"}},
		Metrics: []columns.Metric{{Name: "rows", Aggregator: agg.Count}, {Name: "v", Aggregator: agg.LongSum}}}
	var rows []columns.Row
	add := func(minute int, a, b int) {
		rows = append(rows, columns.Row{Time: int64(minute) * 60_000, Dims: [][]string{{fmt.Sprint(a)}, {fmt.Sprint(b)}},
			Metrics: []columns.Value{{Long: 1}, {Long: rng.Int64N(100)}}})
	}
	for m := 0; m < 6; m++ {
		if m%2 == 0 { // a few groups far apart: sorted slots
			add(m, 299, 0)
			add(m, 0, 299)
			add(m, 150, 7)
			add(m, 299, 0)
		} else { // many: the bits
			for range 2000 {
				add(m, rng.IntN(300), rng.IntN(300))
			}
		}
	}
	// Every value in the dictionaries, so that the slots span 300 x 300.
	for i := range 300 {
		add(6, i, 299-i)
	}
	seg := fixture.WriteSegment(t, t.TempDir(), "s.seg", schema, rows)
	for _, w := range []int{2, defaultWindowRows} {
		windowRows = w
		for _, groupBy := range [][]string{{"a", "b"}, {"b", "a"}} {
			spec := Spec{Granularity: columns.GranularityMinute, GroupBy: groupBy}
			got, err := Run(t.Context(), seg, spec)
			require.NoError(t, err)
			want := oracleQuery([]columns.Schema{schema}, [][]columns.Row{rows}, spec)
			requireResultsEqual(t, want, got, false, fmt.Sprintf("window %d, %v", w, groupBy))
		}
	}
}
