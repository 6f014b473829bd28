package columns_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger"
)

// A segment built from rows (merger.Builder writes its columns a column at a time), published
// to a file, opened, and read back by row and through a value's bitmap.
func Example() {
	dir, err := os.MkdirTemp("", "columns-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "page"}, {Name: "tags", MultiValue: true}},
		Metrics: []columns.Metric{
			{Name: "added", Aggregator: agg.LongSum},
			{Name: "firstDelta", Aggregator: agg.DoubleFirst},
		},
	}
	b, err := merger.NewBuilder(schema, merger.BuilderOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	for i, page := range []string{"Main", "Talk", "Main"} {
		err := b.Add(columns.Row{
			Time:    int64(1000 * i),
			Dims:    [][]string{{page}, {"a", "b"}},
			Metrics: []columns.Value{{Long: int64(10 * (i + 1))}, {Double: 0.5 * float64(i)}},
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	path := filepath.Join(dir, "example.seg")
	if _, err := b.Persist(context.Background(), path, merger.PersistOptions{}); err != nil {
		log.Fatal(err)
	}
	seg, err := columns.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer seg.Close()
	if err := seg.Verify(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(seg.Rows(), "rows,", len(seg.Info().Parts), "parts, interval", seg.Interval())
	rr := seg.RowReader()
	var r columns.Row
	for i := 0; i < seg.Rows(); i++ {
		if err := rr.Read(i, &r); err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Time, r.Dims, r.Metrics[0].Long, r.Metrics[1].Double)
	}
	page, err := seg.Dim("page")
	if err != nil {
		log.Fatal(err)
	}
	id, ok, err := page.Lookup("Main")
	if err != nil || !ok {
		log.Fatal(ok, err)
	}
	rows, err := page.Bitmap(id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("page Main in rows", rows.ToArray())
	// Output:
	// 3 rows, 12 parts, interval 1970-01-01T00:00:00.000Z/1970-01-01T00:00:02.001Z
	// 0 [[Main] [a b]] 10 0
	// 1000 [[Talk] [a b]] 20 0.5
	// 2000 [[Main] [a b]] 30 1
	// page Main in rows [0 2]
}
