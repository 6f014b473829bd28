package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// TestHelpExamples runs every example that --help prints, for the root command and every
// subcommand, each in a fresh copy of a directory holding the files the examples name (see
// exampleFixtures), with segtool on PATH (TestMain puts the test binary there under that
// name). Every example must exit 0: an example that cannot run here must be rewritten so that
// it can, and a file an example names must be added to the fixtures.
//
// An example runs with bash -o pipefail, so that a failing segtool fails its pipeline; a
// pipeline whose other programs (zcat, head, jq) are missing is skipped. What an example writes
// (its --out) is removed from its copy first, as the commands refuse to overwrite.
func TestHelpExamples(t *testing.T) {
	_, err := exec.LookPath("segtool")
	require.NoError(t, err, "TestMain puts segtool on PATH")
	fixtures := exampleFixtures(t)
	seen := map[string]bool{}
	root, _ := newRoot()
	for _, c := range allCommands(root) {
		for _, line := range strings.Split(c.Example, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") || seen[line] {
				continue
			}
			seen[line] = true
			t.Run(line, func(t *testing.T) {
				t.Parallel()
				runExample(t, fixtures, c, line)
			})
		}
	}
	require.NotEmpty(t, seen)
}

// allCommands returns cmd and its subcommands, depth first.
func allCommands(cmd *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{cmd}
	for _, c := range cmd.Commands() {
		if c.Name() != "help" {
			out = append(out, allCommands(c)...)
		}
	}
	return out
}

func runExample(t *testing.T, fixtures string, cmd *cobra.Command, line string) {
	stages := pipeline(line)
	require.True(t, strings.Contains(line, "segtool "), "%s: an example of %q that does not run segtool", line, cmd.CommandPath())
	for _, st := range stages {
		fields := strings.Fields(st)
		require.NotEmpty(t, fields, "%s: an empty pipeline stage", line)
		if fields[0] != "segtool" {
			if _, err := exec.LookPath(fields[0]); err != nil {
				t.Skipf("%s is not installed", fields[0])
			}
		}
	}
	shell := []string{"bash", "-o", "pipefail", "-c", line}
	if _, err := exec.LookPath("bash"); err != nil {
		if len(stages) > 1 {
			t.Skip("bash is not installed: a pipeline's status would hide segtool's")
		}
		shell = []string{"sh", "-c", line}
	}

	if testing.Short() && line == "segtool demo" {
		t.Skip("the full demo takes about 10 s (-short)")
	}

	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(fixtures)))
	if out := outFlag(line); out != "" {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, out)))
	}
	tmp := filepath.Join(dir, "tmp") // the demo's and the media's temp files, removed with dir
	require.NoError(t, os.Mkdir(tmp, 0o755))

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	x := exec.CommandContext(ctx, shell[0], shell[1:]...)
	x.Dir = dir
	x.Env = append(os.Environ(), "TMPDIR="+tmp)
	if strings.Contains(line, "s3://") {
		x.Env = append(x.Env, exampleS3(t, dir, outFlag(line))...)
	}
	var stdout, stderr bytes.Buffer
	x.Stdout, x.Stderr = &stdout, &stderr
	err := x.Run()
	require.NoError(t, err, "example of %q failed: %s\nstdout:\n%s\nstderr:\n%s", cmd.CommandPath(), line, tail(stdout.String()), stderr.String())
}

// pipeline splits a shell line at the pipes outside quotes.
func pipeline(line string) []string {
	var out []string
	var quote rune
	start := 0
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '|':
			out = append(out, line[start:i])
			start = i + 1
		}
	}
	return append(out, line[start:])
}

