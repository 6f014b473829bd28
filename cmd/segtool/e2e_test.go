package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/ingest"
)

// segtool runs segtool in this process and returns its exit status, stdout and stderr.
func segtool(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func mustSegtool(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := segtool(t, args...)
	require.Equal(t, 0, code, "segtool %s: %s", strings.Join(args, " "), errs)
	return out
}

// bigInputs are five generated basic segments, big enough for a merge to take a while; made
// once per test run.
var bigInputs = sync.OnceValues(func() ([]string, error) {
	dir, err := os.MkdirTemp("", "segtool-e2e-*")
	if err != nil {
		return nil, err
	}
	var paths []string
	for k := range 5 {
		p := filepath.Join(dir, fmt.Sprintf("basic-%04d.seg", k))
		if _, err := genSegment(context.Background(), p, genSource{schema: "basic", seed: gen.BasicSeed + int64(k), rows: 80000}, false,
			columns.GranularityNone, ingest.Options{Durability: medium.Durability{Sync: medium.SyncNone}}); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
})

// copyInputs copies the big inputs into a fresh directory of the test.
func copyInputs(t *testing.T) (string, []string) {
	t.Helper()
	src, err := bigInputs()
	require.NoError(t, err)
	dir := t.TempDir()
	var paths []string
	for _, p := range src {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		q := filepath.Join(dir, filepath.Base(p))
		require.NoError(t, os.WriteFile(q, data, 0o644))
		paths = append(paths, q)
	}
	return dir, paths
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	names, err := listFiles(dir)
	require.NoError(t, err)
	return names
}

// TestDumpOfMergeIsTheMultisetOfInputRows: bar 4, second half. Inputs with different schemas
// (a dimension missing from one, which reads as null) and multi-value dimensions.
func TestDumpOfMergeIsTheMultisetOfInputRows(t *testing.T) {
	dir := t.TempDir()
	spec1 := `{"timestamp": {"field": "ts"}, "dimensions": [{"name": "page"}, {"name": "tags", "multiValue": true}],
	  "metrics": [{"name": "n", "aggregator": "count"}, {"name": "added", "aggregator": "longSum"}]}`
	spec2 := `{"timestamp": {"field": "ts"}, "dimensions": [{"name": "tags", "multiValue": true}, {"name": "user"}],
	  "metrics": [{"name": "n", "aggregator": "count"}, {"name": "added", "aggregator": "longSum"}]}`
	csv1 := "ts,page,tags,added\n5,Main,a|b,1\n1,Talk,,2\n5,Main,a|b,1\n9,,c,3\n"
	csv2 := "ts,tags,user,added\n5,a|b,u1,4\n2,b,,5\n9,c|a,u2,6\n"
	for name, body := range map[string]string{"s1.json": spec1, "s2.json": spec2, "a.csv": csv1, "b.csv": csv2} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	p := func(n string) string { return filepath.Join(dir, n) }
	mustSegtool(t, "ingest", "--spec", p("s1.json"), "--out", p("a.seg"), p("a.csv"))
	mustSegtool(t, "ingest", "--spec", p("s2.json"), "--out", p("b.seg"), p("b.csv"))
	inputs := []string{p("a.seg"), p("b.seg")}

	bdir := filepath.Join(dir, "basic")
	mustSegtool(t, "gen", "--rows", "5000", "--segments", "3", "--durability", "none", "--out", bdir)
	basic := []string{filepath.Join(bdir, "basic-0000.seg"), filepath.Join(bdir, "basic-0001.seg"), filepath.Join(bdir, "basic-0002.seg")}
	for _, tc := range []struct {
		name   string
		inputs []string
		flags  []string
	}{
		{"schemas differ", inputs, nil},
		{"basic", basic, nil},
		{"basic, phases", basic, []string{"--max-fan-in", "2", "--medium", "heap"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "m.seg")
			mustSegtool(t, append(append([]string{"merge", "--quiet", "--durability", "none", "--out", out}, tc.flags...), tc.inputs...)...)
			want := map[string]int{}
			for _, in := range tc.inputs {
				for _, r := range dumpRows(t, in) {
					want[r]++
				}
			}
			got := map[string]int{}
			merged := dumpRows(t, out)
			for _, r := range merged {
				got[r]++
			}
			require.Equal(t, want, got)
			n := 0
			for _, in := range tc.inputs {
				n += len(dumpRows(t, in))
			}
			require.Len(t, merged, n)
		})
	}
}

// dumpRows dumps a segment as NDJSON and returns each row in a canonical form: keys sorted,
// null keys left out (a dimension a segment lacks reads as null).
func dumpRows(t *testing.T, path string) []string {
	t.Helper()
	out := mustSegtool(t, "dump", "--format", "ndjson", path)
	var rows []string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		for k, v := range m {
			if v == nil {
				delete(m, k)
			}
		}
		b, err := json.Marshal(m) // sorts keys
		require.NoError(t, err)
		rows = append(rows, string(b))
	}
	require.NoError(t, sc.Err())
	return rows
}

