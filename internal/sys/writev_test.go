package sys

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// writevBufs returns n buffers of varied sizes (some empty) and their concatenation.
func writevBufs(n int) ([][]byte, []byte) {
	var bufs [][]byte
	var all []byte
	for i := range n {
		b := bytes.Repeat([]byte{byte(i)}, (i*37)%300)
		bufs = append(bufs, b)
		all = append(all, b...)
	}
	return bufs, all
}

func TestWritevFile(t *testing.T) {
	bufs, want := writevBufs(3000) // more than one call's worth of buffers
	orig := make([][]byte, len(bufs))
	copy(orig, bufs)
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteString("head")
	require.NoError(t, err)
	n, err := Writev(f, bufs)
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), n)
	require.Equal(t, orig, bufs, "bufs not modified")
	n, err = Writev(f, nil)
	require.NoError(t, err)
	require.Zero(t, n)
	got, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	require.True(t, bytes.Equal(append([]byte("head"), want...), got))
}

// TestWritevPipe writes more than a pipe holds, so writev returns short counts and EAGAIN.
func TestWritevPipe(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	var bufs [][]byte
	var want []byte
	for i := range 40 {
		b := bytes.Repeat([]byte{byte(i)}, 100_000+i)
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	done := make(chan []byte)
	go func() {
		got, _ := io.ReadAll(r)
		done <- got
	}()
	n, err := Writev(w, bufs)
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), n)
	require.NoError(t, w.Close())
	require.True(t, bytes.Equal(want, <-done))
}

func TestWritevClosedFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	n, err := Writev(f, [][]byte{[]byte("x")})
	require.Error(t, err)
	require.Zero(t, n)
}
