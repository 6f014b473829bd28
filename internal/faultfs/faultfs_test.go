package faultfs_test

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/faultfs"
)

// run does a fixed little workload and returns its first error.
func run(fs afero.Fs) error {
	f, err := fs.Create("/d/a")
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte("hello")); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fs.Rename("/d/a", "/d/b")
}

func TestFailEachInTurn(t *testing.T) {
	injected := errors.New("injected")
	var n int64
	for ; ; n++ {
		base := afero.NewMemMapFs()
		require.NoError(t, base.MkdirAll("/d", 0o755))
		fs := faultfs.New(base, faultfs.FailNth(n, injected))
		err := run(fs)
		if fs.Injected() == 0 {
			require.NoError(t, err)
			break
		}
		require.ErrorIs(t, err, injected, "op %d", n)
		var perr *os.PathError
		require.ErrorAs(t, err, &perr)
	}
	require.Equal(t, int64(5), n, "create, write, sync, close, rename")
}

func TestCountsAndKinds(t *testing.T) {
	fs := faultfs.New(afero.NewMemMapFs(), nil)
	require.NoError(t, fs.MkdirAll("/d", 0o755))
	require.NoError(t, run(fs))
	c := fs.Counts()
	require.Equal(t, int64(1), c[faultfs.KindWrite])
	require.Equal(t, int64(1), c[faultfs.KindSync])
	require.Equal(t, int64(1), c[faultfs.KindRename])
	require.Equal(t, int64(6), fs.Ops())

	fs.ResetCounts()
	fs.SetInjector(faultfs.FailKind(faultfs.KindWrite, 1, syscall.ENOSPC))
	f, err := fs.OpenFile("/d/b", os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("x"), 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("y"), 1)
	require.ErrorIs(t, err, syscall.ENOSPC)
	_, err = f.WriteAt([]byte("z"), 2)
	require.NoError(t, err)
	p := make([]byte, 5)
	_, err = f.ReadAt(p, 0)
	require.NoError(t, err)
	require.Equal(t, "xezlo", string(p))
	require.NoError(t, f.Close())

	fs.SetInjector(faultfs.FailWhen(func(op faultfs.Op) bool { return op.Kind == faultfs.KindRemove }, syscall.EIO))
	require.ErrorIs(t, fs.Remove("/d/b"), syscall.EIO)
	_, err = fs.Stat("/d/b")
	require.NoError(t, err, "a failed remove leaves the file")
}
