package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"
)

var updateTour = flag.Bool("update-tour", false, "rewrite testdata/tour/edits-3.parquet")

// tourEdit is one row of the tour's Parquet file: the columns of edits-1.csv as a Parquet writer
// elsewhere would type them (a TIMESTAMP(MILLIS) time, a LIST of tags, nullable languages and
// counts).
type tourEdit struct {
	Time     time.Time `parquet:"time,timestamp(millisecond)"`
	Page     string    `parquet:"page,dict"`
	Language *string   `parquet:"language,optional,dict"`
	Tags     []string  `parquet:"tags,list"`
	User     string    `parquet:"user,dict"`
	Added    *int64    `parquet:"added,optional"`
	Deleted  *int64    `parquet:"deleted,optional"`
}

// tourParquet returns the bytes of testdata/tour/edits-3.parquet: the third hour of edits, with
// a missing language and missing deleted counts (nulls) and multi-value tags as a list.
func tourParquet(t *testing.T) []byte {
	t.Helper()
	s := func(v string) *string { return &v }
	n := func(v int64) *int64 { return &v }
	at := func(hms string) time.Time {
		ts, err := time.Parse(time.RFC3339, "2024-05-01T"+hms+"Z")
		require.NoError(t, err)
		return ts
	}
	rows := []tourEdit{
		{Time: at("13:04:19"), Page: "Main_Page", Language: s("en"), Tags: []string{"minor"}, User: "Alice", Added: n(18), Deleted: n(2)},
		{Time: at("13:12:55"), Page: "Paris", Language: s("fr"), Tags: []string{"bot", "minor"}, User: "ParisBot", Added: n(3), Deleted: nil},
		{Time: at("13:27:03"), Page: "Berlin", Language: nil, Tags: nil, User: "Dieter", Added: n(41), Deleted: nil},
		{Time: at("13:41:37"), Page: "Paris", Language: s("fr"), Tags: []string{"bot", "minor"}, User: "ParisBot", Added: n(9), Deleted: nil},
		{Time: at("13:58:10"), Page: "Go_(language)", Language: s("en"), Tags: nil, User: "Carol", Added: nil, Deleted: n(7)},
	}
	var buf bytes.Buffer
	// CreatedBy is fixed: parquet-go's default reads the build information, which differs
	// between binaries (a test binary that imports parquet-go only from tests has no version).
	w := parquet.NewGenericWriter[tourEdit](&buf, parquet.Compression(&parquet.Zstd),
		parquet.CreatedBy("github.com/parquet-go/parquet-go", "", ""))
	_, err := w.Write(rows)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// TestTourParquetFixture keeps the tour's Parquet file reproducible: it must be exactly what
// tourParquet writes (go test ./cmd/segtool -run TestTourParquetFixture -update-tour rewrites it).
func TestTourParquetFixture(t *testing.T) {
	want := tourParquet(t)
	path := filepath.Join("testdata", "tour", "edits-3.parquet")
	if *updateTour {
		require.NoError(t, os.WriteFile(path, want, 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, got, "%s is not what tourParquet writes; rerun with -update-tour", path)
}
