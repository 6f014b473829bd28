package query_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/query"
	"github.com/writeout/writeout/merger/query/filter"
)

var exampleSchema = columns.Schema{
	Dimensions: []columns.Dimension{{Name: "page"}, {Name: "tags", MultiValue: true}},
	Metrics: []columns.Metric{
		{Name: "edits", Aggregator: agg.Count},
		{Name: "added", Aggregator: agg.LongSum},
	},
}

// exampleBuilder returns a builder holding rows of exampleSchema.
func exampleBuilder(rows ...columns.Row) *merger.Builder {
	b, err := merger.NewBuilder(exampleSchema, merger.BuilderOptions{LiveBitmaps: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Add(r); err != nil {
			log.Fatal(err)
		}
	}
	return b
}

func row(t int64, page string, tags []string, added int64) columns.Row {
	return columns.Row{Time: t, Dims: [][]string{{page}, tags}, Metrics: []columns.Value{{}, {Long: added}}}
}

// Parse a filter and run a query on rows in memory: the rows the filter selects, grouped by
// hour and by a multi-value dimension (a row counts in the group of each of its values).
func Example() {
	const hour = 3600_000
	b := exampleBuilder(
		row(10, "Main", []string{"minor"}, 120),
		row(20, "Main", []string{"bot", "minor"}, 35),
		row(hour+5, "Paris", nil, 980),
		row(hour+9, "Main", []string{"minor"}, 4),
	)
	f, err := filter.Parse("page = 'Main' and not tags = 'bot'")
	if err != nil {
		log.Fatal(err)
	}
	res, err := query.Run(context.Background(), b, query.Spec{
		Filter:      f,
		Granularity: columns.GranularityHour,
		GroupBy:     []string{"tags"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res.Rows {
		fmt.Printf("%d tags=%s edits=%s added=%s\n", r.Time, r.Groups[0], r.Values[0], r.Values[1])
	}
	// Output:
	// 0 tags=minor edits=1 added=120
	// 3600000 tags=minor edits=1 added=4
}

// Query a segment and a builder as one table: here, rows persisted earlier and rows still in
// memory. A name that is no column of the inputs is an error.
func ExampleRunMany() {
	dir, err := os.MkdirTemp("", "query-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	path := filepath.Join(dir, "old.seg")
	_, err = exampleBuilder(row(1, "Main", nil, 10), row(2, "Paris", nil, 20)).
		Persist(ctx, path, merger.PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
	if err != nil {
		log.Fatal(err)
	}
	seg, err := columns.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer seg.Close()
	fresh := exampleBuilder(row(3, "Main", []string{"minor"}, 5))

	spec := query.Spec{All: true, GroupBy: []string{"page"}, Metrics: []string{"added"}}
	res, err := query.RunMany(ctx, []query.Queryable{seg, fresh}, spec)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res.Rows {
		fmt.Printf("page=%s rows=%d added=%s\n", r.Groups[0], r.Rows, r.Values[0])
	}

	spec.GroupBy = []string{"country"}
	spec.InputNames = []string{"old.seg", "fresh rows"}
	_, err = query.RunMany(ctx, []query.Queryable{seg, fresh}, spec)
	fmt.Println(err)
	// Output:
	// page=Main rows=2 added=15
	// page=Paris rows=1 added=20
	// query: invalid argument: group-by dimension "country" is in no input
}

func ExampleParseGranularity() {
	for _, s := range []string{"hour", "ALL", "fortnight"} {
		g, all, err := query.ParseGranularity(s)
		fmt.Println(g, all, err != nil)
	}
	// Output:
	// hour false false
	// none true false
	// none false true
}

// Filter on a metric, bucket by ISO week (2020-12-31 is in the week from Monday 2020-12-28)
// and keep the group that added most.
func ExampleSpec_SetGranularity() {
	day := func(s string) int64 {
		t, err := time.Parse(time.DateOnly, s)
		if err != nil {
			log.Fatal(err)
		}
		return t.UnixMilli()
	}
	b := exampleBuilder(
		row(day("2020-12-27"), "Main", nil, 50),
		row(day("2020-12-31"), "Main", nil, 120),
		row(day("2021-01-01"), "Paris", nil, 980),
		row(day("2021-01-02"), "Main", nil, 4),
	)
	spec := query.Spec{
		Filter:  filter.MustParse("added between 10 and 1000"),
		GroupBy: []string{"page"},
		OrderBy: []query.OrderKey{{Column: "added", Desc: true}},
		Limit:   1,
	}
	if err := spec.SetGranularity("week"); err != nil {
		log.Fatal(err)
	}
	res, err := query.Run(context.Background(), b, spec)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res.Rows {
		fmt.Printf("%s page=%s added=%s\n", time.UnixMilli(r.Time).UTC().Format(time.DateOnly), r.Groups[0], r.Values[1])
	}
	// Output:
	// 2020-12-28 page=Paris added=980
}