// segtoolBinary is the copy of the test binary that testscript put on PATH as segtool.
func segtoolBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("segtool")
	require.NoError(t, err)
	return p
}

// TestMergeSIGINT: bar 5. SIGINT to a running merge stops it within a second, removes its temp
// files (intermediate segments of a merge in phases, the output's temp file) and writes no
// output.
func TestMergeSIGINT(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT on Windows")
	}
	// start runs a merge with flags and returns once it has reported progress (it is running).
	start := func(t *testing.T, flags []string) (cmd *exec.Cmd, dir string, before []string) {
		dir, inputs := copyInputs(t)
		before = dirNames(t, dir)
		out := filepath.Join(dir, "merged.seg")
		cmd = exec.Command(segtoolBinary(t), append(append([]string{"merge", "--progress", "always", "--out", out}, flags...), inputs...)...)
		stderr, err := cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		first := make([]byte, 1)
		_, err = stderr.Read(first)
		require.NoError(t, err)
		go func() { _, _ = bytes.NewBuffer(nil).ReadFrom(stderr) }()
		return cmd, dir, before
	}
	for _, tc := range []struct {
		name  string
		frac  float64 // of the fastest of three probe runs of the same merge, from its first progress
		flags []string
	}{
		{"early", 0, []string{"--medium", "tmpfile"}},
		{"phases", 0, []string{"--medium", "heap", "--max-fan-in", "2"}},
		{"mid-merge", 0.3, []string{"--medium", "mmapfile"}},
		{"late", 0.6, []string{"--medium", "offheap", "--max-fan-in", "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var delay time.Duration
			if tc.frac > 0 {
				probe := time.Duration(math.MaxInt64)
				for range 3 {
					cmd, _, _ := start(t, tc.flags)
					began := time.Now()
					require.NoError(t, cmd.Wait())
					probe = min(probe, time.Since(began))
				}
				delay = time.Duration(tc.frac * float64(probe))
				t.Logf("probe %v, signal after %v", probe, delay)
			}
			// A run the machine made faster than every probe may finish before the signal:
			// try again, signalling sooner, a few times before calling it a failure.
			for attempt := 0; ; attempt++ {
				cmd, dir, before := start(t, tc.flags)
				time.Sleep(delay)
				sent := time.Now()
				require.NoError(t, cmd.Process.Signal(os.Interrupt))
				werr := cmd.Wait()
				took := time.Since(sent)
				t.Logf("stopped %v after SIGINT", took)
				if werr == nil && attempt < 3 && delay > 0 {
					delay /= 2
					continue
				}
				require.Error(t, werr, "the merge finished before the signal; use bigger inputs")
				var ee *exec.ExitError
				require.ErrorAs(t, werr, &ee)
				require.Equal(t, 1, ee.ExitCode())
				require.Less(t, took, time.Second)
				require.Equal(t, before, dirNames(t, dir), "temp files or output left behind")
				return
			}
		})
	}
}

