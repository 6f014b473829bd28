package columns_test

import (
	"bytes"
	"fmt"
	"log"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
)

// A segment written a column at a time (merger.Builder writes rows this way), streamed to a
// buffer, and read back. A dictionary dimension takes its sorted dictionary first, then each
// row's ids, then one bitmap per id.
func Example() {
	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "page"}, {Name: "tags", MultiValue: true}},
		Metrics: []columns.Metric{
			{Name: "added", Aggregator: agg.LongSum},
			{Name: "firstDelta", Aggregator: agg.DoubleFirst},
		},
	}
	w, err := columns.NewWriter(schema, columns.WriterOptions{})
	if err != nil {
		log.Fatal(err)
	}
	check := func(err error) {
		if err != nil {
			log.Fatal(err)
		}
	}
	tw, err := w.Time()
	check(err)
	page, err := w.Dim("page")
	check(err)
	tags, err := w.Dim("tags")
	check(err)
	added, err := w.Long("added")
	check(err)
	delta, err := w.Double("firstDelta")
	check(err)

	main, err := page.AddValue("Main") // id 0
	check(err)
	talk, err := page.AddValue("Talk") // id 1
	check(err)
	a, err := tags.AddValue("a")
	check(err)
	b, err := tags.AddValue("b")
	check(err)
	for i, p := range []uint32{main, talk, main} {
		t := int64(1000 * i)
		check(tw.Append(t))
		check(page.AppendID(p))
		check(tags.AppendIDs([]uint32{a, b}))
		check(added.Append(int64(10 * (i + 1))))
		check(delta.AppendTimed(0.5*float64(i), t)) // first/last metrics keep each value's time
	}
	check(page.WriteBitmapRows(main, []uint32{0, 2}))
	check(page.WriteBitmapRows(talk, []uint32{1}))
	check(tags.WriteBitmapRows(a, []uint32{0, 1, 2}))
	check(tags.WriteBitmapRows(b, []uint32{0, 1, 2}))
	var buf bytes.Buffer
	info, err := w.FinishTo(&buf)
	if err != nil {
		log.Fatal(err)
	}
	seg, err := columns.NewSegment(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
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
