package columns_test

import (
	"bytes"
	"fmt"
	"log"

	"github.com/writeout/writeout/columns"
)

// Rows written one at a time (AddRow, for schemas without rollup; rolled-up segments come
// from merger.Builder), streamed to a buffer, and read back.
func Example() {
	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "page"}, {Name: "tags", MultiValue: true}},
		Metrics: []columns.Metric{
			{Name: "added", Aggregator: columns.AggLongSum},
			{Name: "firstDelta", Aggregator: columns.AggDoubleFirst},
		},
	}
	w, err := columns.NewWriter(schema, columns.WriterOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for i, page := range []string{"Main", "Talk", "Main"} {
		row := columns.Row{
			Time:    int64(1000 * i),
			Dims:    [][]string{{page}, {"a", "b"}},
			Metrics: []columns.Value{{Long: int64(10 * (i + 1))}, {Double: 0.5 * float64(i)}},
		}
		if err := w.AddRow(row); err != nil {
			log.Fatal(err)
		}
	}
	var buf bytes.Buffer
	info, err := w.FinishTo(&buf)
	if err != nil {
		log.Fatal(err)
	}
	seg, err := columns.NewSegmentBytes(buf.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	if err := seg.Verify(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Rows, "rows,", len(seg.Parts()), "parts, interval", seg.Interval())
	rr := seg.RowReader()
	var r columns.Row
	for i := 0; i < seg.Rows(); i++ {
		if err := rr.Read(i, &r); err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Time, r.Dims, r.Metrics[0].Long, r.Metrics[1].Double)
	}
	// Output:
	// 3 rows, 12 parts, interval 1970-01-01T00:00:00.000Z/1970-01-01T00:00:02.001Z
	// 0 [[Main] [a b]] 10 0
	// 1000 [[Talk] [a b]] 20 0.5
	// 2000 [[Main] [a b]] 30 1
}
