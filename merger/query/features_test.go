package query

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/internal/fixture"
	"github.com/writeout/writeout/merger/query/filter"
)

// randFeatQuery returns a random query over featCase's columns.
func randFeatQuery(rng *rand.Rand) featQuery {
	grans := []string{"none", "second", "hour", "day", "week", "month", "quarter", "year", "all"}
	q := featQuery{gran: grans[rng.IntN(len(grans))]}
	if rng.IntN(6) > 0 {
		f := featTree(rng, 0)
		q.flt = &f
	}
	for _, d := range []string{"country", "tags"} {
		if rng.IntN(2) == 0 {
			q.groupBy = append(q.groupBy, d)
		}
	}
	if rng.IntN(2) == 0 {
		cols := append([]string{"__time", "__rows"}, q.groupBy...)
		for _, m := range featMetrics {
			cols = append(cols, m.Name)
		}
		for _, k := range rng.Perm(len(cols))[:1+rng.IntN(3)] {
			q.orderBy = append(q.orderBy, OrderKey{Column: cols[k], Desc: rng.IntN(2) == 0})
		}
		if rng.IntN(4) == 0 { // a prefix of the default order: streamed
			q.orderBy = []OrderKey{{Column: "__time"}}
		}
	}
	if rng.IntN(2) == 0 {
		q.limit = 1 + rng.IntN(12)
	}
	return q
}

func (q featQuery) spec(t testing.TB) Spec {
	spec := Spec{GroupBy: q.groupBy, OrderBy: q.orderBy, Limit: q.limit}
	require.NoError(t, spec.SetGranularity(q.gran))
	if q.flt != nil {
		f, err := filter.Parse(q.flt.expr())
		require.NoError(t, err, q.flt.expr())
		spec.Filter = f
	}
	return spec
}

// TestFeaturesOracle: metric filters, calendar granularities, order-by and limit on segments
// equal the oracle, through RunMany and through RunEach in windows of a few rows (so that
// windows end at week, month, quarter and year edges).
func TestFeaturesOracle(t *testing.T) {
	defer func(n int) { windowRows = n }(windowRows)
	rng := rand.New(rand.NewPCG(fixture.Seed(t), 37))
	cases := 12
	if testing.Short() || fixture.Race {
		cases = 4
	}
	for c := range cases {
		schemas, rows := featCase(rng, 1+rng.IntN(3), 1+rng.IntN(1500))
		dir := t.TempDir()
		qs := make([]Queryable, len(schemas))
		for i := range schemas {
			qs[i] = fixture.WriteSegment(t, dir, fmt.Sprintf("in%d.seg", i), schemas[i], rows[i])
		}
		for n := range 40 {
			q := randFeatQuery(rng)
			msg := fmt.Sprintf("case %d query %d: %s", c, n, q)
			want := featOracle(schemas, rows, q)
			spec := q.spec(t)
			spec.Metrics = []string{"rows", "delay", "big", "small", "dist", "dmin"}
			windowRows = defaultWindowRows
			got, err := RunMany(t.Context(), qs, spec)
			require.NoError(t, err, msg)
			requireResultsEqual(t, want, got, false, msg)

			windowRows = 3
			var each Result
			calls := 0
			require.NoError(t, RunEach(t.Context(), qs, spec, func(part Result) error {
				calls++
				part = part.Clone()
				each.GroupBy, each.Metrics = part.GroupBy, part.Metrics
				each.Rows = append(each.Rows, part.Rows...)
				return nil
			}), msg)
			require.GreaterOrEqual(t, calls, 1, msg)
			requireResultsEqual(t, want, each, false, msg+" (windows of 3 rows)")
		}
	}
}

// TestPeriodTruncate: Period.Truncate equals time.Time's calendar on times over ±3000 years,
// the week of 2020-12-31 starts on Monday 2020-12-28, and the extreme times neither panic
// nor wrap round.
func TestPeriodTruncate(t *testing.T) {
	rng := rand.New(rand.NewPCG(fixture.Seed(t), 41))
	for range 20000 {
		ms := rng.Int64N(2*94_000_000_000_000) - 94_000_000_000_000 // about ±3000 years
		if rng.IntN(2) == 0 {
			ms = featTimes[rng.IntN(len(featTimes))] + rng.Int64N(3) - 1
		}
		for p, name := range map[Period]string{PeriodWeek: "week", PeriodMonth: "month", PeriodQuarter: "quarter", PeriodYear: "year"} {
			start := p.Truncate(ms)
			require.Equal(t, oracleBucket(name, ms), start, "%s of %d", name, ms)
			next := p.add(start, 1)
			require.Greater(t, next, ms, "%s of %d", name, ms)
			require.Equal(t, next, p.Truncate(next), "%s after %d starts a period", name, ms)
			require.Equal(t, p.add(next, 2), p.add(start, 3))
		}
	}
	ms := func(s string) int64 {
		tm, err := time.Parse(time.DateOnly, s)
		require.NoError(t, err)
		return tm.UnixMilli()
	}
	require.Equal(t, ms("2020-12-28"), PeriodWeek.Truncate(ms("2020-12-31")))
	require.Equal(t, ms("2020-12-28"), PeriodWeek.Truncate(ms("2021-01-04")-1))
	require.Equal(t, ms("2021-01-04"), PeriodWeek.Truncate(ms("2021-01-04")))
	require.Equal(t, ms("2020-10-01"), PeriodQuarter.Truncate(ms("2020-12-31")))
	require.Equal(t, ms("1969-12-29"), PeriodWeek.Truncate(-1))
	require.Equal(t, ms("1969-01-01"), PeriodYear.Truncate(-1))
	for _, p := range []Period{PeriodWeek, PeriodMonth, PeriodQuarter, PeriodYear} {
		require.LessOrEqual(t, p.Truncate(columns.MinTime), columns.MinTime, p)
		if p == PeriodWeek {
			require.Zero(t, floorMod(floorDiv(p.Truncate(columns.MinTime), dayMillis)-4, 7), "a Monday")
		} else {
			require.Equal(t, int64(math.MinInt64), p.Truncate(columns.MinTime), p) // the period starts before int64's first ms
		}
		s := p.Truncate(columns.MaxTime)
		require.LessOrEqual(t, s, columns.MaxTime)
		require.Greater(t, s, columns.MaxTime-400*dayMillis)
		require.Equal(t, int64(math.MaxInt64), p.add(s, 1), p)
	}
}

