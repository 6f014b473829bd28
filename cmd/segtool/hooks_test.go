package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/internal/testhook"
)

// Environment of segtool-test, the test binary run as segtool with test settings.
const (
	// envNamed=1: no O_TMPFILE, so every temp file has a name (the fallback of file systems
	// without it).
	envNamed = "WRITEOUT_TEST_NAMED"
	// envBarrier=DIR: before naming its output, the process creates DIR/PID and waits until
	// DIR holds envBarrierN entries (30 s at most): processes racing to one output all get past
	// their checks before any names its file.
	envBarrier  = "WRITEOUT_TEST_BARRIER"
	envBarrierN = "WRITEOUT_TEST_BARRIER_N"
	// envMark=DIR: once it has created its output file (before writing it) the process
	// creates DIR/created, and before naming it DIR/named, and goes on: a test can act (kill
	// it) at these moments.
	envMark = "WRITEOUT_TEST_MARK"
)

// testSettings applies the settings of the environment to this process; it runs before Main
// in segtool-test.
func testSettings() {
	traceSettings() // trickle_test.go
	if os.Getenv(envNamed) == "1" {
		sys.Default.OpenTmpfile = func(string) (*os.File, error) {
			return nil, fmt.Errorf("segtool-test: %w", sys.ErrUnsupported)
		}
	}
	if dir := os.Getenv(envMark); dir != "" {
		testhook.SetOutputCreated(func(string) { _ = os.WriteFile(filepath.Join(dir, "created"), nil, 0o644) })
		testhook.SetBeforePublish(func(string) { _ = os.WriteFile(filepath.Join(dir, "named"), nil, 0o644) })
	}
	if dir := os.Getenv(envBarrier); dir != "" {
		n, err := strconv.Atoi(os.Getenv(envBarrierN))
		if err != nil {
			n = 2
		}
		testhook.SetBeforePublish(func(string) {
			if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(os.Getpid())), nil, 0o644); err != nil {
				panic(err)
			}
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if ents, err := os.ReadDir(dir); err == nil && len(ents) >= n {
					return
				}
			}
		})
	}
}

// segtoolTest returns a command running segtool-test with the settings env (KEY=VALUE).
func segtoolTest(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	p, err := exec.LookPath("segtool-test")
	require.NoError(t, err)
	cmd := exec.Command(p, args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}
