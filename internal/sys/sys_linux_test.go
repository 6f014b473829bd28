//go:build linux

package sys_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
)

func tempFile(t *testing.T, content string) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "sys-*")
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	_, err = f.WriteString(content)
	require.NoError(t, err)
	return f
}

func TestSyncs(t *testing.T) {
	f := tempFile(t, "some data")
	require.NoError(t, sys.Default.Fdatasync(f))
	require.NoError(t, sys.Default.Fsync(f))
	require.NoError(t, sys.Default.SyncFileRange(f, 0, 4, sys.SyncFileRangeWrite))
	require.NoError(t, sys.Default.SyncFileRange(f, 0, 0, sys.SyncFileRangeWaitBefore|sys.SyncFileRangeWrite|sys.SyncFileRangeWaitAfter))
	dir, err := os.Open(filepath.Dir(f.Name()))
	require.NoError(t, err)
	defer dir.Close()
	require.NoError(t, sys.Default.Fsync(dir), "fsync of a directory")

	// Read-ahead asked for, of a range and past the end.
	require.NoError(t, sys.Default.WillNeed(f, 0, 4))
	require.NoError(t, sys.Default.WillNeed(f, 1<<20, 1<<20))

	// A closed file is an error, not a panic.
	require.NoError(t, f.Close())
	require.Error(t, sys.Default.Fdatasync(f))
	require.Error(t, sys.Default.Fsync(f))
	require.Error(t, sys.Default.WillNeed(f, 0, 4))
}

func TestFallocate(t *testing.T) {
	f := tempFile(t, "abc")
	require.NoError(t, sys.Default.Fallocate(f, 4096, 8192))
	fi, err := f.Stat()
	require.NoError(t, err)
	require.Equal(t, int64(4096+8192), fi.Size(), "fallocate extends the file")
	got := make([]byte, 3)
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, "abc", string(got), "fallocate keeps the bytes before")
	zero := make([]byte, 100)
	_, err = f.ReadAt(zero, 5000)
	require.NoError(t, err)
	require.Equal(t, make([]byte, 100), zero, "reserved space reads as zeros")
	// Inside the file: no change of size.
	require.NoError(t, sys.Default.Fallocate(f, 0, 100))
	fi, err = f.Stat()
	require.NoError(t, err)
	require.Equal(t, int64(4096+8192), fi.Size())
	// Bad arguments come back as errors.
	require.Error(t, sys.Default.Fallocate(f, -1, 10))
	require.Error(t, sys.Default.Fallocate(f, 0, 0))
}

// TestCopyFileRangeIntoPipe: the kernel refuses to copy into a pipe; the failed call reports
// 0 bytes (not the system call's -1), so that callers can fall back to a buffered copy.
func TestCopyFileRangeIntoPipe(t *testing.T) {
	src := tempFile(t, "0123456789abcdef")
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	off := int64(0)
	n, err := sys.Default.CopyFileRange(w, src, &off, 5)
	if err == nil {
		t.Skip("this kernel copies into a pipe")
	}
	require.Zero(t, n)
	require.Zero(t, off)
	require.True(t, sys.CopyUnsupported(err), "%v", err)
}

func TestCopyFileRange(t *testing.T) {
	src := tempFile(t, "0123456789abcdef")
	dst := tempFile(t, "hdr")
	// dst's position is after "hdr"; src's own position (at its end) is ignored.
	off := int64(3)
	n, err := sys.Default.CopyFileRange(dst, src, &off, 5)
	if sys.CopyUnsupported(err) {
		t.Skipf("copy_file_range unsupported here: %v", err)
	}
	require.NoError(t, err)
	require.Equal(t, 5, n)
	require.Equal(t, int64(8), off, "source offset advanced")
	pos, err := dst.Seek(0, io.SeekCurrent)
	require.NoError(t, err)
	require.Equal(t, int64(8), pos, "destination position advanced")
	srcPos, err := src.Seek(0, io.SeekCurrent)
	require.NoError(t, err)
	require.Equal(t, int64(16), srcPos, "source position unchanged")

	// Again from the advanced offset, past the end of src: a short copy, then 0 at the end.
	n, err = sys.Default.CopyFileRange(dst, src, &off, 100)
	require.NoError(t, err)
	require.Equal(t, 8, n)
	require.Equal(t, int64(16), off)
	n, err = sys.Default.CopyFileRange(dst, src, &off, 100)
	require.NoError(t, err)
	require.Zero(t, n, "copy at the end of src")

	got, err := os.ReadFile(dst.Name())
	require.NoError(t, err)
	require.Equal(t, "hdr3456789abcdef", string(got))
}