// TestFeaturesBuilder: a builder's rows (in memory, in the order added) answer the feature
// queries as the oracle does: metric filters read its values and nulls too.
func TestFeaturesBuilder(t *testing.T) {
	rng := rand.New(rand.NewPCG(fixture.Seed(t), 53))
	for c := range 3 {
		schemas, rows := featCase(rng, 1, 1+rng.IntN(800))
		bld, err := merger.NewBuilder(schemas[0], merger.BuilderOptions{LiveBitmaps: c%2 == 0})
		require.NoError(t, err)
		added := slices.Clone(rows[0])
		rng.Shuffle(len(added), func(i, j int) { added[i], added[j] = added[j], added[i] })
		for _, r := range added {
			require.NoError(t, bld.Add(r))
		}
		for n := range 30 {
			q := randFeatQuery(rng)
			msg := fmt.Sprintf("case %d query %d: %s", c, n, q)
			spec := q.spec(t)
			spec.Metrics = []string{"rows", "delay", "big", "small", "dist", "dmin"}
			got, err := Run(t.Context(), bld, spec)
			require.NoError(t, err, msg)
			requireResultsEqual(t, featOracle(schemas, rows, q), got, false, msg)
		}
	}
}

// TestPeriodWindows: with windows of about 2 rows, RunEach hands each week's, month's,
// quarter's and year's groups on apart: memory holds a window's groups, as with fixed widths.
func TestPeriodWindows(t *testing.T) {
	defer func(n int) { windowRows = n }(windowRows)
	windowRows = 2
	rng := rand.New(rand.NewPCG(fixture.Seed(t), 59))
	schemas, rows := featCase(rng, 1, 3000)
	for len(rows[0]) < 1000 {
		schemas, rows = featCase(rng, 1, 3000)
	}
	seg := fixture.WriteSegment(t, t.TempDir(), "a.seg", schemas[0], rows[0])
	for _, g := range []string{"week", "month", "quarter", "year"} {
		var spec Spec
		require.NoError(t, spec.SetGranularity(g))
		buckets := map[int64]bool{}
		for _, r := range rows[0] {
			buckets[oracleBucket(g, r.Time)] = true
		}
		parts := 0
		require.NoError(t, RunEach(t.Context(), []Queryable{seg}, spec, func(part Result) error {
			parts++
			require.Len(t, part.Rows, 1, "%s: one bucket a part", g)
			require.True(t, buckets[part.Rows[0].Time], "%s: %d is a bucket start", g, part.Rows[0].Time)
			return nil
		}))
		require.Equal(t, len(buckets), parts, g)
	}
}

// TestPeriodExtremes: rows at the first and last valid times fall in buckets of their own
// under every period, without a panic or a wrapped time (a bucket that starts before the
// first int64 millisecond starts at math.MinInt64).
func TestPeriodExtremes(t *testing.T) {
	schema := columns.Schema{Dimensions: featDims[:1], Metrics: featMetrics[:2]}
	var rows []columns.Row
	for _, ms := range []int64{columns.MinTime, columns.MinTime + 1, 0, columns.MaxTime - 1, columns.MaxTime} {
		rows = append(rows, columns.Row{Time: ms, Dims: [][]string{{"x"}}, Metrics: []columns.Value{{Long: 1}, {Long: 2}}})
	}
	seg := fixture.WriteSegment(t, t.TempDir(), "a.seg", schema, rows)
	for _, g := range []string{"week", "month", "quarter", "year"} {
		var spec Spec
		require.NoError(t, spec.SetGranularity(g))
		res, err := Run(t.Context(), seg, spec)
		require.NoError(t, err, g)
		require.Len(t, res.Rows, 3, g)
		require.LessOrEqual(t, res.Rows[0].Time, columns.MinTime, g)
		require.Equal(t, int64(2), res.Rows[0].Rows, g)
		require.Equal(t, oracleBucket(g, 0), res.Rows[1].Time, g)
		require.Greater(t, res.Rows[2].Time, columns.MaxTime-400*dayMillis, g)
		require.Equal(t, int64(2), res.Rows[2].Rows, g)
	}
}
