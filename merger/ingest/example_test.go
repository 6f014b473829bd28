package ingest_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/ingest"
)

// Ingest a CSV and an NDJSON input into one segment rolled up by hour.
func ExampleRun() {
	dir, err := os.MkdirTemp("", "ingest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	sp, err := ingest.ParseSpec([]byte(`{
	  "timestamp": {"field": "ts", "format": "rfc3339"},
	  "dimensions": [{"name": "page"}, {"name": "tags", "multiValue": true}],
	  "metrics": [{"name": "edits", "aggregator": "count"},
	              {"name": "added", "aggregator": "longSum"},
	              {"name": "delta", "aggregator": "doubleSum", "fieldName": "d"},
	              {"name": "editors", "aggregator": "hyperUnique", "fieldName": "user"}],
	  "rollup": true, "granularity": "hour"}`))
	if err != nil {
		log.Fatal(err)
	}
	csv := "ts,page,tags,added,d,user\n" +
		"2024-05-01T10:02:11Z,Main_Page,minor|bot,120,1e16,Alice\n" +
		"2024-05-01T10:17:45Z,Main_Page,bot|minor,35,1,Bob\n" +
		"2024-05-01T11:00:00Z,Paris,,12,2.5,Alice\n" +
		"2024-05-01T11:30:00Z,Paris,,many,0,Carol\n" // does not parse: skipped
	ndjson := `{"ts": "2024-05-01T10:40:00Z", "page": "Main_Page", "tags": ["minor", "bot"], "added": 5, "d": -1e16, "user": "Carol"}` + "\n"

	out := filepath.Join(dir, "edits.seg")
	res, err := ingest.Run(context.Background(), sp, []ingest.Input{
		{Name: "edits.csv", Reader: strings.NewReader(csv)},
		{Name: "edits.ndjson", Reader: strings.NewReader(ndjson)},
	}, ingest.Options{
		Out:            out,
		MaxParseErrors: 1,
		OnSkip:         func(e *ingest.RowError) { fmt.Println("skipped", e) },
		Durability:     medium.Durability{Sync: medium.SyncNone},
	})
	if err != nil {
		log.Fatal(err)
	}
	s := res.Segments[0]
	fmt.Printf("%d input rows, %d skipped: %d rows, %s\n", res.InputRows, res.Skipped, s.Rows, s.Interval)

	seg, err := columns.Open(out)
	if err != nil {
		log.Fatal(err)
	}
	defer seg.Close()
	for i := range seg.Rows() {
		r, err := seg.ReadRow(i)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Time, r.Dims, r.Metrics[0].Long, r.Metrics[1].Long, r.Metrics[2].Double, r.Metrics[3].Sketch.Estimate())
	}
	// Output:
	// skipped edits.csv:5: column added: not an integer: "many"
	// 4 input rows, 1 skipped: 2 rows, 2024-05-01T10:00:00.000Z/2024-05-01T12:00:00.000Z
	// 1714557600000 [[Main_Page] [bot minor]] 3 160 1 3
	// 1714561200000 [[Paris] []] 1 12 2.5 1
}
