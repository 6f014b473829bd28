package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
)

// TestMergeRaceProcesses: bar 5 through segtool. Two `segtool merge` processes to one --out
// without --replace, each held by the test hook just before it names its output until both are
// there (so both are past every check: segtool's, the merger's and the publication's): exactly
// one exits 0, the other exits 1 saying the output exists, and the output is the winner's
// complete merge, alone in its directory. With unnamed files (linkat) and the named fallback
// (renameat2 with RENAME_NOREPLACE).
func TestMergeRaceProcesses(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the atomic naming calls are Linux's")
	}
	in := t.TempDir()
	mustSegtool(t, "gen", "--rows", "3000", "--segments", "3", "--durability", "none", "--out", in)
	inputs := [2][]string{
		{filepath.Join(in, "basic-0000.seg"), filepath.Join(in, "basic-0001.seg"), filepath.Join(in, "basic-0002.seg")},
		{filepath.Join(in, "basic-0000.seg"), filepath.Join(in, "basic-0001.seg")},
	}
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprintf("named=%v", named), func(t *testing.T) {
			for round := range 3 {
				outDir, barrier := t.TempDir(), t.TempDir()
				dst := filepath.Join(outDir, "m.seg")
				env := []string{envBarrier + "=" + barrier, envBarrierN + "=2"}
				if named {
					env = append(env, envNamed+"=1")
				}
				var stderr [2]bytes.Buffer
				var errs [2]error
				var wg sync.WaitGroup
				for k := range 2 {
					args := append([]string{"merge", "--quiet", "--max-fan-in", "2", "--out", dst}, inputs[k]...)
					cmd := segtoolTest(t, env, args...)
					cmd.Stderr = &stderr[k]
					wg.Go(func() { errs[k] = cmd.Run() })
				}
				wg.Wait()
				ents, err := os.ReadDir(barrier)
				require.NoError(t, err)
				require.Len(t, ents, 2, "round %d: both processes reached the hook", round)
				winner := -1
				for k, err := range errs {
					if err == nil {
						require.Equal(t, -1, winner, "round %d: both merges exited 0", round)
						winner = k
						continue
					}
					var ee *exec.ExitError
					require.True(t, errors.As(err, &ee), "%v", err)
					require.Equal(t, 1, ee.ExitCode())
					require.Contains(t, stderr[k].String(), dst+": output exists", "round %d", round)
					t.Logf("round %d: the loser said: %s", round, bytes.TrimSpace(stderr[k].Bytes()))
				}
				require.NotEqual(t, -1, winner, "round %d: neither merge succeeded: %s | %s", round, stderr[0].String(), stderr[1].String())
				require.Equal(t, []string{"m.seg"}, dirNames(t, outDir))
				seg, err := columns.Open(dst)
				require.NoError(t, err)
				require.NoError(t, seg.Verify())
				require.Equal(t, 3000*len(inputs[winner]), seg.Rows(), "the winner's merge")
				require.NoError(t, seg.Close())
			}
		})
	}
}
