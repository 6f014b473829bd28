//go:build unix

package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A named pipe with no writer: the open waits, and the run's context ends the wait at once
// (it used to block in open for good, deaf to SIGTERM), with no output left behind.
func TestRunFIFONoWriter(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "in.csv")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	sp, err := ParseSpec([]byte(fmt.Sprintf(genSpecJSON, "")))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	out := filepath.Join(dir, "out.seg")
	start := time.Now()
	_, err = Run(ctx, sp, []Input{{Path: fifo}}, Options{Out: out, Durability: noSync})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "named pipe")
	require.Less(t, time.Since(start), 2*time.Second)
	require.NoFileExists(t, out)
}

// A named pipe with a writer: every row comes through. Its format comes from its name (its
// bytes are read once: a look at them first would lose them).
func TestRunFIFOWithWriter(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "in.csv")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	body := genCSV(5, 2000)
	written := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = w.WriteString(body)
			err = errors.Join(err, w.Close())
		}
		written <- err
	}()
	sp, err := ParseSpec([]byte(fmt.Sprintf(genSpecJSON, "")))
	require.NoError(t, err)
	res, err := Run(t.Context(), sp, []Input{{Path: fifo}}, Options{Out: filepath.Join(dir, "out.seg"), Durability: noSync})
	require.NoError(t, err)
	require.NoError(t, <-written)
	require.EqualValues(t, 2000, res.InputRows+int64(res.Skipped))
}
