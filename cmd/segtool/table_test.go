package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/merger/table"
)

// tableFixture generates 3 segments of 2000 rows in dir and makes a table of them at loc:
// segments 0 and 1 in version 2, segment 2 in version 3. It returns the segments' paths.
func tableFixture(t *testing.T, dir, loc string, writeFlags ...string) []string {
	t.Helper()
	mustSegtool(t, "gen", "--schema", "basic", "--rows", "2000", "--segments", "3", "--seed", "4242", "--durability", "none", "--out", dir)
	segs := make([]string, 3)
	for i := range segs {
		segs[i] = filepath.Join(dir, fmt.Sprintf("basic-%04d.seg", i))
	}
	mustSegtool(t, append(append([]string{"table", "create"}, writeFlags...), loc)...)
	mustSegtool(t, append(append([]string{"table", "append"}, writeFlags...), loc, segs[0], segs[1])...)
	mustSegtool(t, append(append([]string{"table", "append"}, writeFlags...), loc, segs[2])...)
	return segs
}

// queryTotals runs query with args and returns its one row by column name.
func queryTotals(t *testing.T, args ...string) map[string]string {
	t.Helper()
	out := mustSegtool(t, append([]string{"query"}, args...)...)
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 2, "one group: %s", out)
	row := map[string]string{}
	for i, name := range recs[0] {
		row[name] = recs[1][i]
	}
	return row
}