// TestSweepAfterSIGKILL: bar 5. Where the file system has no O_TMPFILE (segtool-test with
// WRITEOUT_TEST_NAMED=1 plays one), a merge killed with SIGKILL leaves named temp files (the
// output's temp file); sweep removes exactly those.
func TestSweepAfterSIGKILL(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGKILL on Windows")
	}
	dir, inputs := copyInputs(t)
	before := dirNames(t, dir)
	leftover := func() []string {
		var l []string
		for _, n := range dirNames(t, dir) {
			if !slices.Contains(before, n) {
				l = append(l, n)
			}
		}
		return l
	}
	var left []string
	for try := 0; try < 10 && len(left) == 0; try++ {
		out := filepath.Join(dir, "merged.seg")
		cmd := segtoolTest(t, []string{envNamed + "=1"}, append([]string{"merge", "--quiet", "--medium", "heap", "--max-fan-in", "2",
			"--durability", "none", "--out", out}, inputs...)...)
		require.NoError(t, cmd.Start())
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) && len(leftover()) == 0 {
			time.Sleep(2 * time.Millisecond)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		left = leftover()
		if slices.Contains(left, "merged.seg") { // the merge finished: start again
			require.NoError(t, os.Remove(out))
			left = nil
		}
	}
	require.NotEmpty(t, left, "SIGKILL never caught the merge with a temp file")
	t.Logf("left by SIGKILL: %v", left)
	for _, n := range left {
		require.True(t, strings.HasPrefix(n, ".writeout-") && strings.HasSuffix(n, ".tmp"), "unexpected leftover %s", n)
	}
	out := mustSegtool(t, "sweep", dir)
	require.Contains(t, out, fmt.Sprintf("%d leftover file(s) removed from %s", len(left), dir))
	require.Equal(t, before, dirNames(t, dir))
}

// TestQueryOfMergeEqualsQueryOfInputs: bar 4, first half. Every query gives the same groups on
// a merged segment as on its inputs queried together; with rollup, the same except __rows
// (stored rows), at granularities the rollup keeps.
func TestQueryOfMergeEqualsQueryOfInputs(t *testing.T) {
	dir := t.TempDir()
	mustSegtool(t, "gen", "--rows", "4000", "--segments", "3", "--durability", "none", "--out", dir)
	inputs := []string{filepath.Join(dir, "basic-0000.seg"), filepath.Join(dir, "basic-0001.seg"), filepath.Join(dir, "basic-0002.seg")}
	merged := filepath.Join(dir, "merged.seg")
	mustSegtool(t, append([]string{"merge", "--quiet", "--durability", "none", "--out", merged}, inputs...)...)
	rolled := filepath.Join(dir, "rolled.seg")
	mustSegtool(t, append([]string{"merge", "--quiet", "--durability", "none", "--rollup", "--granularity", "hour", "--out", rolled}, inputs...)...)

	filters := []string{
		"",
		"dimZipf = '1'",
		"dimMultivalEnumerated in ('Hello', 'Foo') and not dimSequentialHalfNull is null",
		"dimNull is null or dimUniform = '5'",
		"dimMultivalEnumerated2 = '' or dimMultivalSequentialWithNulls is null",
		"not (dimZipf in ('1', '2', '3') or dimSequential != '7')",
		"dimZipf = 'no such value'",
	}
	groupings := []string{"", "dimZipf", "dimMultivalEnumerated2,dimZipf", "dimSequentialHalfNull"}
	queries := 0
	for _, filter := range filters {
		for _, groupBy := range groupings {
			for _, gran := range []string{"all", "hour", "none"} {
				if gran == "none" && groupBy != "" {
					continue // a group per row: slow and nothing more to learn
				}
				args := []string{"query", "--filter", filter, "--group-by", groupBy, "--granularity", gran}
				want := mustSegtool(t, append(args, inputs...)...)
				require.Equal(t, want, mustSegtool(t, append(args, merged)...), "%v", args)
				if gran != "none" {
					// Rollup combines rows and truncates times: compare all but __rows, and with
					// granularity all (whose __time is the earliest time) all but __time.
					w, g := dropColumn(t, want, "__rows"), dropColumn(t, mustSegtool(t, append(args, rolled)...), "__rows")
					if gran == "all" { // groups are ordered by __time first: sort what is left
						w, g = sortLines(dropColumn(t, w, "__time")), sortLines(dropColumn(t, g, "__time"))
					}
					require.Equal(t, w, g, "rollup: %v", args)
				}
				queries++
			}
		}
	}
	t.Logf("%d queries agree", queries)
}

// dropColumn removes a named column from CSV text (no quoted fields expected).
func dropColumn(t *testing.T, csv, name string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(csv, "\n"), "\n")
	k := slices.Index(strings.Split(lines[0], ","), name)
	require.GreaterOrEqual(t, k, 0)
	for i, l := range lines {
		f := strings.Split(l, ",")
		lines[i] = strings.Join(slices.Delete(f, k, k+1), ",")
	}
	return strings.Join(lines, "\n")
}

func sortLines(s string) string {
	l := strings.Split(s, "\n")
	slices.Sort(l)
	return strings.Join(l, "\n")
}
