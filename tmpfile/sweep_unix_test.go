//go:build unix

package tmpfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSweepOS: on the OS file system, a symlink of the pattern (to an empty file) and a FIFO of
// the pattern stay; an empty regular file goes.
func TestSweepOS(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, nil, 0o644))
	link := filepath.Join(dir, "writeout-tmpfile-1-aa.tmp")
	require.NoError(t, os.Symlink(target, link))
	fifo := filepath.Join(dir, "writeout-tmpfile-2-bb.tmp")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	empty := filepath.Join(dir, "writeout-tmpfile-3-cc.tmp")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	removed, err := Sweep(nil, dir)
	require.NoError(t, err)
	require.Equal(t, []string{empty}, removed)
	for _, p := range []string{target, link, fifo} {
		_, err := os.Lstat(p)
		require.NoError(t, err, "%s removed", p)
	}
}
