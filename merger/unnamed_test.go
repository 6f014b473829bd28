package merger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/internal/testhook"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/tmpfile"
)

// noTmpfile makes O_TMPFILE unsupported for the intermediate segments (sysCalls) and, when
// global, for everything that uses sys.Default (columns' publication), until the test ends.
// Merger's tests do not run in parallel, and the merges of the test end before it does.
func noTmpfile(t *testing.T, global bool) {
	unsupported := func(string) (*os.File, error) { return nil, fmt.Errorf("test: %w", sys.ErrUnsupported) }
	c := *sysCalls
	c.OpenTmpfile = unsupported
	old := sysCalls
	sysCalls = &c
	t.Cleanup(func() { sysCalls = old })
	if global {
		saved := sys.Default
		sys.Default.OpenTmpfile = unsupported
		t.Cleanup(func() { sys.Default = saved })
	}
}

// TestIntermediatesUnnamed: a merge in phases never gives an intermediate segment a name that
// a kill could leave behind: they are unnamed files (O_TMPFILE) or, where there is none, named
// files unlinked at once. When the output is about to be named, the output directory holds
// only what it held before, and the merge's bytes are those of the one-phase merge.
func TestIntermediatesUnnamed(t *testing.T) {
	inDir := t.TempDir()
	var segs []*columns.Segment
	for i := range 7 {
		segs = append(segs, genSegment(t, inDir, int64(100+i), 300))
	}
	one := filepath.Join(t.TempDir(), "one.seg")
	mustMerge(t, segs, one, Options{Durability: medium.Durability{Sync: medium.SyncNone}})
	want, err := os.ReadFile(one)
	require.NoError(t, err)
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprintf("named=%v", named), func(t *testing.T) {
			if named {
				noTmpfile(t, false)
			}
			var created []string
			c := *sysCalls
			open := c.OpenTmpfile
			c.OpenTmpfile = func(dir string) (*os.File, error) {
				created = append(created, dir)
				return open(dir)
			}
			old := sysCalls
			sysCalls = &c
			defer func() { sysCalls = old }()
			outDir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(outDir, "other"), nil, 0o644))
			dst := filepath.Join(outDir, "out.seg")
			var atHook []string
			defer testhook.SetBeforePublish(func(d string) {
				if d == dst {
					atHook = dirNames(t, outDir)
				}
			})()
			res := mustMerge(t, segs, dst, Options{MaxFanIn: 2, Durability: medium.Durability{Sync: medium.SyncNone}})
			require.Equal(t, 3, res.Phases) // 7 -> 4 -> 2 -> the output
			require.Len(t, created, 5, "one file per intermediate segment (3 + 2; a lone input is handed on)")
			require.Equal(t, []string{"other"}, atHook, "the output directory while the merge is about to name its output")
			require.Equal(t, []string{"other", "out.seg"}, dirNames(t, outDir))
			got, err := os.ReadFile(dst)
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
	// The pattern of the named fallback is one SweepTemp knows.
	require.True(t, columns.IsTempName(strings.Replace(IntermediatePattern, "*", "123456", 1)))
}

// TestMergeRace: bar 5 at the merger's level. Two merges to one dst without Replace, held by
// the hook until both are past every check (Merge's, then the publication's): exactly one
// succeeds, the other fails with an error wrapping fs.ErrExist that says the output exists, and
// dst is a complete merge. With unnamed files (linkat) and with the named fallback
// (renameat2(RENAME_NOREPLACE)).
func TestMergeRace(t *testing.T) {
	inDir := t.TempDir()
	a := []*columns.Segment{genSegment(t, inDir, 1, 400), genSegment(t, inDir, 2, 400), genSegment(t, inDir, 3, 400)}
	b := a[:2]
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprintf("named=%v", named), func(t *testing.T) {
			if named {
				noTmpfile(t, true)
			}
			for round := range 3 {
				outDir := t.TempDir()
				dst := filepath.Join(outDir, "out.seg")
				var mu sync.Mutex
				arrived := 0
				all := make(chan struct{})
				restore := testhook.SetBeforePublish(func(d string) {
					if d != dst {
						return
					}
					mu.Lock()
					if arrived++; arrived == 2 {
						close(all)
					}
					mu.Unlock()
					select {
					case <-all:
					case <-time.After(20 * time.Second):
						t.Errorf("only one merge reached the hook")
					}
				})
				var errs [2]error
				var res [2]Result
				var wg sync.WaitGroup
				for k, in := range [][]*columns.Segment{a, b} {
					wg.Go(func() {
						res[k], errs[k] = Merge(context.Background(), in, dst, Options{MaxFanIn: 2,
							Durability: medium.Durability{Sync: medium.SyncNone}})
					})
				}
				wg.Wait()
				restore()
				winner := -1
				for k, err := range errs {
					if err == nil {
						require.Equal(t, -1, winner, "round %d: both merges succeeded", round)
						winner = k
						continue
					}
					require.ErrorIs(t, err, fs.ErrExist)
					require.ErrorContains(t, err, "publish "+dst+": output exists")
				}
				require.NotEqual(t, -1, winner, "round %d: %v", round, errs)
				require.Equal(t, []string{"out.seg"}, dirNames(t, outDir))
				seg := openSeg(t, dst)
				require.NoError(t, seg.Verify())
				require.Equal(t, int(res[winner].RowsOut), seg.Rows())
			}
		})
	}
}

