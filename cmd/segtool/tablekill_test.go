//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/merger/table"
)

// TestTableAppendSIGKILL kills `segtool table append` (3 segments onto a table at version 2,
// one segment) with SIGKILL at a random moment, trial after trial (WRITEOUT_KILL_TRIALS,
// default 8; seed WRITEOUT_KILL_SEED), anywhere in the time of an uninterrupted run. After
// each kill the table opens at version 2 or 3, and every live segment of the newest version
// opens, verifies and matches its footer checksum, for exactly the rows of that version:
// never a version with some of the appended segments, never one whose segment is missing.
// Then another append commits the next version. Files the kill leaves that no version
// lists are only temp files or whole segments (garbage for vacuum).
func TestTableAppendSIGKILL(t *testing.T) {
	trials, seed := killTrials(t)
	t.Logf("%d trials, seed %d", trials, seed)
	rng := rand.New(rand.NewPCG(seed, 36))

	in := t.TempDir()
	rows := 20000
	if raceEnabled {
		rows = 5000
	}
	mustSegtool(t, "gen", "--rows", strconv.Itoa(rows), "--segments", "5", "--durability", "none", "--out", in)
	seg := func(k int) string { return filepath.Join(in, fmt.Sprintf("basic-%04d.seg", k)) }
	base := filepath.Join(t.TempDir(), "base")
	mustSegtool(t, "table", "create", base)
	mustSegtool(t, "table", "append", base, seg(0))
	appendArgs := func(dir string) []string { return []string{"table", "append", dir, seg(1), seg(2), seg(3)} }
	wantRows := map[int]int64{2: int64(rows), 3: int64(4 * rows)}

	// The time of an uninterrupted run.
	full := time.Duration(0)
	for range 2 {
		dir := copyTable(t, base)
		start := time.Now()
		out, err := exec.Command(segtoolBinary(t), appendArgs(dir)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		if d := time.Since(start); full == 0 || d < full {
			full = d
		}
	}
	t.Logf("an uninterrupted append takes %v", full)

	outcomes := map[string]int{}
	for trial := range trials {
		dir := copyTable(t, base)
		cmd := exec.Command(segtoolBinary(t), appendArgs(dir)...)
		require.NoError(t, cmd.Start())
		after := time.Duration(rng.Int64N(int64(full)))
		time.Sleep(after)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		waitErr := cmd.Wait()
		var ee *exec.ExitError
		killed := errors.As(waitErr, &ee) && ee.Sys().(syscall.WaitStatus).Signaled()
		require.True(t, waitErr == nil || killed, "trial %d: %v", trial, waitErr)

		ctx := context.Background()
		tb, err := table.Open(ctx, dir, table.Options{})
		require.NoError(t, err, "trial %d", trial)
		e, err := tb.Snapshot(ctx, 0)
		require.NoError(t, err, "trial %d", trial)
		want, ok := wantRows[e.Version]
		require.True(t, ok, "trial %d: newest version %d", trial, e.Version)
		if waitErr == nil {
			require.Equal(t, 3, e.Version, "trial %d: the append finished, yet version %d", trial, e.Version)
		}
		var got int64
		for _, s := range e.Segments {
			sg, closeSeg, err := tb.OpenSegment(ctx, s)
			require.NoError(t, err, "trial %d: %s", trial, s.Name)
			require.NoError(t, sg.Verify(), "trial %d: %s", trial, s.Name)
			got += int64(sg.Rows())
			require.NoError(t, closeSeg())
		}
		require.Equal(t, want, got, "trial %d: version %d", trial, e.Version)
		outcome := fmt.Sprintf("killed=%v version=%d", killed, e.Version)
		outcomes[outcome]++
		t.Logf("trial %d: killed after %v: %s", trial, after, outcome)

		// Leftovers: temp files, or whole segments no version lists.
		for _, d := range []string{"_log", "segments"} {
			ents, err := os.ReadDir(filepath.Join(dir, d))
			require.NoError(t, err)
			for _, ent := range ents {
				if table.IsTempName(ent.Name()) || d == "_log" && filepath.Ext(ent.Name()) == ".json" {
					continue
				}
				require.Equal(t, "segments", d, "trial %d: %s/%s", trial, d, ent.Name())
			}
		}
		mustSegtool(t, "table", "append", dir, seg(4))
		e2, err := tb.Snapshot(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, e.Version+1, e2.Version)
		require.Equal(t, want+int64(rows), e2.Rows())
	}
	t.Logf("outcomes: %v", outcomes)
}

// copyTable copies the table directory src to a new directory and returns it.
func copyTable(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "t")
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

// TestTableCompactSIGKILL kills `segtool table compact` (4 segments of one day, appended one
// by one: versions 2 to 5) with SIGKILL at a random moment, trial after trial (as
// TestTableAppendSIGKILL). After each kill the newest version is 5 (the inputs) or 6 (one
// output of kind replace), its live segments open and verify, for exactly the inputs' rows;
// `table vacuum --retain 0 --pending-age 0` then leaves only the files the newest version
// lists; and another compact ends with one segment of the same rows.
func TestTableCompactSIGKILL(t *testing.T) {
	trials, seed := killTrials(t)
	t.Logf("%d trials, seed %d", trials, seed)
	rng := rand.New(rand.NewPCG(seed, 37))

	in := t.TempDir()
	rows := 20000
	if raceEnabled {
		rows = 5000
	}
	mustSegtool(t, "gen", "--rows", strconv.Itoa(rows), "--segments", "4", "--durability", "none", "--out", in)
	base := filepath.Join(t.TempDir(), "base")
	mustSegtool(t, "table", "create", base)
	for k := range 4 {
		mustSegtool(t, "table", "append", base, filepath.Join(in, fmt.Sprintf("basic-%04d.seg", k)))
	}
	compactArgs := func(dir string) []string { return []string{"table", "compact", dir} }
	want := int64(4 * rows)

	full := time.Duration(0)
	for range 2 {
		dir := copyTable(t, base)
		start := time.Now()
		out, err := exec.Command(segtoolBinary(t), compactArgs(dir)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		if d := time.Since(start); full == 0 || d < full {
			full = d
		}
	}
	t.Logf("an uninterrupted compact takes %v", full)

	ctx := context.Background()
	check := func(trial int, tb *table.Table) *table.Entry {
		t.Helper()
		e, err := tb.Snapshot(ctx, 0)
		require.NoError(t, err, "trial %d", trial)
		var got int64
		for _, s := range e.Segments {
			sg, closeSeg, err := tb.OpenSegment(ctx, s)
			require.NoError(t, err, "trial %d: %s", trial, s.Name)
			require.NoError(t, sg.Verify(), "trial %d: %s", trial, s.Name)
			got += int64(sg.Rows())
			require.NoError(t, closeSeg())
		}
		require.Equal(t, want, got, "trial %d: version %d", trial, e.Version)
		return e
	}
	outcomes := map[string]int{}
	for trial := range trials {
		dir := copyTable(t, base)
		cmd := exec.Command(segtoolBinary(t), compactArgs(dir)...)
		require.NoError(t, cmd.Start())
		after := time.Duration(rng.Int64N(int64(full)))
		time.Sleep(after)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		waitErr := cmd.Wait()
		var ee *exec.ExitError
		killed := errors.As(waitErr, &ee) && ee.Sys().(syscall.WaitStatus).Signaled()
		require.True(t, waitErr == nil || killed, "trial %d: %v", trial, waitErr)

		tb, err := table.Open(ctx, dir, table.Options{})
		require.NoError(t, err, "trial %d", trial)
		e := check(trial, tb)
		switch e.Version {
		case 5:
			require.False(t, waitErr == nil, "trial %d: the compact finished, yet version 5", trial)
			require.Len(t, e.Segments, 4, "trial %d", trial)
		case 6:
			require.Equal(t, table.KindReplace, e.Operation.Kind, "trial %d", trial)
			require.Len(t, e.Segments, 1, "trial %d", trial)
		default:
			require.Failf(t, "newest version", "trial %d: %d", trial, e.Version)
		}
		outcome := fmt.Sprintf("killed=%v version=%d", killed, e.Version)
		outcomes[outcome]++
		t.Logf("trial %d: killed after %v: %s", trial, after, outcome)

		mustSegtool(t, "table", "vacuum", "--retain", "0", "--pending-age", "0", dir)
		var live []string
		for _, s := range e.Segments {
			live = append(live, filepath.Base(s.Name))
		}
		ents, err := os.ReadDir(filepath.Join(dir, "segments"))
		require.NoError(t, err)
		var files []string
		for _, ent := range ents {
			files = append(files, ent.Name())
		}
		require.ElementsMatch(t, live, files, "trial %d: after vacuum, only the newest version's segments", trial)
		logs, err := os.ReadDir(filepath.Join(dir, "_log"))
		require.NoError(t, err)
		require.Len(t, logs, 1, "trial %d: after vacuum, only the newest entry", trial)

		mustSegtool(t, "table", "compact", dir)
		e2 := check(trial, tb)
		require.Len(t, e2.Segments, 1, "trial %d", trial)
	}
	t.Logf("outcomes: %v", outcomes)
}
