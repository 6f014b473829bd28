//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/writeout/writeout/columns"
)

// killTrials returns the trials and seed of a SIGKILL test: envKillTrials, else 8 (2 with
// -short); envKillSeed, else the clock.
func killTrials(t *testing.T) (trials int, seed uint64) {
	t.Helper()
	trials = 8
	if s := os.Getenv(envKillTrials); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, envKillTrials)
		trials = n
	}
	if testing.Short() && os.Getenv(envKillTrials) == "" {
		trials = 2
	}
	seed = uint64(time.Now().UnixNano())
	if s := os.Getenv(envKillSeed); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, envKillSeed)
		seed = n
	}
	return trials, seed
}

// envKillTrials sets the number of trials of TestMergeSIGKILL (default 8); envKillSeed its seed.
const (
	envKillTrials = "WRITEOUT_KILL_TRIALS"
	envKillSeed   = "WRITEOUT_KILL_SEED"
	envKillNamed  = "WRITEOUT_KILL_NAMED"
)

// fsName names the file system of dir (statfs f_type), and says whether it is one of the
// local file systems with O_TMPFILE on which a killed merge must leave no file at all.
func fsName(t *testing.T, dir string) (string, bool) {
	t.Helper()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4", true
	case unix.TMPFS_MAGIC:
		return "tmpfs", true
	case unix.XFS_SUPER_MAGIC:
		return "xfs", true
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs", true
	}
	return fmt.Sprintf("f_type %#x", st.Type), false
}

// TestMergeSIGKILL: bar 4. `segtool merge` is killed with SIGKILL at a random moment, trial
// after trial, cycling through every medium (heap, offheap, tmpfile, mmapfile), MaxFanIn 2 and
// 3 (phases with intermediate segments), without and with --replace (an old output present).
// After each kill the output is absent (without --replace), the old output (with it), or the
// complete new one: it verifies and has the right row count. On ext4, tmpfs, XFS or btrfs no
// other file is left in the output directory, without running sweep, except in the one state
// that --replace accepts by design (killed between linking the new output to a temp name and
// renaming it over the old one: see columns.Finish), which is counted and reported apart. The moment is random:
// anywhere in the time of an uninterrupted run of the same medium and fan-in (the fastest seen),
// while the output file is written and synced, or within 5 ms of its naming (see the loop).
//
// The segtool run is the test binary (testscript puts a copy on PATH as segtool): built once,
// with the test. WRITEOUT_KILL_TRIALS=100 runs the full bar; the default is 8 trials.
// WRITEOUT_KILL_NAMED=1 plays a file system without O_TMPFILE: then named temp files may be
// left, each must be one sweep recognises, and sweep must leave only the output.
func TestMergeSIGKILL(t *testing.T) {
	trials, seed := killTrials(t)
	t.Logf("%d trials, seed %d (%s=%d repeats them)", trials, seed, envKillSeed, seed)
	r := newKillRun(t, seed)
	configs := killConfigs()
	for trial := range trials {
		r.trial(trial, configs[trial%len(configs)])
	}
	r.report(trials)
}

// killConfig is one configuration of TestMergeSIGKILL's merges.
type killConfig struct {
	medium  string
	fanIn   int
	replace bool
}

// killConfigs returns the 16 configurations, ordered so that any 8 consecutive trials from the
// first cover every medium with both fan-ins and both --replace settings.
func killConfigs() []killConfig {
	var configs []killConfig
	media := []string{"heap", "offheap", "tmpfile", "mmapfile"}
	for i := range 16 {
		m, j := i%4, i%8
		fan := 2 + (m+j/4)%2
		replace := (j/2+j/4)%2 == 1 != (i >= 8)
		configs = append(configs, killConfig{media[m], fan, replace})
	}
	return configs
}

// killTiming is how long an uninterrupted merge takes, and how long from the creation of its
// output file to its naming (writing and syncing it).
type killTiming struct{ full, publish time.Duration }

