package columns

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/faultfs"
	"github.com/writeout/writeout/medium"
)

// fileBody is a body of n bytes written in pieces of 1000, as an exporter writes.
func fileBody(n int) (want []byte, write func(io.Writer) error) {
	want = make([]byte, n)
	for i := range want {
		want[i] = byte(i*7 + i>>8)
	}
	return want, func(w io.Writer) error {
		for b := want; len(b) > 0; {
			k := min(len(b), 1000)
			if _, err := w.Write(b[:k]); err != nil {
				return err
			}
			b = b[k:]
		}
		return nil
	}
}

func TestPublishFile(t *testing.T) {
	want, write := fileBody(300_000)
	for _, base := range []struct {
		name string
		fs   func() afero.Fs
	}{{"os", afero.NewOsFs}, {"mem", afero.NewMemMapFs}} {
		for _, d := range []struct {
			dur   medium.Durability
			syncs int
		}{
			{medium.Durability{Sync: medium.SyncNone}, 0},
			{medium.Durability{Sync: medium.SyncOutput}, 2},
			{medium.Durability{Sync: medium.SyncAll}, 2},
		} {
			t.Run("fs="+base.name+"/sync="+d.dur.Sync.String(), func(t *testing.T) {
				fsys := base.fs()
				dir := t.TempDir()
				require.NoError(t, fsys.MkdirAll(dir, 0o755))
				dst := filepath.Join(dir, "out.bin")
				info, err := PublishFile(context.Background(), dst, write, PublishOptions{Fs: fsys, Durability: d.dur})
				require.NoError(t, err)
				require.Equal(t, dst, info.Path)
				require.Equal(t, int64(len(want)), info.Size)
				require.Equal(t, d.syncs, info.Syncs)
				got, err := afero.ReadFile(fsys, dst)
				require.NoError(t, err)
				require.True(t, bytes.Equal(want, got))
				require.Equal(t, []string{"out.bin"}, listDir(t, fsys, dir))

				// An existing file is kept unless Replace is set.
				_, err = PublishFile(context.Background(), dst, func(w io.Writer) error {
					_, err := io.WriteString(w, "new")
					return err
				}, PublishOptions{Fs: fsys, Durability: d.dur})
				require.ErrorIs(t, err, fs.ErrExist)
				require.ErrorContains(t, err, "output exists")
				got, err = afero.ReadFile(fsys, dst)
				require.NoError(t, err)
				require.True(t, bytes.Equal(want, got))

				info, err = PublishFile(context.Background(), dst, func(w io.Writer) error {
					_, err := io.WriteString(w, "new")
					return err
				}, PublishOptions{Fs: fsys, Durability: d.dur, Replace: true})
				require.NoError(t, err)
				require.Equal(t, int64(3), info.Size)
				got, err = afero.ReadFile(fsys, dst)
				require.NoError(t, err)
				require.Equal(t, "new", string(got))
				require.Equal(t, []string{"out.bin"}, listDir(t, fsys, dir))
			})
		}
	}
}

// TestPublishFileWriteError: an error of the write function fails the publication, is found by
// errors.Is, and leaves the directory as it was, an existing dst included.
func TestPublishFileWriteError(t *testing.T) {
	errBody := errors.New("the body failed")
	for _, replace := range []bool{false, true} {
		dir := t.TempDir()
		dst := filepath.Join(dir, "out.bin")
		if replace {
			require.NoError(t, os.WriteFile(dst, []byte("old"), 0o644))
		}
		before := listDir(t, afero.NewOsFs(), dir)
		_, err := PublishFile(context.Background(), dst, func(w io.Writer) error {
			if _, err := w.Write(make([]byte, 1<<20)); err != nil {
				return err
			}
			return errBody
		}, PublishOptions{Replace: replace})
		require.ErrorIs(t, err, errBody)
		require.EqualError(t, err, errBody.Error(), "the write function's error, as it is")
		require.Equal(t, before, listDir(t, afero.NewOsFs(), dir))
		if replace {
			got, err := os.ReadFile(dst)
			require.NoError(t, err)
			require.Equal(t, "old", string(got))
		}
	}

	// A cancelled context stops the publication too.
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	_, err := PublishFile(ctx, filepath.Join(dir, "out.bin"), func(w io.Writer) error {
		cancel()
		_, err := w.Write(make([]byte, 1<<20)) // past the buffer: reaches the file's writer
		return err
	}, PublishOptions{})
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, listDir(t, afero.NewOsFs(), dir))
}

// TestPublishFileFaults fails each file-system operation of a publication in turn: every failure
// is reported and leaves nothing but, when the failure comes after the naming, the complete file.
func TestPublishFileFaults(t *testing.T) {
	want, write := fileBody(600_000)
	bfs := afero.NewMemMapFs()
	dir := "/out"
	require.NoError(t, bfs.MkdirAll(dir, 0o755))
	dst := filepath.Join(dir, "out.bin")
	kinds := map[faultfs.Kind]bool{}
	for n := int64(0); ; n++ {
		var op faultfs.Op
		ffs := faultfs.New(bfs, nil)
		ffs.SetInjector(func(o faultfs.Op) error {
			if o.N == n {
				op = o
				return syscall.EIO
			}
			return nil
		})
		_, err := PublishFile(context.Background(), dst, write, PublishOptions{Fs: ffs})
		if ffs.Injected() == 0 {
			require.NoError(t, err)
			require.True(t, requireNothingOrFinished(t, bfs, dir, nil, dst, want))
			t.Logf("published after failing each of the first %d operations in turn (%v)", n, kinds)
			break
		}
		require.ErrorIs(t, err, syscall.EIO, "op %d %+v", n, op)
		kinds[op.Kind] = true
		if op.Path == dir {
			require.ErrorContains(t, err, "is in place, complete")
			require.True(t, requireNothingOrFinished(t, bfs, dir, nil, dst, want))
			require.NoError(t, bfs.Remove(dst))
			continue
		}
		require.False(t, requireNothingOrFinished(t, bfs, dir, nil, dst, want), "op %d %+v failed, yet dst exists", n, op)
	}
	for _, k := range []faultfs.Kind{faultfs.KindOpen, faultfs.KindWrite, faultfs.KindSync, faultfs.KindRename} {
		require.True(t, kinds[k], "no %s failure tried", k)
	}
}

// TestPublishFileReadBack: under SyncAll a file whose bytes read back differ from those written
// fails with ErrCorrupt and is not published.
func TestPublishFileReadBack(t *testing.T) {
	_, write := fileBody(100_000)
	fsys := flipFs{afero.NewMemMapFs()}
	require.NoError(t, fsys.MkdirAll("/d", 0o755))
	_, err := PublishFile(context.Background(), "/d/out.bin", write, PublishOptions{Fs: fsys, Durability: medium.Durability{Sync: medium.SyncAll}})
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "read back")
	require.Empty(t, listDir(t, fsys, "/d"))

	// The same file system under SyncOutput does not read back: the file is published.
	_, err = PublishFile(context.Background(), "/d/out.bin", write, PublishOptions{Fs: fsys})
	require.NoError(t, err)
}

// flipFs is a file system whose files' ReadAt returns the bytes with byte 50,000 flipped: a
// device that lost a write.
type flipFs struct{ afero.Fs }

func (f flipFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	file, err := f.Fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return flipFile{file}, nil
}

type flipFile struct{ afero.File }

func (f flipFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	const at = 50_000
	if off <= at && at < off+int64(n) {
		p[at-off] ^= 1
	}
	return n, err
}
