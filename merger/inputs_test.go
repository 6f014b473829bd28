package merger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/fdlimit"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
)

// genFiles writes n segment files of the basic schema (seeds gen.BasicSeed+i) in dir, closed,
// and returns their paths.
func genFiles(t *testing.T, dir string, n, rows int) []string {
	t.Helper()
	paths := make([]string, n)
	for i := range paths {
		seg := genSegment(t, dir, gen.BasicSeed+int64(i), rows)
		paths[i] = seg.Name()
		require.NoError(t, seg.Close())
	}
	return paths
}

// openAll opens paths until the test ends.
func openAll(t *testing.T, paths []string) []*columns.Segment {
	t.Helper()
	segs := make([]*columns.Segment, len(paths))
	for i, p := range paths {
		segs[i] = openSeg(t, p)
	}
	return segs
}

// openCounter counts the inputs open at once (opened, not yet closed) and the most ever.
type openCounter struct {
	mu         sync.Mutex
	open, most int
	opens      int
}

// countedInput is an Input whose opens and closes c counts; fail, when set, fails its opens.
type countedInput struct {
	Input
	c    *openCounter
	fail error
}

func (ci countedInput) Open(ctx context.Context) (*columns.Segment, func() error, error) {
	if ci.fail != nil {
		return nil, nil, ci.fail
	}
	seg, closeSeg, err := ci.Input.Open(ctx)
	if err != nil {
		return nil, nil, err
	}
	ci.c.mu.Lock()
	ci.c.open++
	ci.c.opens++
	ci.c.most = max(ci.c.most, ci.c.open)
	ci.c.mu.Unlock()
	closed := false
	return seg, func() error {
		ci.c.mu.Lock()
		if !closed {
			closed = true
			ci.c.open--
		}
		ci.c.mu.Unlock()
		return closeSeg()
	}, nil
}

func (c *openCounter) inputs(paths []string) []Input {
	ins := make([]Input, len(paths))
	for i, p := range paths {
		ins[i] = countedInput{Input: FileInput(p), c: c}
	}
	return ins
}

func (c *openCounter) state() (open, most, opens int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.most, c.opens
}

// openFDs returns the process's open descriptors, skipping the test where they cannot be counted.
func openFDs(t *testing.T) int {
	t.Helper()
	n, err := fdlimit.Open()
	if errors.Is(err, fdlimit.ErrUnknown) {
		t.Skip("open descriptors are counted on Linux only")
	}
	require.NoError(t, err)
	return n
}

// fdSlack is how many descriptors a merge holds besides its inputs' at most: the staging
// medium's file, the segment being written, its directory while it is synced, and the
// runtime's poller should it start during the merge.
const fdSlack = 6

// TestMergeInputsOpenFiles is issue 34's bar 4 as a unit test: MergeInputs of 30 files in
// phases of fan-in 4 and 8 holds at most fan-in inputs open at once, and at most fan-in plus
// fdSlack descriptors more than before it began (counted in /proc/self/fd at every progress
// report, rows and bitmaps of every phase); every descriptor is closed when it returns; the
// output is byte for byte Merge's of the same inputs open, in phases of the same fan-in and
// in one phase.
func TestMergeInputsOpenFiles(t *testing.T) {
	dir := t.TempDir()
	rows := 600
	if testing.Short() || raceEnabled {
		rows = 200
	}
	paths := genFiles(t, dir, 30, rows)
	outDir := t.TempDir()
	opts := Options{Durability: medium.Durability{Sync: medium.SyncNone}}
	one := filepath.Join(outDir, "one.seg")
	mustMerge(t, openAll(t, paths), one, opts)
	want, err := os.ReadFile(one)
	require.NoError(t, err)

	for _, fan := range []int{4, 8} {
		t.Run(fmt.Sprintf("fan=%d", fan), func(t *testing.T) {
			o := opts
			o.MaxFanIn = fan
			phased := filepath.Join(outDir, fmt.Sprintf("phased-%d.seg", fan))
			mustMerge(t, openAll(t, paths), phased, o)

			base := openFDs(t)
			var c openCounter
			most, reports := 0, 0
			o.ProgressRows = 128
			o.Progress = func(Progress) {
				n, err := fdlimit.Open()
				require.NoError(t, err)
				most = max(most, n-base)
				reports++
			}
			dst := filepath.Join(outDir, fmt.Sprintf("lazy-%d.seg", fan))
			res, err := MergeInputs(t.Context(), c.inputs(paths), dst, o)
			require.NoError(t, err)
			open, mostInputs, opens := c.state()
			t.Logf("fan-in %d: %d phases, %d inputs open at most, %d descriptors above the %d before at most (%d reports)",
				fan, res.Phases, mostInputs, most, base, reports)
			require.Greater(t, reports, 10)
			require.LessOrEqual(t, most, fan+fdSlack, "descriptors open during the phases")
			require.LessOrEqual(t, mostInputs, fan, "inputs open at once")
			require.Zero(t, open, "every input closed")
			require.Equal(t, base, openFDs(t), "every descriptor closed")
			require.Equal(t, 2*len(paths), opens, "each input opened for its footer, then for its phase")
			require.Equal(t, fan, res.FanIn)
			require.Equal(t, map[int]int{4: 3, 8: 2}[fan], res.Phases) // 30 -> 8 -> 2 -> 1; 30 -> 4 -> 1

			got, err := os.ReadFile(dst)
			require.NoError(t, err)
			prev, err := os.ReadFile(phased)
			require.NoError(t, err)
			require.True(t, bytes.Equal(prev, got), "MergeInputs differs from Merge in phases of %d", fan)
			require.True(t, bytes.Equal(want, got), "phases of %d differ from one phase", fan)
			require.Equal(t, []string{"one.seg"}, filterNames(dirNames(t, outDir), "one.seg", "lazy-", "phased-"))
		})
	}

	// In one phase every input opens once and stays open to the end.
	var c openCounter
	dst := filepath.Join(outDir, "lazy-one.seg")
	res, err := MergeInputs(t.Context(), c.inputs(paths), dst, opts)
	require.NoError(t, err)
	open, most, opens := c.state()
	require.Equal(t, 1, res.Phases)
	require.Zero(t, res.FanIn)
	require.Zero(t, open)
	require.Equal(t, len(paths), most)
	require.Equal(t, len(paths), opens)
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
}

