//go:build unix

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIngestFIFONoWriterSIGTERM: ingest of a named pipe that no writer opens waits for one,
// and the first SIGTERM ends it within a second (it used to sit in open(2), SIGTERM
// unheard), exit 1, naming the pipe, and no output is left.
func TestIngestFIFONoWriterSIGTERM(t *testing.T) {
	dir := t.TempDir()
	mustSegtool(t, "gen", "--schema", "basic", "--rows", "10", "--format", "csv", "--out", dir)
	fifo := filepath.Join(dir, "in.csv")
	require.NoError(t, mkfifo(fifo))
	out := filepath.Join(dir, "out.seg")
	cmd := exec.Command(segtoolBinary(t), "ingest", "--quiet", "--spec", filepath.Join(dir, "basic-spec.json"), "--out", out, fifo)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	time.Sleep(500 * time.Millisecond) // in open(2) by now
	sent := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	kill := time.AfterFunc(5*time.Second, func() { _ = cmd.Process.Kill() }) // deaf to SIGTERM
	defer kill.Stop()
	werr := cmd.Wait()
	took := time.Since(sent)
	var ee *exec.ExitError
	require.ErrorAs(t, werr, &ee, stderr.String())
	require.Equal(t, 1, ee.ExitCode(), stderr.String())
	require.Less(t, took, time.Second, stderr.String())
	require.Contains(t, stderr.String(), "named pipe", stderr.String())
	_, err := os.Stat(out)
	require.ErrorIs(t, err, os.ErrNotExist)
}
