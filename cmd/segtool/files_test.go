package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runSegtool runs segtool in-process and returns its exit status, standard output and error.
func runSegtool(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, nil, &out, &errb)
	return code, out.String(), errb.String()
}

// genOne writes one small generated segment and returns its path.
func genOne(t *testing.T, dir string) string {
	t.Helper()
	code, _, stderr := runSegtool(t, "gen", "--rows", "500", "--out", dir)
	require.Equal(t, 0, code, stderr)
	return filepath.Join(dir, "basic-0000.seg")
}

// failWriter fails every write, as standard output redirected to /dev/full does.
type failWriter struct{ n int }

func (w *failWriter) Write([]byte) (int, error) { w.n++; return 0, syscall.ENOSPC }

func TestStdoutWriteFailureFails(t *testing.T) {
	dir := t.TempDir()
	seg := genOne(t, dir)
	for _, args := range [][]string{
		{"verify", seg},
		{"merge", "--progress", "never", "--out", filepath.Join(dir, "m.seg"), seg},
		{"query", seg},
		{"inspect", seg},
		{"dump", seg},
	} {
		t.Run(args[0], func(t *testing.T) {
			var w failWriter
			var errb bytes.Buffer
			code := run(context.Background(), args, nil, &w, &errb)
			assert.Equal(t, exitFailure, code, "a command whose results could not be written must fail")
			assert.Contains(t, errb.String(), "write standard output")
			assert.Contains(t, errb.String(), "no space left on device")
			assert.Positive(t, w.n)
		})
	}
	if runtime.GOOS != "linux" {
		return
	}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	var errb bytes.Buffer
	code := run(context.Background(), []string{"verify", seg}, nil, full, &errb)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, errb.String(), "segtool: write standard output:")
}

func TestNotRegularSegmentRefused(t *testing.T) {
	dir := t.TempDir()
	seg := genOne(t, dir)
	sub := filepath.Join(dir, "dir.seg")
	require.NoError(t, os.Mkdir(sub, 0o755))
	cases := map[string]string{sub: "a directory"}
	if fifo := filepath.Join(dir, "fifo.seg"); mkfifo(fifo) == nil {
		cases[fifo] = "a named pipe"
	} else if runtime.GOOS != "windows" {
		t.Fatalf("mkfifo %s failed", fifo)
	}
	for path, kind := range cases {
		for _, args := range [][]string{
			{"verify", path},
			{"query", path},
			{"dump", path},
			{"inspect", path},
			{"merge", "--progress", "never", "--out", filepath.Join(dir, "out", "m.seg"), seg, path},
		} {
			t.Run(kind+"/"+args[0], func(t *testing.T) {
				done := make(chan struct{})
				var code int
				var stderr string
				go func() {
					defer close(done)
					code, _, stderr = runSegtool(t, args...)
				}()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					t.Fatalf("segtool %v still running after 20 s (blocked opening %s?)", args, kind)
				}
				assert.Equal(t, exitFailure, code, stderr)
				assert.Contains(t, stderr, path)
				assert.Contains(t, stderr, "not a regular file")
				assert.NotContains(t, stderr, "mmap")
			})
		}
	}
	assert.NoDirExists(t, filepath.Join(dir, "out"), "a failed merge leaves no output directory")
}

