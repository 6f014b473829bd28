package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// progressFixture generates a segment of rows rows and the CSV of the same rows with its spec.
func progressFixture(t *testing.T, rows int) (dir, seg, csvPath, spec string) {
	t.Helper()
	dir = t.TempDir()
	n := fmt.Sprint(rows)
	code, _, stderr := runSegtool(t, "gen", "--rows", n, "--out", filepath.Join(dir, "seg"))
	require.Equal(t, 0, code, stderr)
	code, _, stderr = runSegtool(t, "gen", "--rows", n, "--format", "csv", "--out", filepath.Join(dir, "csv"))
	require.Equal(t, 0, code, stderr)
	return dir, filepath.Join(dir, "seg", "basic-0000.seg"), filepath.Join(dir, "csv", "basic-0000.csv"),
		filepath.Join(dir, "csv", "basic-spec.json")
}

// progressCommands are the commands with a progress bar, each with the stages its bar ends
// with at 100% on rows rows of the fixture (out names a new output in dir).
func progressCommands(dir, seg, csvPath, spec string, rows int, out func(string) string) []struct {
	args   []string
	finals []string
} {
	r := fmt.Sprintf("(%d/%d", rows, rows)
	return []struct {
		args   []string
		finals []string
	}{
		{[]string{"dump", seg}, []string{"dumping 100%", r}},
		{[]string{"query", "--group-by", "dimZipf", seg}, []string{"querying 100%", r}},
		{[]string{"export", "--out", out("x.parquet"), seg}, []string{"exporting 100%", r}},
		{[]string{"ingest", "--spec", spec, "--out", out("x.seg"), csvPath}, []string{"reading 100%", "writing 100%", r}},
		{[]string{"merge", "--out", out("m.seg"), seg}, []string{"merging", r}},
	}
}

// TestProgressAlways: with --progress always each command draws its bar on standard error
// until it shows the total (100%, all rows), then clears its line before the summary; with
// the default (auto), --progress never or --quiet, and standard error no terminal, nothing.
func TestProgressAlways(t *testing.T) {
	const rows = 70_000 // more than a batch of progress (65,536 rows)
	dir, seg, csvPath, spec := progressFixture(t, rows)
	n := 0
	out := func(name string) string {
		n++
		return filepath.Join(dir, fmt.Sprint(n), name)
	}
	for _, c := range progressCommands(dir, seg, csvPath, spec, rows, out) {
		t.Run(c.args[0], func(t *testing.T) {
			args := append([]string{c.args[0], "--progress", "always"}, c.args[1:]...)
			var sets []int64 // what the work reported (finish alone would show 100% too)
			testHookProgressSet = func(n int64) { sets = append(sets, n) }
			defer func() { testHookProgressSet = nil }()
			code, stdout, stderr := runSegtool(t, args...)
			testHookProgressSet = nil
			require.Equal(t, 0, code, stderr)
			require.Contains(t, sets, int64(rows), "the work reported its every row")
			if c.args[0] == "ingest" {
				fi, err := os.Stat(csvPath)
				require.NoError(t, err)
				require.Contains(t, sets, fi.Size(), "ingest reported every byte of its input")
			}
			for _, f := range c.finals {
				require.Contains(t, stderr, f)
			}
			// The last thing on standard error blanks the bar's line and returns to its start.
			require.True(t, strings.HasSuffix(stderr, "\r"), "%q", lastBytes(stderr))
			last := stderr[strings.LastIndexByte(stderr[:len(stderr)-1], '\r')+1 : len(stderr)-1]
			require.Empty(t, strings.TrimSpace(last), "%q", lastBytes(stderr))
			require.NotContains(t, stdout, "\r")

			variants := [][]string{{}, {"--progress", "auto"}, {"--progress", "never"}}
			if c.args[0] != "dump" && c.args[0] != "query" {
				variants = append(variants, []string{"--progress", "always", "--quiet"})
			}
			for _, v := range variants {
				args := append(append([]string{c.args[0]}, v...), c.args[1:]...)
				for i, a := range args {
					if a == "--out" { // a new output each run
						args[i+1] = out(filepath.Base(args[i+1]))
					}
				}
				code, _, stderr := runSegtool(t, args...)
				require.Equal(t, 0, code, stderr)
				require.Empty(t, stderr, "%v", v)
			}
			code, _, stderr = runSegtool(t, append([]string{c.args[0], "--progress", "sometimes"}, c.args[1:]...)...)
			require.Equal(t, 2, code)
			require.Contains(t, stderr, `--progress "sometimes": want auto, always or never`)
		})
	}
}

