//go:build unix

package columns

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSweepTempOS: on the OS file system, a symlink of the pattern (even to a segment) and a
// FIFO of the pattern are kept, and the sweep does not hang on the FIFO.
func TestSweepTempOS(t *testing.T) {
	dir := t.TempDir()
	s, rows := publishRows(t, 5)
	seg := writeRows(t, s, rows, writerOptions{})
	target := filepath.Join(dir, "real.seg")
	require.NoError(t, os.WriteFile(target, seg, 0o644))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, ".writeout-1.tmp")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, ".writeout-2.tmp"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".writeout-3.tmp"), seg, 0o644))
	removed, err := SweepTemp(nil, dir)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, ".writeout-3.tmp")}, removed)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 3)
	ok, err := IsTempFile(nil, filepath.Join(dir, ".writeout-1.tmp"))
	require.NoError(t, err)
	require.False(t, ok, "a symlink")
}
