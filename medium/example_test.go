package medium_test

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
	"github.com/writeout/writeout/tmpfile"
)

// Stage bytes on a medium, then copy them out. Every backend (medium.NewHeap, tmpfile.New,
// offheap.New, mmapfile.New) hands out the same Bytes.
func Example() {
	m := medium.NewHeap() // or tmpfile.New(tmpfile.Options{Dir: dir}), offheap.New(offheap.Options{}), ...
	defer m.Close()       // releases every Bytes the medium handed out

	part, err := m.NewBytes()
	if err != nil {
		log.Fatal(err)
	}
	for _, v := range []string{"hello", ", ", "medium"} {
		if _, err := part.WriteString(v); err != nil { // the first error is sticky
			log.Fatal(err)
		}
	}
	fmt.Println(part.Size()) // a counter: no flush, no system call

	if _, err := part.WriteTo(os.Stdout); err != nil { // into an *os.File: copy_file_range where it can
		log.Fatal(err)
	}
	fmt.Println()
	// Output:
	// 13
	// hello, medium
}

// Build a segment from rows with merger.Builder, stage its column parts in a temp-file medium
// and publish it: the medium keeps the parts out of the Go heap until they are copied into the
// file.
func Example_segment() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	m, err := tmpfile.New(tmpfile.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "page"}},
		Metrics:    []columns.Metric{{Name: "added", Aggregator: agg.LongSum}},
	}
	b, err := merger.NewBuilder(schema, merger.BuilderOptions{}) // rows into an in-memory index
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	for i, page := range []string{"Main", "Talk", "Main"} {
		row := columns.Row{Time: int64(i) * 1000, Dims: [][]string{{page}}, Metrics: []columns.Value{{Long: 10}}}
		if err := b.Add(row); err != nil {
			log.Fatal(err)
		}
	}
	res, err := b.Persist(context.Background(), filepath.Join(dir, "pages.seg"), merger.PersistOptions{
		Medium:     m,                                          // the column parts are staged here
		Durability: medium.Durability{Sync: medium.SyncOutput}, // fdatasync the file, fsync the directory
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.RowsOut, "rows")
	// Output:
	// 3 rows
}