// parquetTotals reads a Parquet file with parquet-go and returns its rows and the sum of the
// long column name.
func parquetTotals(t *testing.T, path, name string) (rows, sum int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	col := -1
	for i, fl := range f.Schema().Fields() {
		if fl.Name() == name {
			col = i
		}
	}
	require.GreaterOrEqual(t, col, 0, "no column %s", name)
	buf := make([]parquet.Row, 256)
	for _, rg := range f.RowGroups() {
		rr := rg.Rows()
		for {
			n, err := rr.ReadRows(buf)
			for _, row := range buf[:n] {
				rows++
				for _, v := range row {
					if v.Column() == col && !v.IsNull() {
						sum += v.Int64()
					}
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
		}
		require.NoError(t, rr.Close())
	}
	require.Equal(t, f.NumRows(), rows)
	return rows, sum
}

// checkTableInspectExport checks inspect and export of the table at loc made by tableFixture
// from segs: the totals of version 3 (the newest) and of version 2 (--version), against the
// log, the segment files and query; out is a directory for the exports.
func checkTableInspectExport(t *testing.T, loc string, segs []string, out string) {
	t.Helper()
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		return fi.Size()
	}
	for _, c := range []struct {
		version string
		segs    []string
	}{{"0", segs}, {"2", segs[:2]}} {
		var rep tableReport
		require.NoError(t, json.Unmarshal([]byte(mustSegtool(t, "inspect", "--json", "--version", c.version, loc)), &rep))
		wantVersion := 3
		if c.version != "0" {
			wantVersion, _ = strconv.Atoi(c.version)
		}
		require.Equal(t, wantVersion, rep.Version)
		require.Equal(t, len(c.segs), rep.SegmentCount)
		require.Len(t, rep.Segments, len(c.segs))
		var bytes int64
		for _, p := range c.segs {
			bytes += size(p)
		}
		require.Equal(t, int64(2000*len(c.segs)), rep.Rows)
		require.Equal(t, bytes, rep.Bytes)
		var segRows, segBytes int64
		for _, s := range rep.Segments {
			require.True(t, strings.HasPrefix(s.Name, "segments/"), s.Name)
			segRows += s.Rows
			segBytes += s.Bytes
			iv, err := table.ParseInterval(s.Interval)
			require.NoError(t, err)
			require.True(t, rep.Interval.Start <= iv.Start && iv.End <= rep.Interval.End, "%s outside %s", s.Interval, rep.IntervalISO)
		}
		require.Equal(t, rep.Rows, segRows)
		require.Equal(t, rep.Bytes, segBytes)
		require.NotNil(t, rep.Schema)
		require.Equal(t, "__time", rep.Columns[0].Name)
		require.Len(t, rep.Columns, 1+len(rep.Schema.Dimensions)+len(rep.Schema.Metrics))

		text := mustSegtool(t, "inspect", "--version", c.version, loc)
		require.Regexp(t, fmt.Sprintf(`(?m)^version +%d$`, wantVersion), text)
		require.Regexp(t, fmt.Sprintf(`(?m)^segments +%d$`, len(c.segs)), text)
		require.Regexp(t, fmt.Sprintf(`(?m)^rows +%d$`, 2000*len(c.segs)), text)
		require.Regexp(t, fmt.Sprintf(`(?m)^size +.* \(%d bytes\)$`, bytes), text)
		require.Regexp(t, `(?m)^interval +`+regexp.QuoteMeta(rep.IntervalISO)+`$`, text)
		require.Regexp(t, `(?m)^sumLongSequential +long longSum$`, text)
		require.Equal(t, len(c.segs), strings.Count(text, "\nsegments/"), text)

		pq := filepath.Join(out, "v"+c.version+".parquet")
		mustSegtool(t, "export", "--quiet", "--version", c.version, "--out", pq, loc)
		rows, sum := parquetTotals(t, pq, "sumLongSequential")
		q := queryTotals(t, "--version", c.version, loc)
		require.Equal(t, q["__rows"], strconv.FormatInt(rows, 10))
		require.Equal(t, q["sumLongSequential"], strconv.FormatInt(sum, 10))
		// The same as the segment files give.
		qf := queryTotals(t, c.segs...)
		require.Equal(t, qf, q)
	}
	code, _, errs := segtool(t, "inspect", "--version", "2", segs[0])
	require.Equal(t, exitUsage, code, errs)
	code, _, errs = segtool(t, "export", "--version", "2", "--out", filepath.Join(out, "x.parquet"), segs[0])
	require.Equal(t, exitUsage, code, errs)
	code, _, errs = segtool(t, "inspect", "--version", "9", loc)
	require.Equal(t, exitFailure, code)
	require.Contains(t, errs, "version 9")
}

// TestTableInspectExport: inspect and export of a local table: the totals of its newest
// version and of --version 2 equal the log's, the segment files' and query's; an empty table
// inspects and does not export.
func TestTableInspectExport(t *testing.T) {
	dir := t.TempDir()
	loc := filepath.Join(dir, "tbl")
	segs := tableFixture(t, filepath.Join(dir, "data"), loc)
	checkTableInspectExport(t, loc, segs, dir)

	empty := filepath.Join(dir, "empty")
	mustSegtool(t, "table", "create", empty)
	text := mustSegtool(t, "inspect", empty)
	require.Regexp(t, `(?m)^segments +0$`, text)
	require.Regexp(t, `(?m)^schema +none yet`, text)
	code, _, errs := segtool(t, "export", "--out", filepath.Join(dir, "empty.parquet"), empty)
	require.Equal(t, exitFailure, code)
	require.Contains(t, errs, "holds no segment in version 1")
	require.NoFileExists(t, filepath.Join(dir, "empty.parquet"))
}

// TestTableInspectExportS3: the same of a table on S3.
func TestTableInspectExportS3(t *testing.T) {
	srv := startSeg(t)
	useS3(t, srv.URL)
	dir := t.TempDir()
	segs := tableFixture(t, filepath.Join(dir, "data"), "s3://seg/tables/t/")
	checkTableInspectExport(t, "s3://seg/tables/t/", segs, dir)
}

// TestTableSingleWriter: on a service that ignores If-None-Match, create, append and compact
// are refused with an error naming --single-writer; with it they commit, and the table reads
// right. vacuum needs no conditional write.
func TestTableSingleWriter(t *testing.T) {
	srv := startSeg(t)
	srv.IgnoreConditionalWrites()
	useS3(t, srv.URL)
	dir := t.TempDir()
	loc := "s3://seg/tables/t/"
	refused := func(args ...string) {
		t.Helper()
		code, _, errs := segtool(t, args...)
		require.Equal(t, exitFailure, code, errs)
		require.Contains(t, errs, "does not honour conditional writes")
		require.Contains(t, errs, "--single-writer")
	}
	refused("table", "create", loc)
	segs := tableFixture(t, filepath.Join(dir, "data"), loc, "--single-writer")
	refused("table", "append", loc, segs[0])
	refused("table", "compact", loc)
	files := queryTotals(t, segs...)
	require.Equal(t, files, queryTotals(t, loc))

	out := mustSegtool(t, "table", "compact", "--single-writer", loc)
	require.Contains(t, out, "replaced 3 segment(s), 6000 rows,")
	require.Contains(t, out, "version 4: 1 segments, 6000 rows live")
	require.Equal(t, files, queryTotals(t, loc))
	mustSegtool(t, "table", "vacuum", "--pending-age", "0", loc)
	require.Equal(t, files, queryTotals(t, loc))
	mustSegtool(t, "verify", loc)
	log := mustSegtool(t, "table", "log", loc)
	require.Regexp(t, `(?m)^4 +\S+Z +replace +1 +3 +1 +6000$`, log)
	keys, err := srv.Keys("seg", "tables/t/_log/")
	require.NoError(t, err)
	require.Equal(t, []string{"tables/t/_log/00000000000000000004.json"}, keys, "the probes removed, older entries vacuumed")
}