// TestMergeScratchFile: with the default staging medium, the id logs' runs go to a file of
// their own, not the parts' file (a file takes one write at a time, and a punch holds it, see
// the package doc): when the output is about to be named, the merge holds three unnamed files
// in dst's directory, the parts' stages, the runs (written) and the output; they are
// closed when Merge returns, and the output's bytes are those of a merge through one medium
// (a heap medium, whose children hold both). Breaking the split (runCore ignoring
// Options.scratch, or Merge not making it) leaves two files: the test fails.
func TestMergeScratchFile(t *testing.T) {
	if !sys.CanLinkUnnamed() {
		t.Skip("no unnamed files here")
	}
	defer func(m int, b int64) { logMemIDs, scratchBufferBudget = m, b }(logMemIDs, scratchBufferBudget)
	logMemIDs = 64             // the id logs write runs from their 65th row on
	scratchBufferBudget = 4096 // and the runs leave the buffers for the file
	inDir := t.TempDir()
	var segs []*columns.Segment
	for i := range 3 {
		segs = append(segs, genSegment(t, inDir, int64(300+i), 2000))
	}
	noSync := medium.Durability{Sync: medium.SyncNone}
	one := filepath.Join(t.TempDir(), "one.seg")
	mustMerge(t, segs, one, Options{Durability: noSync, Medium: medium.NewHeap()})
	want, err := os.ReadFile(one)
	require.NoError(t, err)

	outDir := t.TempDir()
	dst := filepath.Join(outDir, "out.seg")
	var files []*os.File
	var mu sync.Mutex
	saved := sys.Default
	open := saved.OpenTmpfile
	sys.Default.OpenTmpfile = func(dir string) (*os.File, error) {
		f, err := open(dir)
		if err == nil && dir == outDir {
			mu.Lock()
			files = append(files, f)
			mu.Unlock()
		}
		return f, err
	}
	defer func() { sys.Default = saved }()
	var sizes []int64
	defer testhook.SetBeforePublish(func(d string) {
		if d != dst {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, f := range files {
			fi, err := f.Stat()
			require.NoError(t, err)
			sizes = append(sizes, fi.Size())
		}
	})()
	mustMerge(t, segs, dst, Options{Durability: noSync})
	// Made in this order: the parts' file (empty here: the parts fit in its buffers), the
	// runs' file, the output.
	require.Len(t, sizes, 3, "the parts' file, the runs' file and the output, all in dst's directory")
	require.Positive(t, sizes[1], "the id logs' runs are in their own file")
	require.Positive(t, sizes[2], "the output")
	for _, f := range files {
		_, err := f.Stat()
		require.ErrorIs(t, err, os.ErrClosed, "every file the merge made is closed when it returns")
	}
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// closeFailFs is an afero.Fs whose files named by tmpfile's pattern fail to close (after closing).
type closeFailFs struct{ afero.Fs }

type closeFailFile struct{ afero.File }

var errCloseTest = errors.New("test: close fails")

func (f closeFailFile) Close() error { return errors.Join(f.File.Close(), errCloseTest) }

func (fs closeFailFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	f, err := fs.Fs.OpenFile(name, flag, perm)
	if err == nil && tmpfile.IsTempName(filepath.Base(name)) {
		return closeFailFile{f}, nil
	}
	return f, err
}

// TestMergeMediumCloseFails: a default medium whose file fails to close fails the merge, with
// an error that names the medium and wraps the close's.
func TestMergeMediumCloseFails(t *testing.T) {
	inDir := t.TempDir()
	var segs []*columns.Segment
	for i := range 2 {
		segs = append(segs, genSegment(t, inDir, int64(400+i), 500))
	}
	mem := closeFailFs{afero.NewMemMapFs()}
	require.NoError(t, mem.MkdirAll("/out", 0o755))
	_, err := Merge(t.Context(), segs, "/out/o.seg", Options{Fs: mem, Durability: medium.Durability{Sync: medium.SyncNone}})
	require.ErrorIs(t, err, errCloseTest)
	require.ErrorContains(t, err, "merger: staging medium")
}
