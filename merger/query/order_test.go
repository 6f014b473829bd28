package query

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/internal/fixture"
	"github.com/writeout/writeout/merger/query/filter"
)

func TestParseOrderBy(t *testing.T) {
	f := func(s string, want ...OrderKey) {
		t.Helper()
		got, err := ParseOrderBy(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	f("")
	f("  ")
	f("__time", OrderKey{Column: "__time"})
	f("added desc, page ASC,__rows", OrderKey{"added", true}, OrderKey{"page", false}, OrderKey{"__rows", false})
	f(` "page title" desc , "a,""b"""`, OrderKey{"page title", true}, OrderKey{`a,"b"`, false})
	f("日本 DESC", OrderKey{"日本", true})
	bad := func(s, msg string) {
		t.Helper()
		_, err := ParseOrderBy(s)
		require.ErrorIs(t, err, ErrInvalid, s)
		require.ErrorContains(t, err, msg, s)
	}
	bad("a,,b", "order-by item 2 is empty")
	bad("a, b sideways", `order-by item 2 (b): "sideways" is not asc or desc`)
	bad("a desc b", `order-by item 1 (a): expected "," after asc or desc, found "b"`)
	bad(`"a`, "order-by item 1: unterminated quoted name")
	bad(`a"b`, "a quote inside a bare name")
	bad("a,", "order-by item 2 is empty")
}

// FuzzParseOrderBy: any text is a list of keys or an error wrapping ErrInvalid, never a
// panic; a list written back with OrderKey.String parses to the same keys.
func FuzzParseOrderBy(f *testing.F) {
	for _, s := range []string{"", "__time", "a desc, b asc", `"a b" desc`, `"a""b"`, "a,,b", `"`, "a desc b", "x DESC,y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := ParseOrderBy(s)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalid)
			require.Nil(t, keys)
			return
		}
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k.String()
		}
		back, err := ParseOrderBy(strings.Join(parts, ", "))
		require.NoError(t, err, "%q written as %q", s, strings.Join(parts, ", "))
		require.Equal(t, keys, back)
	})
}

// TestOrderValidation: order-by columns, limits and granularities are checked before any
// row is read, and each error names what is wrong.
func TestOrderValidation(t *testing.T) {
	seg := fixture.WriteSegment(t, t.TempDir(), "a.seg", columns.Schema{
		Dimensions: []columns.Dimension{{Name: "page"}},
		Metrics:    []columns.Metric{{Name: "added", Aggregator: agg.LongSum}, {Name: "uniq", Aggregator: agg.HyperUnique}},
	}, nil)
	f := func(spec Spec, want string) {
		t.Helper()
		_, err := Run(t.Context(), seg, spec)
		if want == "" {
			require.NoError(t, err)
			return
		}
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, want)
	}
	f(Spec{GroupBy: []string{"page"}, OrderBy: []OrderKey{{Column: "page"}, {Column: "uniq", Desc: true}, {Column: "__rows"}, {Column: "__time"}}}, "")
	f(Spec{OrderBy: []OrderKey{{Column: "page"}}}, `order-by column "page" is not an output column of the query (__time, __rows, added, uniq)`)
	f(Spec{GroupBy: []string{"page"}, Metrics: []string{"added"}, OrderBy: []OrderKey{{Column: "uniq"}}}, `order-by column "uniq" is not an output column of the query (__time, page, __rows, added)`)
	f(Spec{OrderBy: []OrderKey{{Column: "added"}, {Column: "added", Desc: true}}}, `order-by column "added" listed twice`)
	f(Spec{Limit: -1}, "limit -1 is negative")
	f(Spec{Filter: filter.MustParse("uniq > 3")}, `filter uniq > 3: "uniq" is a hyperUnique sketch metric (in `)
	f(Spec{Filter: filter.MustParse("uniq is null")}, `"uniq" is a hyperUnique sketch metric`)
	f(Spec{Period: PeriodWeek, All: true}, "period week and all both set")
	f(Spec{Period: PeriodMonth, Granularity: columns.GranularityDay}, "period month and granularity day both set")
	f(Spec{Period: 9}, "unknown period 9")
	var s Spec
	for _, name := range []string{"WEEK", "month", "Quarter", "year", "all", "hour", "none"} {
		require.NoError(t, s.SetGranularity(name), name)
	}
	require.True(t, s.Granularity == columns.GranularityNone && s.Period == PeriodNone && !s.All)
	require.NoError(t, s.SetGranularity("quarter"))
	require.Equal(t, PeriodQuarter, s.Period)
	err := s.SetGranularity("fortnight")
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, `unknown granularity "fortnight" (want none, second, minute, hour, day, week, month, quarter, year or all)`)
}

// TestOrderedBounded: with an order and a limit, the groups held never pass the limit,
// whatever the number of groups, and the best ones come out in order, ties in arrival order.
func TestOrderedBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(fixture.Seed(t), 43))
	cols := []orderCol{{kind: orderRows, desc: true}}
	var out []Row
	o := newOrdered(cols, 5, false, true, func(r Result) error {
		out = append(out, r.Clone().Rows...)
		return nil
	})
	require.False(t, o.stream)
	var all []Row
	for p := range 50 {
		part := Result{}
		for i := range 100 {
			part.Rows = append(part.Rows, Row{Time: int64(p*100 + i), Rows: rng.Int64N(30)})
		}
		all = append(all, part.Rows...)
		require.NoError(t, o.take(part))
		require.LessOrEqual(t, len(o.held), 5)
	}
	require.NoError(t, o.finish())
	require.Len(t, out, 5)
	var want []Row
	for top := int64(29); len(want) < 5; top-- {
		for _, r := range all {
			if r.Rows == top && len(want) < 5 {
				want = append(want, r)
			}
		}
	}
	for i := range want {
		require.Equal(t, want[i].Time, out[i].Time, fmt.Sprint(i))
	}
}

// TestLimitStopsEarly: in default order a limit ends the query with the part that reaches it.
func TestLimitStopsEarly(t *testing.T) {
	defer func(n int) { windowRows = n }(windowRows)
	windowRows = 2
	rng := rand.New(rand.NewPCG(fixture.Seed(t), 47))
	schemas, rows := featCase(rng, 1, 2000)
	for len(rows[0]) < 1000 {
		schemas, rows = featCase(rng, 1, 2000)
	}
	seg := fixture.WriteSegment(t, t.TempDir(), "a.seg", schemas[0], rows[0])
	for _, g := range []string{"none", "week", "month"} {
		spec := Spec{Limit: 3}
		require.NoError(t, spec.SetGranularity(g))
		calls, got := 0, 0
		require.NoError(t, RunEach(t.Context(), []Queryable{seg}, spec, func(r Result) error {
			calls++
			got += len(r.Rows)
			return nil
		}))
		require.Equal(t, 3, got, g)
		require.LessOrEqual(t, calls, 3, g)
	}
}
