package peers

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CSVHeader is the header line of every CSV file written by WriteCSV.
const CSVHeader = "time,d1,d2,d3,m1,m2,m3"

// WriteCSV writes events at dst as CSV with a header line (CSVHeader): the time as epoch
// milliseconds, the dimensions and metrics as they are. It returns the bytes written.
func WriteCSV(dst string, ev []Event) (n int64, err error) {
	f, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	line := make([]byte, 0, 128)
	line = append(line, CSVHeader...)
	line = append(line, '\n')
	for i := range ev {
		if _, err := w.Write(line); err != nil {
			return 0, fmt.Errorf("peers: csv %s: %w", dst, err)
		}
		n += int64(len(line))
		e := &ev[i]
		line = strconv.AppendInt(line[:0], e.Time, 10)
		for _, d := range [...]string{e.D1, e.D2, e.D3} {
			line = append(append(line, ','), d...)
		}
		for _, m := range [...]int64{e.M1, e.M2, e.M3} {
			line = strconv.AppendInt(append(line, ','), m, 10)
		}
		line = append(line, '\n')
	}
	if _, err := w.Write(line); err != nil {
		return 0, fmt.Errorf("peers: csv %s: %w", dst, err)
	}
	n += int64(len(line))
	if err := w.Flush(); err != nil {
		return 0, fmt.Errorf("peers: csv %s: %w", dst, err)
	}
	return n, nil
}

// IngestSpec is the writeout ingestion spec (merger/ingest) of the CSV files WriteCSV writes:
// the table of Schema (rollup off), the time from the epoch milliseconds of "time".
const IngestSpec = `{"timestamp": {"field": "time", "format": "millis"},
 "dimensions": [{"name": "d1"}, {"name": "d2"}, {"name": "d3"}],
 "metrics": [{"name": "m1", "aggregator": "longSum"}, {"name": "m2", "aggregator": "longSum"},
             {"name": "m3", "aggregator": "longSum"}],
 "rollup": false, "granularity": "none"}
`

// IngestCSVSQL is Events.IngestCSVSQL.
func IngestCSVSQL(paths []string, dst string) string { return Events.IngestCSVSQL(paths, dst) }

// IngestSpec returns the writeout ingestion spec (merger/ingest) of the shape's CSV files: its
// table (rollup off), the time from the epoch milliseconds of "time".
func (s *Shape) IngestSpec() string { return s.ingestSpec }

// CSVHeader returns the header line of the shape's CSV files: time, the dimensions, the
// metrics.
func (s *Shape) CSVHeader() string {
	return strings.Join(append(append([]string{"time"}, s.Dims...), s.Metrics...), ",")
}

// IngestCSVSQL is DuckDB's side of the CSV ingestion job: read the CSV files (types given, as
// the spec gives writeout's), sort by (time, dimensions) and write one zstd Parquet file.
func (s *Shape) IngestCSVSQL(paths []string, dst string) string {
	cols := []string{"'time': 'BIGINT'"}
	for _, d := range s.Dims {
		cols = append(cols, fmt.Sprintf("'%s': 'VARCHAR'", d))
	}
	for _, m := range s.Metrics {
		cols = append(cols, fmt.Sprintf("'%s': 'BIGINT'", m))
	}
	return fmt.Sprintf("COPY (SELECT * FROM read_csv(%s, header=true, columns={%s}) ORDER BY time, %s) "+
		"TO %s (FORMAT parquet, COMPRESSION zstd)", fileList(paths), strings.Join(cols, ", "), strings.Join(s.Dims, ", "), quote(dst))
}

// WriteCSVInputs writes events split into Inputs CSV files in time order (the contiguous
// layout, as exports of consecutive periods are) under dir, events-0.csv ... events-4.csv, and
// returns their paths and bytes.
func WriteCSVInputs(dir string, ev []Event) ([]string, int64, error) {
	parts, err := Split(ev, Contiguous)
	if err != nil {
		return nil, 0, err
	}
	var paths []string
	var total int64
	for i, p := range parts {
		path := csvPaths(dir)[i]
		n, err := WriteCSV(path, p)
		if err != nil {
			return nil, 0, err
		}
		paths, total = append(paths, path), total+n
	}
	return paths, total, nil
}

// CSVInputs returns the paths of the CSV files WriteCSVInputs (or Prepare) wrote under dir.
func CSVInputs(dir string) ([]string, error) {
	paths := csvPaths(dir)
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// csvPaths are the paths of the CSV inputs under dir, events-0.csv ... events-4.csv (the same
// names for every shape).
func csvPaths(dir string) []string {
	paths := make([]string, Inputs)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("events-%d.csv", i))
	}
	return paths
}
