package merger_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

// Build two segments with a Builder, merge them with rollup, and query the result.
func Example() {
	dir, err := os.MkdirTemp("", "merger-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "page"}, {Name: "tags", MultiValue: true}},
		Metrics: []columns.Metric{
			{Name: "rows", Aggregator: columns.AggCount},
			{Name: "added", Aggregator: columns.AggLongSum},
		},
		Granularity: columns.GranularityHour,
	}
	var segs []*columns.Segment
	for i, rows := range [][]columns.Row{
		{
			{Time: 1_000, Dims: [][]string{{"home"}, {"a", "b"}}, Metrics: []columns.Value{{}, {Long: 3}}},
			{Time: 2_000, Dims: [][]string{{"about"}, nil}, Metrics: []columns.Value{{}, {Long: 1}}},
		},
		{
			{Time: 3_000, Dims: [][]string{{"home"}, {"b", "a"}}, Metrics: []columns.Value{{}, {Long: 5}}},
		},
	} {
		b, err := merger.NewBuilder(schema, merger.BuilderOptions{LiveBitmaps: true})
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range rows {
			if err := b.Add(r); err != nil {
				log.Fatal(err)
			}
		}
		path := filepath.Join(dir, fmt.Sprintf("in%d.seg", i))
		if _, err := b.Persist(ctx, path, merger.PersistOptions{}); err != nil {
			log.Fatal(err)
		}
		seg, err := columns.Open(path)
		if err != nil {
			log.Fatal(err)
		}
		defer seg.Close()
		segs = append(segs, seg)
	}

	dst := filepath.Join(dir, "merged.seg")
	res, err := merger.Merge(ctx, segs, dst, merger.Options{
		Rollup:      true,
		Granularity: columns.GranularityHour,
		Durability:  medium.Durability{Sync: medium.SyncNone},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rows in %d, rows out %d\n", res.RowsIn, res.RowsOut)

	merged, err := columns.Open(dst)
	if err != nil {
		log.Fatal(err)
	}
	defer merged.Close()
	filter, err := merger.ParseFilter("page = 'home' and tags in ('a')")
	if err != nil {
		log.Fatal(err)
	}
	q, err := merger.Query(ctx, merged, merger.QuerySpec{Filter: filter, All: true, GroupBy: []string{"tags"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range q.Rows {
		fmt.Printf("tags=%s stored rows %d, rows %s, added %s\n", r.Groups[0], r.Rows, r.Values[0], r.Values[1])
	}
	// Output:
	// rows in 3, rows out 2
	// tags=a stored rows 1, rows 2, added 8
	// tags=b stored rows 1, rows 2, added 8
}

func ExampleParseFilter() {
	f, err := merger.ParseFilter(`country in ('fr', 'de') and not "user agent" is null`)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f)
	_, err = merger.ParseFilter("country = fr")
	fmt.Println(err)
	// Output:
	// country in ('fr', 'de') and not "user agent" is null
	// merger: filter: column 11: expected a quoted string after the comparison, found name "fr"
}
