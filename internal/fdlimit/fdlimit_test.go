package fdlimit

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLimit: on Unix the limit is the soft RLIMIT_NOFILE, at least the descriptors open now;
// elsewhere it is unknown.
func TestLimit(t *testing.T) {
	l, err := Limit()
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		require.ErrorIs(t, err, ErrUnknown)
		return
	}
	require.NoError(t, err)
	require.Greater(t, l, uint64(3))
}

// TestOpen: on Linux the count follows the files opened and closed; elsewhere it is unknown.
func TestOpen(t *testing.T) {
	n0, err := Open()
	if runtime.GOOS != "linux" {
		require.True(t, errors.Is(err, ErrUnknown))
		return
	}
	require.NoError(t, err)
	require.Greater(t, n0, 2) // the standard streams at least
	dir := t.TempDir()
	var files []*os.File
	for i := range 5 {
		f, err := os.Create(filepath.Join(dir, string(rune('a'+i))))
		require.NoError(t, err)
		files = append(files, f)
	}
	n1, err := Open()
	require.NoError(t, err)
	require.Equal(t, n0+5, n1)
	for _, f := range files {
		require.NoError(t, f.Close())
	}
	n2, err := Open()
	require.NoError(t, err)
	require.Equal(t, n0, n2)
	if l, err := Limit(); err == nil && l != Unlimited {
		require.LessOrEqual(t, uint64(n2), l)
	}
}
