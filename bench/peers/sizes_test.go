package peers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger"
)

// writeOneSegment writes events (in order) as one segment with the given bitmap indexes and
// compression, through a merger.Builder (rollup off) persisted without sync, and returns its
// bytes.
func writeOneSegment(tb testing.TB, ev []Event, bitmaps bool, comp columns.Compression) []byte {
	tb.Helper()
	s := Schema()
	for i := range s.Dimensions {
		s.Dimensions[i].NoBitmapIndex = !bitmaps
	}
	bld, err := merger.NewBuilder(s, merger.BuilderOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	defer bld.Close()
	if err := eachRow(ev, bld.Add); err != nil {
		tb.Fatal(err)
	}
	dst := filepath.Join(tb.TempDir(), "one.seg")
	if _, err := bld.Persist(context.Background(), dst, merger.PersistOptions{Compression: comp, Durability: noSync}); err != nil {
		tb.Fatal(err)
	}
	data, err := os.ReadFile(dst)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// TestSizes (WRITEOUT_PEERS_SIZES=1; rows from WRITEOUT_PEERS_ROWS, else 3,000,000) prints the
// size of the generated table as one writeout segment, with and without bitmap indexes, under
// each compression, against DuckDB's zstd Parquet file of the same rows, and the per-part sizes
// of our segments. Every segment is read back and compared with the rows.
func TestSizes(t *testing.T) {
	if os.Getenv("WRITEOUT_PEERS_SIZES") == "" {
		t.Skip("set WRITEOUT_PEERS_SIZES=1 to measure the sizes")
	}
	rows := benchRows(t)
	ev := Generate(rows)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	if _, err := WriteParquet(in, ev); err != nil {
		t.Fatal(err)
	}
	db, err := OpenDuckDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	duck := filepath.Join(dir, "duckdb.parquet")
	if _, err := db.Exec(context.Background(), MergeSQL([]string{in}, duck)); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(duck)
	if err != nil {
		t.Fatal(err)
	}
	duckBytes := st.Size()
	mib := func(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
	var report strings.Builder
	fmt.Fprintf(&report, "%d rows; DuckDB zstd Parquet (COPY ... ORDER BY time, d1, d2, d3): %d bytes (%s)\n\n", rows, duckBytes, mib(duckBytes))
	fmt.Fprintf(&report, "| segment | compression | bytes | MiB | x DuckDB | format version |\n|---|---|---|---|---|---|\n")
	var parts strings.Builder
	for _, bitmaps := range []bool{false, true} {
		for _, comp := range []columns.Compression{columns.CompressionNone, columns.CompressionS2, columns.CompressionZstd} {
			b := writeOneSegment(t, ev, bitmaps, comp)
			seg, err := columns.NewSegment(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			checkSegment(t, seg, ev)
			name := "without bitmaps"
			if bitmaps {
				name = "with bitmaps"
			}
			fmt.Fprintf(&report, "| %s | %s | %d | %s | %.3f | %d |\n", name, comp, len(b), mib(int64(len(b))), float64(len(b))/float64(duckBytes), b[5])
			fmt.Fprintf(&parts, "\n%s, %s: parts (bytes, bits a row, encoding)\n", name, comp)
			for _, p := range seg.Info().Parts {
				fmt.Fprintf(&parts, "  %-6s %-10s %10d  %6.2f  %s\n", p.Column, p.Kind, p.Length, 8*float64(p.Length)/float64(rows), p.Encoding)
			}
		}
	}
	t.Log("\n" + report.String() + parts.String())
}

// checkSegment reads every column of seg back and compares it with ev.
func checkSegment(t *testing.T, seg *columns.Segment, ev []Event) {
	t.Helper()
	if err := seg.Verify(); err != nil {
		t.Fatal(err)
	}
	if seg.Rows() != len(ev) {
		t.Fatalf("%d rows, want %d", seg.Rows(), len(ev))
	}
	rr := seg.RowReader()
	var r columns.Row
	for i := range ev {
		if err := rr.Read(i, &r); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		e := &ev[i]
		if r.Time != e.Time || r.Dims[0][0] != e.D1 || r.Dims[1][0] != e.D2 || r.Dims[2][0] != e.D3 ||
			r.Metrics[0].Long != e.M1 || r.Metrics[1].Long != e.M2 || r.Metrics[2].Long != e.M3 {
			t.Fatalf("row %d: got %+v, want %+v", i, r, *e)
		}
	}
}
