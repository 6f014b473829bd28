package ingest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// rlimitChildEnv, set, makes TestRunUnderFileLimit the child: it lowers its own limit of open
// files, then ingests into the directory the variable names.
const rlimitChildEnv = "WRITEOUT_INGEST_RLIMIT_DIR"

// The issue 11 regression: ingest merged every run at once, so past ~1,000 runs (ulimit -n
// 1024) it failed at the very end with EMFILE. A child process limited to 64 open files
// ingests 300 runs with the default tmpfile medium: the bounded fan-in keeps it well inside.
func TestRunUnderFileLimit(t *testing.T) {
	if dir := os.Getenv(rlimitChildEnv); dir != "" {
		lim := syscall.Rlimit{Cur: 64, Max: 64}
		require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
		sp, err := ParseSpec([]byte(fmt.Sprintf(genSpecJSON, "")))
		require.NoError(t, err)
		res, err := Run(context.Background(), sp, []Input{csvInput("a.csv", genCSV(9, 300))},
			Options{Out: filepath.Join(dir, "out.seg"), Durability: noSync, MaxRowsInMemory: 1, MaxFanIn: 16})
		require.NoError(t, err)
		require.Equal(t, 299, res.runs) // the last row is merged from the Builder, no run
		return
	}
	if testing.Short() {
		t.Skip("runs a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunUnderFileLimit$", "-test.count=1")
	cmd.Env = append(os.Environ(), rlimitChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child:\n%s", out)
	require.Equal(t, []string{"out.seg"}, dirNames(t, dir))
	require.Len(t, segRows(t, filepath.Join(dir, "out.seg")), 300)
}
