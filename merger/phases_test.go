package merger

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/medium"
)

// TestMergePhases: merging 20 inputs in phases (MaxFanIn 2 and 4) gives the bytes of merging
// them in one phase, and no intermediate file remains.
func TestMergePhases(t *testing.T) {
	seed := uint64(99)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	type input struct {
		name string
		segs func(t *testing.T, dir string) []*columns.Segment
	}
	basicRows := 800
	if testing.Short() || raceEnabled {
		basicRows = 200
	}
	inputs := []input{
		{"random", func(t *testing.T, dir string) []*columns.Segment {
			rc := newRandCase(rng, 20, 200)
			segs := make([]*columns.Segment, 20)
			for i := range segs {
				segs[i] = writeSegment(t, dir, fmt.Sprintf("in%02d.seg", i), rc.Schemas[i], rc.Rows[i])
			}
			return segs
		}},
		{"basic", func(t *testing.T, dir string) []*columns.Segment {
			segs := make([]*columns.Segment, 20)
			for i := range segs {
				segs[i] = genSegment(t, dir, gen.BasicSeed+int64(i), basicRows)
			}
			return segs
		}},
	}
	for _, in := range inputs {
		for _, rollup := range []bool{false, true} {
			t.Run(fmt.Sprintf("input=%s/rollup=%v", in.name, rollup), func(t *testing.T) {
				dir := t.TempDir()
				segs := in.segs(t, dir)
				before := dirNames(t, dir)
				outDir := t.TempDir()
				opts := Options{Rollup: rollup, Durability: medium.Durability{Sync: medium.SyncNone}}
				if rollup {
					opts.Granularity = columns.GranularityMinute
				}
				one := filepath.Join(outDir, "one.seg")
				res := mustMerge(t, segs, one, opts)
				require.Equal(t, 1, res.Phases)
				oneBytes, err := os.ReadFile(one)
				require.NoError(t, err)
				oneSeg := openSeg(t, one)
				checkBitmaps(t, oneSeg)
				for _, fan := range []int{2, 4} {
					opts := opts
					opts.MaxFanIn = fan
					var phases []int
					opts.Progress = func(p Progress) {
						if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
							phases = append(phases, p.Phase)
						}
						require.LessOrEqual(t, p.RowsDone, p.RowsTotal)
					}
					dst := filepath.Join(outDir, fmt.Sprintf("fan%d.seg", fan))
					res := mustMerge(t, segs, dst, opts)
					wantPhases := map[int]int{2: 5, 4: 3}[fan] // 20 -> 10 -> 5 -> 3 -> 2 -> 1; 20 -> 5 -> 2 -> 1
					require.Equal(t, wantPhases, res.Phases)
					require.Equal(t, wantPhases, len(phases))
					got, err := os.ReadFile(dst)
					require.NoError(t, err)
					// Byte for byte, rollup and sums of doubles included: intermediate segments
					// carry each sum's exactness tail, and first/last their values' event times.
					if !bytes.Equal(oneBytes, got) {
						requireRowsEqual(t, readRows(t, oneSeg), readRows(t, openSeg(t, dst)), false, fmt.Sprintf("fan-in %d", fan))
						require.Fail(t, "output differs from one phase", "fan-in %d", fan)
					}
					require.Equal(t, before, dirNames(t, dir))
					for _, n := range dirNames(t, outDir) {
						require.False(t, strings.HasPrefix(n, ".writeout"), "leftover %s", n)
					}
				}

				// merge(merge(A..G), rest) == merge(all), row for row.
				ab := filepath.Join(outDir, "ab.seg")
				mustMerge(t, segs[:7], ab, opts)
				abc := filepath.Join(outDir, "abc.seg")
				mustMerge(t, append([]*columns.Segment{openSeg(t, ab)}, segs[7:]...), abc, opts)
				abcSeg := openSeg(t, abc)
				requireRowsEqual(t, readRows(t, oneSeg), readRows(t, abcSeg), false, "merge(merge(A,B),C)")
				abcBytes, err := os.ReadFile(abc)
				require.NoError(t, err)
				require.True(t, bytes.Equal(oneBytes, abcBytes), "merge(merge(A,B),C) differs from merge(A,B,C)")
				checkBitmaps(t, abcSeg)
			})
		}
	}
}