// filterNames returns the names that start with none of the prefixes but the first.
func filterNames(names []string, keep string, prefixes ...string) []string {
	var out []string
	for _, n := range names {
		skip := false
		for _, p := range prefixes {
			skip = skip || len(n) >= len(p) && n[:len(p)] == p
		}
		if !skip || n == keep {
			out = append(out, n)
		}
	}
	return out
}

// setDescriptors makes the merges of the test see a descriptor limit of limit with open
// descriptors open (openErr: not counted).
func setDescriptors(t *testing.T, limit uint64, open int, openErr error) {
	t.Helper()
	l0, o0 := fdLimit, fdOpen
	t.Cleanup(func() { fdLimit, fdOpen = l0, o0 })
	fdLimit = func() (uint64, error) { return limit, nil }
	fdOpen = func() (int, error) { return open, openErr }
}

// TestPickFanIn: the rule MergeInputs follows with MaxFanIn 0.
func TestPickFanIn(t *testing.T) {
	f := func(n int, limit uint64, open int, openErr error, want int) {
		t.Helper()
		setDescriptors(t, limit, open, openErr)
		fan, err := pickFanIn(n, nil)
		require.NoError(t, err)
		require.Equal(t, want, fan, "n %d, limit %d, open %d", n, limit, open)
	}
	f(10, 64, 10, nil, 0)                      // 10 fit in 64-10-16 = 38
	f(38, 64, 10, nil, 0)                      // just fit
	f(39, 64, 10, nil, 38)                     // one too many: phases of 38
	f(200, 64, 10, nil, 38)                    // 200 -> 6 -> 1
	f(200, 1024, 10, nil, 0)                   // the usual soft limit
	f(5000, 1024, 10, nil, 998)                // 5000 -> 6 -> 1
	f(200, 20, 10, nil, 2)                     // nothing free: at least 2
	f(200, 64, 0, fdlimit.ErrUnknown, 32)      // not counted: a quarter of 64 left to them
	f(1_000_000, fdlimit.Unlimited, 5, nil, 0) // no limit: one phase
	fdLimit = func() (uint64, error) { return 0, fdlimit.ErrUnknown }
	fan, err := pickFanIn(1_000_000, nil)
	require.NoError(t, err)
	require.Zero(t, fan, "no limit known: one phase, as Merge")
}

// TestMergeInputsPicksFanIn: with MaxFanIn 0 and more inputs than the descriptor limit (faked
// at 40, with the descriptors open now) allows, MergeInputs merges in phases of the fan-in
// that fits instead of failing, never holding more inputs open than that, and writes the
// bytes of a merge in one phase.
func TestMergeInputsPicksFanIn(t *testing.T) {
	dir := t.TempDir()
	paths := genFiles(t, dir, 40, 150)
	outDir := t.TempDir()
	opts := Options{Durability: medium.Durability{Sync: medium.SyncNone}}
	one := filepath.Join(outDir, "one.seg")
	mustMerge(t, openAll(t, paths), one, opts)
	want, err := os.ReadFile(one)
	require.NoError(t, err)

	setDescriptors(t, 40, 12, nil) // 40 - 12 - 16 = 12 free
	var c openCounter
	dst := filepath.Join(outDir, "picked.seg")
	res, err := MergeInputs(t.Context(), c.inputs(paths), dst, opts)
	require.NoError(t, err)
	_, most, _ := c.state()
	require.Equal(t, 12, res.FanIn)
	require.Equal(t, 2, res.Phases) // 40 -> 4 -> 1
	require.LessOrEqual(t, most, 12)
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "an auto-picked fan-in writes the one-phase bytes")
}