// lastBytes is the end of s, for messages.
func lastBytes(s string) string { return s[max(0, len(s)-200):] }

// A command that fails after its bar was drawn clears the bar's line before its error.
func TestProgressError(t *testing.T) {
	_, seg, _, _ := progressFixture(t, 1000)
	var errb bytes.Buffer
	code := run(context.Background(), []string{"dump", "--progress", "always", seg}, nil, &failWriter{}, &errb)
	require.NotEqual(t, 0, code)
	stderr := errb.String()
	require.Contains(t, stderr, "dumping", "the bar was drawn")
	lines := strings.Split(stderr, "\r")
	errLine := lines[len(lines)-1]
	require.True(t, strings.HasPrefix(errLine, "segtool: "), "%q", lastBytes(stderr))
	require.Empty(t, strings.TrimSpace(lines[len(lines)-2]), "the bar's line is blank: %q", lastBytes(stderr))
}

// TestProgressPTY runs the commands under a pseudo-terminal (script -qc): their bars end at
// 100% on standard error. dump and query show none when standard output is the terminal too.
func TestProgressPTY(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("script -qc CMD FILE is util-linux's")
	}
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script command")
	}
	const rows = 70_000
	dir, seg, csvPath, spec := progressFixture(t, rows)
	bin := segtoolBinary(t)
	n := 0
	out := func(name string) string {
		n++
		return filepath.Join(dir, fmt.Sprint(n), name)
	}
	pty := func(t *testing.T, command string) string {
		t.Helper()
		cmd := exec.Command(script, "-qc", command, "/dev/null")
		cmd.Stdin = nil
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", command, b)
		return string(b)
	}
	for _, c := range progressCommands(dir, seg, csvPath, spec, rows, out) {
		t.Run(c.args[0], func(t *testing.T) {
			command := shellQuote(append([]string{bin}, c.args...)) + " > " + shellQuote([]string{filepath.Join(dir, "stdout")})
			got := pty(t, command)
			for _, f := range c.finals {
				require.Contains(t, got, f)
			}
			if c.args[0] == "dump" || c.args[0] == "query" {
				// Standard output on the terminal: no bar among the rows.
				got := pty(t, shellQuote(append([]string{bin}, c.args...)))
				require.NotContains(t, got, "100%")
				require.NotContains(t, got, "\r ")
			}
		})
	}
	// Standard input from a pipe: bytes counted without a total, no percentage.
	got := pty(t, "cat "+shellQuote([]string{csvPath})+" | "+shellQuote([]string{bin, "ingest", "--format", "csv", "--spec", spec, "--out", out("p.seg"), "-"}))
	require.Contains(t, got, "reading (")
	require.NotContains(t, got, "reading 100%")
	require.Contains(t, got, "writing 100%")
}

// shellQuote quotes words for sh.
func shellQuote(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// A message while the bar is drawn (ingest's warnings, rows skipped) starts on a line of its
// own: above clears the bar's line first, and the bar is drawn again at its next update.
func TestProgressMessageAboveBar(t *testing.T) {
	var buf bytes.Buffer
	p := newProgressBar(&buf)
	p.stage("reading", 100, unitRows, false)
	p.set(40)
	require.Contains(t, buf.String(), "reading  40%")
	fmt.Fprintf(p.above(&buf), "segtool: warning: w\n")
	s := buf.String()
	i := strings.Index(s, "segtool: warning: w\n")
	require.Positive(t, i)
	require.Equal(t, byte('\r'), s[i-1], "the message starts its line: %q", s)
	blank := s[strings.LastIndexByte(s[:i-1], '\r')+1 : i-1]
	require.NotEmpty(t, blank)
	require.Empty(t, strings.TrimSpace(blank), "the bar's line was blanked: %q", s)
	time.Sleep(150 * time.Millisecond) // past the bar's throttle
	p.set(60)
	require.Contains(t, buf.String()[i:], "reading  60%", "drawn again below the message")
	p.finish(true)
	require.Contains(t, buf.String(), "reading 100%")
	n := buf.Len()
	p.set(70) // after finish: nothing drawn
	fmt.Fprintf(p.above(&buf), "after\n")
	require.Equal(t, "after\n", buf.String()[n:])
}
