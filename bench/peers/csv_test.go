package peers

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/writeout/writeout/merger/ingest"
)

// TestWriteCSVFiles writes the inputs of the CSV ingestion job (issue 14, bar 4) when
// WRITEOUT_PEERS_CSV_DIR names a directory: the WRITEOUT_PEERS_ROWS rows (default 3,000,000)
// split into Inputs files in time order (the contiguous layout, as exports of consecutive
// periods are), events-0.csv ... events-4.csv, and spec.json (IngestSpec) beside them.
func TestWriteCSVFiles(t *testing.T) {
	dir := os.Getenv("WRITEOUT_PEERS_CSV_DIR")
	if dir == "" {
		t.Skip("WRITEOUT_PEERS_CSV_DIR names the directory to write the CSV inputs to")
	}
	_, total := writeCSVFiles(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "spec.json"), []byte(IngestSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d CSV files, %d bytes in %s", Inputs, total, dir)
}

// BenchmarkIngestCSV ingests WRITEOUT_PEERS_ROWS rows (default 3,000,000) from Inputs CSV files
// (TestWriteCSVFiles's, written once outside the timer) into one sorted output, side by side:
// writeout's ingest.Run (the work of `segtool ingest`) into a segment, and DuckDB (2 threads)
// reading the files with read_csv into one zstd Parquet file sorted by (time, d1, d2, d3). The
// bar (issue 14, bar 4) is on whole processes: bench/scripts/ingest_csv_vs_duckdb.sh.
func BenchmarkIngestCSV(b *testing.B) {
	dir := b.TempDir()
	paths, inBytes := writeCSVFiles(b, dir) // the events are garbage from here
	runtime.GC()
	sp, err := ingest.ParseSpec([]byte(IngestSpec))
	if err != nil {
		b.Fatal(err)
	}
	db, err := OpenDuckDB()
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	run := func(system, ext string, op func(dst string) (int64, error)) {
		b.Run("system="+system, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(inBytes)
			dst := filepath.Join(dir, "out"+ext)
			for b.Loop() {
				rows, err := op(dst)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				st, err := os.Stat(dst)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(st.Size()), "out-bytes")
				b.ReportMetric(float64(rows), "rows-out")
				if err := os.Remove(dst); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				b.StartTimer()
			}
		})
	}
	run("writeout", ".seg", func(dst string) (int64, error) {
		inputs := make([]ingest.Input, len(paths))
		for i, p := range paths {
			inputs[i] = ingest.Input{Path: p}
		}
		res, err := ingest.Run(bg, sp, inputs, ingest.Options{Out: dst, Durability: noSync})
		if err != nil {
			return 0, err
		}
		return res.InputRows, nil
	})
	run("duckdb", ".parquet", func(dst string) (int64, error) {
		return db.Exec(bg, IngestCSVSQL(paths, dst))
	})
}

// writeCSVFiles writes benchRows events as WriteCSVInputs does and returns their paths and
// bytes.
func writeCSVFiles(tb testing.TB, dir string) ([]string, int64) {
	tb.Helper()
	paths, total, err := WriteCSVInputs(dir, Generate(benchRows(tb)))
	if err != nil {
		tb.Fatal(err)
	}
	return paths, total
}
