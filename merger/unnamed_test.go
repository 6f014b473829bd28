package merger

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/internal/testhook"
	"github.com/writeout/writeout/medium"
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