// outFlag returns the value of --out in a shell line, or "".
func outFlag(line string) string {
	f := strings.Fields(line)
	for i, w := range f {
		if w == "--out" && i+1 < len(f) {
			return f[i+1]
		}
		if v, ok := strings.CutPrefix(w, "--out="); ok {
			return v
		}
	}
	return ""
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// exampleFixtures makes the files the --help examples name, from the README's tour data
// (testdata/tour) and generated segments:
//
//	spec.json                the tour's spec
//	events.csv, events.csv.gz the tour's edits-1.csv
//	edits.parquet            the tour's edits-3.parquet
//	day-1.ndjson, day-2.ndjson the tour's CSVs as NDJSON
//	events.seg, day1.seg      edits-1.csv ingested
//	day2.seg, day3.seg        edits-2.csv ingested
//	all.seg, merged.seg       day1.seg and day2.seg merged
//	data/*.seg                3 generated segments of the basic schema
//	parts/*.seg               10 small generated segments
//	scratch/                  an empty directory (--tmp-dir)
//	events/                   a table: day1.seg (version 2), day2.seg and day3.seg (version 3)
func exampleFixtures(t *testing.T) string {
	dir := t.TempDir()
	tour := "testdata/tour"
	copyFile := func(src, dst string) {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, dst), b, 0o644))
	}
	copyFile(filepath.Join(tour, "spec.json"), "spec.json")
	copyFile(filepath.Join(tour, "edits-1.csv"), "events.csv")
	copyFile(filepath.Join(tour, "edits-3.parquet"), "edits.parquet")

	raw, err := os.ReadFile(filepath.Join(tour, "edits-1.csv"))
	require.NoError(t, err)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(raw)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "events.csv.gz"), gz.Bytes(), 0o644))

	for i, name := range []string{"edits-1.csv", "edits-2.csv"} {
		writeNDJSON(t, filepath.Join(tour, name), filepath.Join(dir, "day-"+strconv.Itoa(i+1)+".ndjson"))
	}

	segtool := func(args ...string) {
		t.Helper()
		var stderr bytes.Buffer
		code := run(t.Context(), args, strings.NewReader(""), io.Discard, &stderr)
		require.Equal(t, exitOK, code, "segtool %s: %s", strings.Join(args, " "), stderr.String())
	}
	at := func(name string) string { return filepath.Join(dir, name) }
	spec := at("spec.json")
	segtool("ingest", "--quiet", "--spec", spec, "--out", at("events.seg"), filepath.Join(tour, "edits-1.csv"))
	segtool("ingest", "--quiet", "--spec", spec, "--out", at("day1.seg"), filepath.Join(tour, "edits-1.csv"))
	segtool("ingest", "--quiet", "--spec", spec, "--out", at("day2.seg"), filepath.Join(tour, "edits-2.csv"))
	segtool("ingest", "--quiet", "--spec", spec, "--out", at("day3.seg"), filepath.Join(tour, "edits-2.csv"))
	segtool("merge", "--quiet", "--out", at("all.seg"), at("day1.seg"), at("day2.seg"))
	segtool("merge", "--quiet", "--out", at("merged.seg"), at("day1.seg"), at("day2.seg"))
	lat := "ts,service,latency\n1700000000000,api,12\n1700000001000,api,250\n1700000002000,db,3\n"
	require.NoError(t, os.WriteFile(at("latencies.csv"), []byte(lat), 0o644))
	require.NoError(t, os.WriteFile(at("latencies-spec.json"), []byte(`{"timestamp": {"field": "ts", "format": "millis"},
		"dimensions": [{"name": "service"}],
		"metrics": [{"name": "latency_q", "aggregator": "quantiles", "fieldName": "latency"}]}`), 0o644))
	segtool("ingest", "--quiet", "--spec", at("latencies-spec.json"), "--out", at("latencies.seg"), at("latencies.csv"))
	segtool("gen", "--schema", "basic", "--rows", "2000", "--segments", "3", "--out", at("data"))
	segtool("gen", "--schema", "basic", "--rows", "200", "--segments", "10", "--out", at("parts"))
	require.NoError(t, os.Mkdir(at("scratch"), 0o755))
	segtool("table", "create", at("events"))
	segtool("table", "append", at("events"), at("day1.seg"))
	segtool("table", "append", at("events"), at("day2.seg"), at("day3.seg"))
	return dir
}

// writeNDJSON writes a tour CSV as NDJSON: tags as a list, added and deleted as numbers.
func writeNDJSON(t *testing.T, src, dst string) {
	f, err := os.Open(src)
	require.NoError(t, err)
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	for _, rec := range recs[1:] {
		obj := map[string]any{}
		for i, name := range recs[0] {
			v := rec[i]
			switch name {
			case "tags":
				if v == "" {
					obj[name] = nil
				} else {
					obj[name] = strings.Split(v, "|")
				}
			case "added", "deleted":
				n, err := strconv.ParseInt(v, 10, 64)
				require.NoError(t, err)
				obj[name] = n
			default:
				obj[name] = v
			}
		}
		require.NoError(t, enc.Encode(obj))
	}
	require.NoError(t, os.WriteFile(dst, out.Bytes(), 0o644))
}