func TestOutputDirectoryOnlyOnSuccess(t *testing.T) {
	dir := t.TempDir()
	seg := genOne(t, dir)
	bad := filepath.Join(dir, "bad.seg")
	require.NoError(t, os.WriteFile(bad, []byte("not a segment at all, just some bytes"), 0o644))

	// A merge that fails (a bad input) creates no directory.
	out := filepath.Join(dir, "new", "deeper", "m.seg")
	code, _, stderr := runSegtool(t, "merge", "--progress", "never", "--out", out, seg, bad)
	require.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "bad.seg")
	assert.NoDirExists(t, filepath.Join(dir, "new"))

	// An ingest that fails (a bad row, no parse errors allowed) creates none either.
	csv := filepath.Join(dir, "in.csv")
	require.NoError(t, os.WriteFile(csv, []byte("ts,country\n1000,fr\nnot-a-time,de\n"), 0o644))
	spec := filepath.Join(dir, "spec.json")
	require.NoError(t, os.WriteFile(spec, []byte(`{"timestamp":{"column":"ts","format":"millis"},"schema":{"dimensions":[{"name":"country"}]}}`), 0o644))
	code, _, stderr = runSegtool(t, "ingest", "--spec", spec, "--out", filepath.Join(dir, "ing", "x.seg"), csv)
	require.Equal(t, exitFailure, code, stderr)
	assert.NoDirExists(t, filepath.Join(dir, "ing"))

	// Nor does one that fails after the inputs opened (a damaged part found while merging).
	data, err := os.ReadFile(seg)
	require.NoError(t, err)
	data[len(data)/3] ^= 0x40
	damaged := filepath.Join(dir, "damaged.seg")
	require.NoError(t, os.WriteFile(damaged, data, 0o644))
	code, _, stderr = runSegtool(t, "merge", "--progress", "never", "--out", out, seg, damaged)
	require.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "corrupt")
	assert.NoDirExists(t, filepath.Join(dir, "new"))

	// A directory that already existed is kept, even if the merge fails.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "kept"), 0o755))
	code, _, _ = runSegtool(t, "merge", "--progress", "never", "--out", filepath.Join(dir, "kept", "m.seg"), seg, bad)
	require.Equal(t, exitFailure, code)
	assert.DirExists(t, filepath.Join(dir, "kept"))

	// Success creates the directories.
	code, _, stderr = runSegtool(t, "merge", "--progress", "never", "--out", out, seg)
	require.Equal(t, 0, code, stderr)
	assert.FileExists(t, out)

	// An output path under a regular file fails cleanly.
	code, _, stderr = runSegtool(t, "merge", "--progress", "never", "--out", filepath.Join(seg, "m.seg"), seg)
	require.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "not a directory")
}

// TestGenFailureRemovesWhatItWrote fills the disk under gen's third file: the output directory is
// left as it was, without the two files written before.
func TestGenFailureRemovesWhatItWrote(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /dev/full")
	}
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "gen")
	require.NoError(t, os.Mkdir(out, 0o755))
	// The third CSV file's path leads to /dev/full: writing it fails with ENOSPC, a real full disk.
	full := filepath.Join(out, "basic-0002.csv")
	require.NoError(t, os.Symlink("/dev/full", full))
	code, stdout, stderr := runSegtool(t, "gen", "--format", "csv", "--segments", "4", "--rows", "2000", "--replace", "--out", out)
	require.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "no space left on device")
	assert.Empty(t, stdout)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "gen removes every file it wrote when it fails")
	_, err = os.Lstat(full)
	assert.True(t, errors.Is(err, os.ErrNotExist), "the failed file is removed too")
}

// TestTmpDirMissing: a --tmp-dir that does not exist is made for the command and removed
// after it (merge --help's own example failed with "stat scratch: no such file or directory",
// not naming the flag); one that cannot be made, or is a file, is an error naming --tmp-dir.
func TestTmpDirMissing(t *testing.T) {
	dir := t.TempDir()
	seg := genOne(t, dir)
	scratch := filepath.Join(dir, "scratch")
	code, _, errs := runSegtool(t, "merge", "--quiet", "--max-fan-in", "8", "--tmp-dir", scratch, "--out", filepath.Join(dir, "m.seg"), seg)
	require.Equal(t, 0, code, errs)
	require.NoDirExists(t, scratch, "made for the merge, removed after it")
	require.FileExists(t, filepath.Join(dir, "m.seg"))

	code, _, errs = runSegtool(t, "merge", "--quiet", "--tmp-dir", filepath.Join(dir, "no", "such"), "--out", filepath.Join(dir, "n.seg"), seg)
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "--tmp-dir "+filepath.Join(dir, "no", "such")+": ")
	require.NoFileExists(t, filepath.Join(dir, "n.seg"))

	code, _, errs = runSegtool(t, "export", "--quiet", "--tmp-dir", seg, "--out", filepath.Join(dir, "x.parquet"), seg)
	require.Equal(t, 2, code, errs)
	require.Contains(t, errs, "--tmp-dir "+seg+": not a directory")
	require.NoFileExists(t, filepath.Join(dir, "x.parquet"))
}
