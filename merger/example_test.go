package merger_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

// Build two segments with a Builder, merge them with rollup, and read the result. (Package
// merger/query runs filtered aggregations on segments and builders.)
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
			{Name: "rows", Aggregator: agg.Count},
			{Name: "added", Aggregator: agg.LongSum},
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
	rr := merged.RowReader()
	var r columns.Row
	for i := range merged.Rows() {
		if err := rr.Read(i, &r); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d page=%s tags=%v rows %d, added %d\n", r.Time, r.Dims[0], r.Dims[1], r.Metrics[0].Long, r.Metrics[1].Long)
	}
	// Output:
	// rows in 3, rows out 2
	// 0 page=[about] tags=[] rows 1, added 1
	// 0 page=[home] tags=[a b] rows 2, added 8
}
