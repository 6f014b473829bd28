package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/internal/sys/systrace"
)

// envTrace=FILE: segtool-test appends each sync_file_range, fdatasync and fsync it makes to
// FILE, one line of systrace.Format a call.
const envTrace = "WRITEOUT_TEST_TRACE"

// traceSettings applies envTrace (part of testSettings).
func traceSettings() {
	path := os.Getenv(envTrace)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		panic(err)
	}
	rec := &systrace.Recorder{Log: f} // the file stays open until the process exits
	rec.Wrap(&sys.Default)
}

// TestMergeTrickleCLI: bar 5. `segtool merge --trickle 8KiB` paces the writeback of every
// file it writes, as recorded by the process itself: on the output, sync_file_range WRITE on
// range N, then WAIT_BEFORE on range N-1, contiguous over every full 8 KiB of the file, then
// the one fdatasync; with --max-fan-in 2, the intermediate segment the same way, never synced;
// the summary counts the calls. --trickle 0 makes none; a malformed size is a usage error.
func TestMergeTrickleCLI(t *testing.T) {
	const every = 8 << 10
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	mustSegtool(t, "gen", "--rows", "3000", "--segments", "3", "--durability", "none", "--out", in)
	inputs := []string{filepath.Join(in, "basic-0000.seg"), filepath.Join(in, "basic-0001.seg"), filepath.Join(in, "basic-0002.seg")}
	summary := regexp.MustCompile(`(?m)^trickle every 8\.0 KiB: (\d+) sync_file_range call\(s\)$`)

	run := func(name string, args ...string) (string, []systrace.Call, int64) {
		trace := filepath.Join(dir, name+".trace")
		out := filepath.Join(dir, name+".seg")
		cmd := segtoolTest(t, []string{envTrace + "=" + trace}, append(append([]string{"merge", "--out", out}, args...), inputs...)...)
		stdout, err := cmd.Output()
		require.NoError(t, err, "%s", stdout)
		text, err := os.ReadFile(trace)
		require.NoError(t, err)
		calls, err := systrace.Parse(string(text))
		require.NoError(t, err)
		fi, err := os.Stat(out)
		require.NoError(t, err)
		mustSegtool(t, "verify", out)
		return string(stdout), calls, fi.Size()
	}
	ranges := func(calls []systrace.Call) int {
		n := 0
		for _, c := range calls {
			if c.Op == "sync_file_range" {
				n++
			}
		}
		return n
	}

	// One phase, staged on the heap: the output is the one file paced.
	stdout, calls, size := run("one", "--trickle", "8KiB", "--medium", "heap")
	groups := systrace.ByFile(calls)
	require.Len(t, groups, 1)
	require.NoError(t, systrace.Check(groups[0], size, every, true))
	m := summary.FindStringSubmatch(stdout)
	require.NotNil(t, m, stdout)
	require.Equal(t, strconv.Itoa(ranges(calls)), m[1])
	require.GreaterOrEqual(t, size/every, int64(8))
	t.Logf("output %d bytes: %d calls, %v ... %v", size, len(groups[0]), groups[0][:3], groups[0][len(groups[0])-3:])

	// Two phases through the default medium: the intermediate segment too (and the staging
	// file, if the merge flushed any of it: it keeps most stages in its buffers).
	stdout, calls, size = run("fan", "--trickle", "8KiB", "--max-fan-in", "2")
	groups = systrace.ByFile(calls)
	require.GreaterOrEqual(t, len(groups), 2)
	require.NoError(t, systrace.Check(groups[len(groups)-1], size, every, true), "output")
	require.NoError(t, systrace.Check(groups[len(groups)-2], -1, every, false), "intermediate segment")
	m = summary.FindStringSubmatch(stdout)
	require.NotNil(t, m, stdout)
	require.Equal(t, strconv.Itoa(ranges(calls)), m[1])
	t.Logf("--max-fan-in 2: %d files paced, %d sync_file_range calls", len(groups), ranges(calls))

	// Off: the output's fdatasync only, no summary line.
	stdout, calls, _ = run("off", "--trickle", "0", "--medium", "heap")
	require.Zero(t, ranges(calls))
	require.NotContains(t, stdout, "trickle")

	// --durability none is no syncs and no pacing (it reported 56 calls of its 8 MiB default
	// on 100 MiB); pacing asked for with it paces.
	stdout, calls, _ = run("none", "--durability", "none", "--medium", "heap")
	require.Zero(t, ranges(calls))
	require.NotContains(t, stdout, "trickle")
	require.Contains(t, stdout, "durability none")
	stdout, calls, _ = run("none-paced", "--durability", "none", "--trickle", "8KiB", "--medium", "heap")
	require.Positive(t, ranges(calls))
	require.Contains(t, stdout, "trickle every 8.0 KiB")

	for _, bad := range []string{"8MB", "-1", "1.5MiB", "8 MiB"} {
		code, _, errs := segtool(t, "merge", "--trickle", bad, "--out", filepath.Join(dir, "bad.seg"), inputs[0])
		require.Equal(t, 2, code, bad)
		require.Contains(t, errs, fmt.Sprintf("--trickle: size %q", bad))
	}
}