// killRun holds TestMergeSIGKILL's inputs and what its trials found.
type killRun struct {
	t        *testing.T
	rng      *rand.Rand
	named    bool     // WRITEOUT_KILL_NAMED=1: merges run as without O_TMPFILE
	inputs   []string // the segments merged
	old      []byte   // the old output of the --replace trials: a valid segment of other rows
	wantRows int
	root     string // the trials' output directories are under it
	fs       string
	strict   bool // no file may be left in an output directory

	probes    map[string]killTiming // by medium/fan-in
	counts    map[string]int        // by outcome
	perConfig map[string]map[string]int
	leftovers []string
	between   []string // --replace killed between the link and the rename
}

func newKillRun(t *testing.T, seed uint64) *killRun {
	r := &killRun{t: t, rng: rand.New(rand.NewPCG(seed, 11)), probes: map[string]killTiming{},
		counts: map[string]int{}, perConfig: map[string]map[string]int{}}
	// With WRITEOUT_KILL_NAMED=1 the merges run as on a file system without O_TMPFILE: named
	// temp files may be left, and sweep must remove them all and nothing else.
	r.named = os.Getenv(envKillNamed) == "1"

	inDir := t.TempDir()
	rows := 12000
	if raceEnabled {
		rows = 3000
	}
	mustSegtool(t, "gen", "--rows", strconv.Itoa(rows), "--segments", "6", "--durability", "none", "--out", inDir)
	for k := range 6 {
		r.inputs = append(r.inputs, filepath.Join(inDir, fmt.Sprintf("basic-%04d.seg", k)))
	}
	r.wantRows = 6 * rows
	var err error
	r.old, err = os.ReadFile(r.inputs[0])
	require.NoError(t, err)

	r.root = t.TempDir()
	r.fs, r.strict = fsName(t, r.root)
	t.Logf("output directories on %s (%s), named temp files forced: %v", r.fs, r.root, r.named)
	r.strict = r.strict && !r.named
	return r
}

// command returns the segtool command; mark, when set, is the directory of its test hook's
// marks.
func (r *killRun) command(mark string, args ...string) *exec.Cmd {
	var env []string
	if r.named {
		env = append(env, envNamed+"=1")
	}
	if mark != "" {
		env = append(env, envMark+"="+mark)
	}
	if env != nil {
		return segtoolTest(r.t, env, args...)
	}
	return exec.Command(segtoolBinary(r.t), args...)
}

// args returns the arguments of a merge of c into dst.
func (r *killRun) args(c killConfig, dst string) []string {
	a := []string{"merge", "--quiet", "--medium", c.medium, "--max-fan-in", strconv.Itoa(c.fanIn), "--out", dst}
	if c.replace {
		a = append(a, "--replace")
	}
	return append(a, r.inputs...)
}

// awaitMark polls for the file mark (a test hook's mark) while the process runs: whether it
// appeared, and, if the process ended first, its Wait error.
func awaitMark(mark string, waited <-chan error) (bool, bool, error) {
	for {
		if _, err := os.Stat(mark); err == nil {
			return true, false, nil
		}
		select {
		case err := <-waited:
			_, serr := os.Stat(mark)
			return serr == nil, true, err
		case <-time.After(200 * time.Microsecond):
		}
	}
}