func TestOpenTmpfile(t *testing.T) {
	dir := t.TempDir()
	f, err := sys.Default.OpenTmpfile(dir)
	if errors.Is(err, sys.ErrUnsupported) {
		t.Skipf("no O_TMPFILE here: %v", err)
	}
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteString("unnamed")
	require.NoError(t, err)
	got := make([]byte, 7)
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, "unnamed", string(got))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents, "an O_TMPFILE file has no name in its directory")

	_, err = sys.Default.OpenTmpfile(filepath.Join(dir, "missing"))
	require.Error(t, err)
	require.NotErrorIs(t, err, sys.ErrUnsupported, "a missing directory is not 'unsupported'")
}

func TestMmapMsyncMunmap(t *testing.T) {
	page := os.Getpagesize()
	f := tempFile(t, "")
	require.NoError(t, sys.Default.Fallocate(f, 0, int64(2*page)))
	mem, err := sys.Default.Mmap(int(f.Fd()), 0, 2*page, sys.ProtRead|sys.ProtWrite, sys.MapShared)
	require.NoError(t, err)
	copy(mem[page:], "through the mapping")
	require.NoError(t, sys.Default.Msync(mem[page:page+19], sys.MsSync))
	got := make([]byte, 19)
	_, err = f.ReadAt(got, int64(page))
	require.NoError(t, err)
	require.Equal(t, "through the mapping", string(got))
	require.Error(t, sys.Default.Msync(mem[1:10], sys.MsSync), "msync at an unaligned address is EINVAL")
	require.NoError(t, sys.Default.Madvise(mem, sys.MadvDontneed))
	require.NoError(t, sys.Default.Munmap(mem))

	anon, err := sys.Default.Mmap(-1, 0, page, sys.ProtRead|sys.ProtWrite, sys.MapPrivate|sys.MapAnon)
	require.NoError(t, err)
	anon[0] = 1
	require.NoError(t, sys.Default.Munmap(anon))
}

// TestLinkat: an unnamed file gets a name, with its bytes; an existing name is never replaced.
func TestLinkat(t *testing.T) {
	if !sys.CanLinkUnnamed() {
		t.Skip("no /proc/self/fd here")
	}
	dir := t.TempDir()
	f, err := sys.Default.OpenTmpfile(dir)
	if errors.Is(err, sys.ErrUnsupported) {
		t.Skipf("no O_TMPFILE here: %v", err)
	}
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteString("linked")
	require.NoError(t, err)
	dst := filepath.Join(dir, "named")
	require.NoError(t, sys.Default.Linkat(f, dst))
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, "linked", string(got))

	other := filepath.Join(dir, "other")
	require.NoError(t, os.WriteFile(other, []byte("old"), 0o644))
	err = sys.Default.Linkat(f, other)
	require.ErrorIs(t, err, fs.ErrExist)
	got, err = os.ReadFile(other)
	require.NoError(t, err)
	require.Equal(t, "old", string(got), "linkat replaced an existing file")

	require.Error(t, sys.Default.Linkat(f, filepath.Join(dir, "missing", "x")))
	require.NoError(t, f.Close())
	require.Error(t, sys.Default.Linkat(f, filepath.Join(dir, "closed")), "a closed file is an error, not a panic")
}

// TestRenameat2: RENAME_NOREPLACE renames onto a free name and fails, changing nothing, onto a
// taken one; flags 0 replaces.
func TestRenameat2(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.WriteFile(a, []byte("A"), 0o644))
	err := sys.Default.Renameat2(a, b, sys.RenameNoreplace)
	if errors.Is(err, sys.ErrUnsupported) {
		t.Skipf("no RENAME_NOREPLACE here: %v", err)
	}
	require.NoError(t, err)
	require.NoFileExists(t, a)
	require.NoError(t, os.WriteFile(a, []byte("A2"), 0o644))
	err = sys.Default.Renameat2(a, b, sys.RenameNoreplace)
	require.ErrorIs(t, err, fs.ErrExist)
	got, err := os.ReadFile(b)
	require.NoError(t, err)
	require.Equal(t, "A", string(got))
	require.FileExists(t, a)
	require.NoError(t, sys.Default.Renameat2(a, b, 0))
	got, err = os.ReadFile(b)
	require.NoError(t, err)
	require.Equal(t, "A2", string(got))
	require.ErrorIs(t, sys.Default.Renameat2(a, b, sys.RenameNoreplace), fs.ErrNotExist)

	require.ErrorIs(t, sys.Default.Link(b, filepath.Join(dir, "b")), fs.ErrExist)
}