// TestMergeInputsFailures: an input that does not open, inputs whose schemas conflict, a
// damaged part the merge does not read, an input that changes between its two opens, and a
// cancellation: each fails MergeInputs with the error Merge gives (wrapping the same value,
// naming the input), before the output is written, in phases and in one phase, with every
// input and every descriptor closed and nothing left in the output's directory.
func TestMergeInputsFailures(t *testing.T) {
	dir := t.TempDir()
	paths := genFiles(t, dir, 6, 3000)
	outDir := t.TempDir()
	dst := filepath.Join(outDir, "out.seg")
	check := func(t *testing.T, c *openCounter, base int) {
		t.Helper()
		open, _, _ := c.state()
		assert.Zero(t, open, "inputs left open")
		assert.Equal(t, base, openFDs(t), "descriptors left open")
		assert.Empty(t, dirNames(t, outDir), "files left in the output's directory")
	}
	for _, fan := range []int{0, 2} {
		opts := Options{MaxFanIn: fan, Durability: medium.Durability{Sync: medium.SyncNone}}
		t.Run(fmt.Sprintf("fan=%d/missing", fan), func(t *testing.T) {
			base := openFDs(t)
			var c openCounter
			ins := c.inputs(append(paths[:3:3], filepath.Join(dir, "nope.seg"), paths[3]))
			_, err := MergeInputs(t.Context(), ins, dst, opts)
			require.ErrorIs(t, err, os.ErrNotExist)
			require.ErrorContains(t, err, "nope.seg")
			check(t, &c, base)
		})
		t.Run(fmt.Sprintf("fan=%d/schema", fan), func(t *testing.T) {
			sdir := t.TempDir()
			a := writeSegment(t, sdir, "a.seg", columns.Schema{Metrics: []columns.Metric{{Name: "m", Aggregator: agg.LongSum}}}, nil)
			b := writeSegment(t, sdir, "b.seg", columns.Schema{Metrics: []columns.Metric{{Name: "m", Aggregator: agg.DoubleSum}}}, nil)
			require.NoError(t, a.Close())
			require.NoError(t, b.Close())
			base := openFDs(t)
			var c openCounter
			ins := c.inputs([]string{a.Name(), paths[0], paths[1], b.Name()})
			o := opts
			o.InputNames = []string{"A.seg", "", "", "B.seg"}
			_, err := MergeInputs(t.Context(), ins, dst, o)
			require.ErrorIs(t, err, ErrSchemaConflict)
			require.ErrorContains(t, err, `metric "m" is longSum(long) in A.seg and doubleSum(double) in B.seg`)
			check(t, &c, base)
		})
		t.Run(fmt.Sprintf("fan=%d/unread-part", fan), func(t *testing.T) {
			bdir := t.TempDir()
			bad := filepath.Join(bdir, "bad.seg")
			data, err := os.ReadFile(paths[4])
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(bad, data, 0o644))
			seg := openSeg(t, bad)
			var dim string
			for _, d := range seg.Schema().Dimensions {
				if !d.MultiValue && !d.Raw && !d.NoBitmapIndex {
					dim = d.Name
					break
				}
			}
			require.NoError(t, seg.Close())
			flipInPart(t, bad, dim, segfmt.PartBitmaps)
			base := openFDs(t)
			var c openCounter
			ins := c.inputs(append(paths[:4:4], bad, paths[5]))
			_, err = MergeInputs(t.Context(), ins, dst, opts)
			require.ErrorIs(t, err, columns.ErrCorrupt)
			require.ErrorContains(t, err, "bad.seg")
			require.ErrorContains(t, err, fmt.Sprintf("%q", dim))
			require.ErrorContains(t, err, segfmt.PartBitmaps.String())
			check(t, &c, base)
		})
		t.Run(fmt.Sprintf("fan=%d/cancel", fan), func(t *testing.T) {
			base := openFDs(t)
			var c openCounter
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			o := opts
			o.ProgressRows = 1024
			o.Progress = func(p Progress) {
				if p.Phase == max(1, p.Phases-1) && p.RowsDone > 0 {
					cancel()
				}
			}
			_, err := MergeInputs(ctx, c.inputs(paths), dst, o)
			require.ErrorIs(t, err, context.Canceled)
			check(t, &c, base)
		})
	}
	t.Run("changed", func(t *testing.T) {
		base := openFDs(t)
		var c openCounter
		ins := c.inputs(paths)
		short := genSegment(t, t.TempDir(), gen.BasicSeed, 100) // the schema of the others, fewer rows
		require.NoError(t, short.Close())
		ins[5] = &swappingInput{Input: ins[5], other: FileInput(short.Name())}
		_, err := MergeInputs(t.Context(), ins, dst, Options{MaxFanIn: 2, Durability: medium.Durability{Sync: medium.SyncNone}})
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, paths[5]+" changed during the merge")
		check(t, &c, base)
	})
}

// swappingInput opens as Input the first time, as other after.
type swappingInput struct {
	Input
	other  Input
	opened bool
}

func (s *swappingInput) Open(ctx context.Context) (*columns.Segment, func() error, error) {
	if s.opened {
		return s.other.Open(ctx)
	}
	s.opened = true
	return s.Input.Open(ctx)
}