// probe runs a merge of c's medium and fan-in to the end, once per medium and fan-in.
func (r *killRun) probe(c killConfig) killTiming {
	t := r.t
	key := fmt.Sprintf("%s/%d", c.medium, c.fanIn)
	if d, ok := r.probes[key]; ok {
		return d
	}
	dst := filepath.Join(t.TempDir(), "probe.seg")
	mark := t.TempDir()
	cmd := r.command(mark, r.args(killConfig{c.medium, c.fanIn, false}, dst)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	require.NoError(t, cmd.Start())
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	ok, _, _ := awaitMark(filepath.Join(mark, "created"), waited)
	require.True(t, ok, "%s", out.String())
	created := time.Now()
	ok, _, _ = awaitMark(filepath.Join(mark, "named"), waited)
	require.True(t, ok, "%s", out.String())
	tm := killTiming{publish: time.Since(created)}
	require.NoError(t, <-waited, "%s", out.String())
	tm.full = time.Since(start)
	seg, err := columns.Open(dst)
	require.NoError(t, err)
	require.Equal(t, r.wantRows, seg.Rows())
	require.NoError(t, seg.Close())
	r.probes[key] = tm
	t.Logf("probe %s: %v, of which %v writing, syncing the output", key, tm.full.Round(time.Millisecond), tm.publish.Round(time.Millisecond))
	return tm
}

// moment picks when trial kills the merge: after the mark file markFile (none: from the
// start), wait delay. The kind rotates independently of the configuration: kinds 0 and 2, any
// moment of the run; kind 1, while the output file is written and synced (from the creation
// of the file, which the process signals through a test hook: segtool-test,
// WRITEOUT_TEST_MARK); kind 3, within 5 ms of the moment it is about to be named (the naming
// and the directory sync: the briefest steps, and the ones that matter most).
func (r *killRun) moment(trial int, tm killTiming) (markFile string, delay time.Duration) {
	switch kind := (trial + trial/4 + trial/16) % 4; kind {
	case 1:
		return "created", time.Duration(r.rng.Float64() * float64(tm.publish))
	case 3:
		return "named", time.Duration(r.rng.Float64() * float64(5*time.Millisecond))
	default:
		return "", time.Duration(r.rng.Float64() * float64(tm.full))
	}
}

// trial runs one merge of c into a directory of its own, kills it at a random moment and
// checks what it left.
func (r *killRun) trial(trial int, c killConfig) {
	t := r.t
	tm := r.probe(c)
	markFile, delay := r.moment(trial, tm)
	dir := filepath.Join(r.root, fmt.Sprintf("trial-%03d", trial))
	require.NoError(t, os.Mkdir(dir, 0o755))
	dst := filepath.Join(dir, "merged.seg")
	if c.replace {
		require.NoError(t, os.WriteFile(dst, r.old, 0o644))
	}
	killed := r.runAndKill(trial, c, dst, markFile, delay, tm)
	outcome := r.outcome(trial, c, dst, killed)
	key := fmt.Sprintf("medium=%s fan-in=%d replace=%v", c.medium, c.fanIn, c.replace)
	r.counts[outcome]++
	if r.perConfig[key] == nil {
		r.perConfig[key] = map[string]int{}
	}
	r.perConfig[key][outcome]++
	r.checkDir(trial, c, dir, key, outcome, delay)
	require.NoError(t, os.RemoveAll(dir))
}

// runAndKill starts the merge of c into dst, kills it delay after the mark file markFile (or
// after its start) unless it ends first, and reports whether it was killed.
func (r *killRun) runAndKill(trial int, c killConfig, dst, markFile string, delay time.Duration, tm killTiming) bool {
	t := r.t
	mark := ""
	if markFile != "" {
		mark = t.TempDir()
	}
	cmd := r.command(mark, r.args(c, dst)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	started := time.Now()
	require.NoError(t, cmd.Start())
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	exited := false
	if markFile != "" {
		var marked bool
		marked, exited, werr = awaitMark(filepath.Join(mark, markFile), waited)
		require.True(t, marked, "trial %d: the merge ended (%v) without reaching the mark %s: %s", trial, werr, markFile, stderr.String())
	}
	if !exited {
		select {
		case werr = <-waited: // finished before the moment
			exited = true
		case <-time.After(delay):
		}
	}
	if !exited {
		_ = cmd.Process.Signal(syscall.SIGKILL) // fails only if the merge is over (then reaped below)
		werr = <-waited
	} else if d := time.Since(started); werr == nil && markFile == "" && d < tm.full {
		tm.full = d // the machine got faster: aim by the fastest run seen
		r.probes[fmt.Sprintf("%s/%d", c.medium, c.fanIn)] = tm
	}
	killed := false
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		ws, _ := ee.Sys().(syscall.WaitStatus)
		killed = ws.Signaled() && ws.Signal() == syscall.SIGKILL
		require.True(t, killed, "trial %d: the merge failed by itself: %v: %s", trial, werr, stderr.String())
	} else {
		require.NoError(t, werr)
	}
	return killed
}

// outcome checks the output a trial left at dst: absent (without --replace), the old one
// (with it), or the complete new one; a merge that finished left the new one.
func (r *killRun) outcome(trial int, c killConfig, dst string, killed bool) string {
	t := r.t
	outcome := ""
	got, err := os.ReadFile(dst)
	switch {
	case errors.Is(err, os.ErrNotExist):
		require.False(t, c.replace, "trial %d (%+v): the old output is gone and no new one is there", trial, c)
		outcome = "absent"
	case err != nil:
		require.NoError(t, err)
	case bytes.Equal(got, r.old):
		require.True(t, c.replace, "trial %d", trial)
		outcome = "old"
	default:
		seg, err := columns.Open(dst)
		require.NoError(t, err, "trial %d (%+v): the output is neither absent, old, nor a segment", trial, c)
		require.NoError(t, seg.Verify(), "trial %d (%+v): the new output does not verify", trial, c)
		require.Equal(t, r.wantRows, seg.Rows(), "trial %d (%+v)", trial, c)
		require.NoError(t, seg.Close())
		outcome = "new"
	}
	require.False(t, !killed && outcome != "new", "trial %d: a merge that finished left %s", trial, outcome)
	if killed {
		return outcome + " (killed)"
	}
	return outcome + " (finished)"
}

// checkDir records the files a trial left in dir beside the output, and, where files may be
// left, checks that sweep removes them all and nothing else.
func (r *killRun) checkDir(trial int, c killConfig, dir, key, outcome string, delay time.Duration) {
	t := r.t
	left := 0
	var extra []string
	for _, n := range dirNames(t, dir) {
		if n != "merged.seg" {
			left++
			extra = append(extra, n)
		}
	}
	// The one state a --replace publication can leave, by design (see columns.Finish): the
	// unnamed output linked to a temp name, not yet renamed over the old output. Killed
	// between those two calls, the old output is in place and the complete new one is
	// under the temp name, which sweep recognises. Counted apart; anything else fails.
	if c.replace && strings.HasPrefix(outcome, "old") && len(extra) == 1 && columns.IsTempName(extra[0]) &&
		isCompleteMerge(t, filepath.Join(dir, extra[0]), r.wantRows) {
		r.between = append(r.between, fmt.Sprintf("trial %d (%s, killed after %v): %q", trial, key, delay.Round(time.Millisecond), extra[0]))
		extra = nil
	}
	for _, n := range extra {
		ours, _ := columns.IsTempFile(nil, filepath.Join(dir, n))
		r.leftovers = append(r.leftovers, fmt.Sprintf("trial %d (%s, killed after %v): %q (sweepable: %v)", trial, key, delay.Round(time.Millisecond), n, ours))
	}
	if left > 0 && !r.strict {
		out := mustSegtool(t, "sweep", dir)
		require.Contains(t, out, fmt.Sprintf("%d leftover file(s) removed", left))
		want := []string(nil)
		if !strings.HasPrefix(outcome, "absent") {
			want = []string{"merged.seg"}
		}
		require.Equal(t, want, dirNames(t, dir), "trial %d: after sweep", trial)
	}
}

// report logs the outcomes per configuration and what was left, and fails on a file left
// where none may be, or one sweep does not recognise.
func (r *killRun) report(trials int) {
	t := r.t
	var keys []string
	for k := range r.perConfig {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-40s %v", k, r.perConfig[k])
	}
	t.Logf("%d trials: %v; files left in output directories: %d, and %d complete new outputs under a temp name"+
		" (--replace killed between the link and the rename)", trials, r.counts, len(r.leftovers), len(r.between))
	for _, l := range r.leftovers {
		t.Logf("left: %s", l)
	}
	for _, l := range r.between {
		t.Logf("killed between the link and the rename: %s", l)
	}
	if r.strict {
		require.Empty(t, r.leftovers, "files left in the output directory on %s", r.fs)
	} else {
		t.Logf("on %s, named temp files may be left: sweep removes them", r.fs)
		for _, l := range r.leftovers {
			require.True(t, strings.HasSuffix(l, "(sweepable: true)"), "%s", l)
		}
	}
}

// isCompleteMerge reports whether path is a segment that verifies and has rows rows.
func isCompleteMerge(t *testing.T, path string, rows int) bool {
	t.Helper()
	seg, err := columns.Open(path)
	if err != nil {
		return false
	}
	ok := seg.Verify() == nil && seg.Rows() == rows
	require.NoError(t, seg.Close())
	return ok
}
