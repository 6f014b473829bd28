package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fields parses a line of key=value pairs.
func fields(t *testing.T, line string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		require.True(t, ok, "field %q of %q", f, line)
		out[k] = v
	}
	return out
}

func num(t *testing.T, kv map[string]string, k string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(kv[k], 64)
	require.NoError(t, err, "%s=%q", k, kv[k])
	return v
}

func TestPrepareAndRun(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	var out bytes.Buffer
	require.NoError(t, run([]string{"prepare", "-rows", "3000", in}, &out))
	require.Contains(t, out.String(), "layout=contiguous rows=3000 seg_bytes=")
	require.Contains(t, out.String(), "layout=overlapping rows=3000 seg_bytes=")
	require.Contains(t, out.String(), "csv rows=3000 csv_bytes=")
	require.Contains(t, out.String(), "shape=events prepared rows=3000 wall_s=")

	for _, c := range []struct{ system, job, layout, rows string }{
		{"writeout", "merge", "contiguous", "3000"},
		{"writeout-zstd", "merge", "overlapping", "3000"},
		{"parquet-go", "merge", "contiguous", "3000"},
		{"duckdb", "merge", "overlapping", "3000"},
		{"writeout", "rollup-hour", "contiguous", ""},
		{"duckdb", "rollup-hour", "contiguous", ""},
		{"writeout", "ingest-csv", "contiguous", "3000"},
		{"duckdb", "ingest-csv", "contiguous", "3000"},
	} {
		dst := filepath.Join(dir, "out-"+c.system+"-"+c.job)
		trace := filepath.Join(dir, "trace-"+c.system+"-"+c.job)
		out.Reset()
		require.NoError(t, run([]string{"run", "-system", c.system, "-job", c.job, "-layout", c.layout, "-trace", trace, in, dst}, &out))
		require.Equal(t, 1, strings.Count(out.String(), "\n"), out.String())
		kv := fields(t, out.String())
		require.Equal(t, "events", kv["shape"])
		require.Equal(t, c.system, kv["system"])
		require.Equal(t, c.job, kv["job"])
		require.Equal(t, c.layout, kv["layout"])
		if c.rows != "" {
			require.Equal(t, c.rows, kv["rows_out"])
		} else { // the rollup: fewer rows than the input's, the same on both sides
			require.Less(t, num(t, kv, "rows_out"), 3000.0)
			require.Positive(t, num(t, kv, "rows_out"))
		}
		st, err := os.Stat(dst)
		require.NoError(t, err)
		require.Equal(t, strconv.FormatInt(st.Size(), 10), kv["out_bytes"])
		require.Positive(t, num(t, kv, "wall_s"))
		require.Positive(t, num(t, kv, "samples"))
		if strings.HasPrefix(c.system, "writeout") && c.job != "ingest-csv" {
			// A writeout merge's steps: every step took some time, and no more than the job.
			for _, k := range []string{"dict_ms", "rows_ms", "bitmaps_ms", "publish_ms"} {
				require.GreaterOrEqual(t, num(t, kv, k), 0.0, k)
				require.Less(t, num(t, kv, k), 1000*num(t, kv, "wall_s")+1, k)
			}
			require.Positive(t, num(t, kv, "rows_ms"))
		} else {
			require.NotContains(t, kv, "rows_ms")
		}
		// The kernel's peak covers every sample; each figure's peak covers its part.
		rss, anon, file := num(t, kv, "peak_rss_MiB"), num(t, kv, "peak_anon_MiB"), num(t, kv, "peak_file_MiB")
		require.Positive(t, anon)
		require.Positive(t, file)
		require.GreaterOrEqual(t, rss+0.1, max(anon, file, num(t, kv, "base_rss_MiB")))
		tr, err := os.ReadFile(trace)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(tr)), "\n")
		require.Equal(t, "ms vmrss_MiB rssanon_MiB rssfile_MiB", lines[0])
		require.Len(t, lines, int(num(t, kv, "samples"))+1)
	}
}

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	f := func(want string, args ...string) {
		t.Helper()
		err := run(args, &out)
		require.ErrorContains(t, err, want)
	}
	f("usage")
	f("unknown command", "frob")
	f("usage", "prepare")
	f("-rows 2: want at least 5", "prepare", "-rows", "2", dir)
	f(`unknown shape "hours"`, "prepare", "-shape", "hours", dir)
	f("unknown layout", "run", "-system", "writeout", "-job", "merge", "-layout", "diagonal", dir, "out")
	f("run peerjob prepare", "run", "-system", "writeout", "-job", "merge", "-layout", "contiguous", dir, "out")
	require.NoError(t, run([]string{"prepare", "-rows", "10", dir}, &out))
	f("unknown system", "run", "-system", "sqlite", "-job", "merge", "-layout", "contiguous", dir, "out")
	f("unknown job", "run", "-system", "writeout", "-job", "sort", "-layout", "contiguous", dir, "out")
	f("only the merge job", "run", "-system", "parquet-go", "-job", "rollup-hour", "-layout", "contiguous", dir, "out")
	f("SET memory_limit", "run", "-system", "duckdb", "-duckdb-memory-limit", "lots", "-job", "merge", "-layout", "contiguous", dir, "out")
}

// TestMinutes: prepare and run on the minutes shape, the shape taken from the manifest;
// DuckDB with a memory limit and a temp directory; both rollups give the same rows.
func TestMinutes(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	var out bytes.Buffer
	require.NoError(t, run([]string{"prepare", "-shape", "minutes", "-rows", "5000", "-batch", "700", "-run-rows", "900", "-csv=false", in}, &out))
	require.Contains(t, out.String(), "shape=minutes layout=contiguous rows=5000 seg_bytes=")
	require.Contains(t, out.String(), "shape=minutes layout=overlapping rows=5000 seg_bytes=")
	require.NotContains(t, out.String(), "csv rows")
	require.NoDirExists(t, filepath.Join(in, "csv"))
	spill := filepath.Join(dir, "spill")
	rollups := map[string]string{}
	for _, c := range []struct{ system, job, layout string }{
		{"writeout", "merge", "contiguous"},
		{"writeout", "rollup-hour", "overlapping"},
		{"duckdb", "merge", "overlapping"},
		{"duckdb", "rollup-hour", "contiguous"},
		{"parquet-go", "merge", "overlapping"},
	} {
		out.Reset()
		dst := filepath.Join(dir, "out-"+c.system+"-"+c.job)
		require.NoError(t, run([]string{"run", "-system", c.system, "-job", c.job, "-layout", c.layout,
			"-duckdb-memory-limit", "256MB", "-duckdb-temp-dir", spill, in, dst}, &out))
		kv := fields(t, out.String())
		require.Equal(t, "minutes", kv["shape"])
		require.Equal(t, c.system, kv["system"])
		if c.job == "merge" {
			require.Equal(t, "5000", kv["rows_out"])
		} else {
			rollups[c.system] = kv["rows_out"]
		}
	}
	require.Equal(t, rollups["writeout"], rollups["duckdb"])
	n, err := strconv.Atoi(rollups["writeout"])
	require.NoError(t, err)
	require.Less(t, n, 5000)
}
