// Package sys is the thin layer between writeout and the system calls it makes for durability
// and memory: fdatasync, sync_file_range, fallocate, mmap, munmap, msync, madvise,
// copy_file_range, O_TMPFILE, and the calls that name a file without replacing another (linkat,
// renameat2 with RENAME_NOREPLACE, link). Every call goes through a Calls table so that tests can replace
// one entry and see the failing path taken, not just reviewed.
//
// Linux gets the real calls (sys_linux.go); elsewhere (sys_other.go) the calls that have a
// portable equivalent use it and the others return ErrUnsupported.
package sys

import (
	"errors"
	"os"
)

// ErrUnsupported is returned by a call the platform does not have. Callers fall back to a
// slower, correct path.
var ErrUnsupported = errors.New("sys: not supported on this platform")

// Calls is a table of system calls. The zero value is not usable; start from Default and
// replace entries in tests.
type Calls struct {
	// Fdatasync flushes a file's data (and the metadata needed to read it) to stable storage.
	Fdatasync func(f *os.File) error
	// Fsync flushes a file or directory with all its metadata.
	Fsync func(f *os.File) error
	// SyncFileRange submits or waits for writeback of a range (Linux sync_file_range flags).
	// ErrUnsupported off Linux; see RangeUnsupported for the errors that mean the file system
	// or the kernel has no such call.
	SyncFileRange func(f *os.File, off, n int64, flags int) error
	// TrickleSupported reports whether this process can call sync_file_range at all: probed
	// once per process on Linux (a kernel or a seccomp filter without it says ENOSYS); false
	// elsewhere. A file system may still refuse it per file (RangeUnsupported).
	TrickleSupported func() bool
	// Fallocate reserves [off, off+n) so later writes there cannot fail for lack of space.
	Fallocate func(f *os.File, off, n int64) error
	// PunchHole deallocates [off, off+n) of a file, whose size stays: the range reads as zeros
	// and its pages and blocks go back to the system at once (fallocate with
	// FALLOC_FL_PUNCH_HOLE). ErrUnsupported off Linux and where the file system has none.
	PunchHole func(f *os.File, off, n int64) error
	// CopyFileRange copies n bytes from src at *srcOff to dst at its current position, in the
	// kernel, advancing *srcOff. It returns the bytes copied; 0 with a nil error means src ended.
	CopyFileRange func(dst, src *os.File, srcOff *int64, n int) (int, error)
	// Mmap maps length bytes of fd at offset (fd -1 and MAP_ANON flags for anonymous memory).
	Mmap func(fd int, offset int64, length int, prot, flags int) ([]byte, error)
	// Munmap unmaps a mapping returned by Mmap.
	Munmap func(b []byte) error
	// Msync flushes a page-aligned range of a shared file mapping.
	Msync func(b []byte, flags int) error
	// Madvise gives the kernel advice about a range of a mapping.
	Madvise func(b []byte, advice int) error
	// DropCache drops the clean cached pages of [off, off+n) of a file (posix_fadvise with
	// POSIX_FADV_DONTNEED), so that the next reads of the range come from the device; dirty
	// pages stay. ErrUnsupported off Linux.
	DropCache func(f *os.File, off, n int64) error
	// WillNeed asks the kernel to read [off, off+n) of a file into the page cache in the
	// background (posix_fadvise with POSIX_FADV_WILLNEED): a hint, which does nothing off
	// Linux.
	WillNeed func(f *os.File, off, n int64) error
	// OpenTmpfile opens an unnamed temp file in dir (O_TMPFILE); ErrUnsupported where the
	// platform or file system has none.
	OpenTmpfile func(dir string) (*os.File, error)
	// Linkat gives an open file (an unnamed one from OpenTmpfile) the name newpath, in the
	// directory it was opened in: linkat(2) of /proc/self/fd/N with AT_SYMLINK_FOLLOW, which
	// needs no privilege. It never replaces: an existing newpath fails with an error wrapping
	// fs.ErrExist. ErrUnsupported off Linux; see also CanLinkUnnamed.
	Linkat func(f *os.File, newpath string) error
	// Renameat2 renames oldpath to newpath with Linux renameat2(2) flags; with RenameNoreplace
	// an existing newpath fails with an error wrapping fs.ErrExist and nothing changes.
	// ErrUnsupported where the kernel or the file system lacks the call or the flag.
	Renameat2 func(oldpath, newpath string, flags uint) error
	// Link makes newpath a hard link to oldpath (link(2), os.Link); an existing newpath fails
	// with an error wrapping fs.ErrExist.
	Link func(oldpath, newpath string) error
}

// Default is the table of the real calls. Packages copy it; tests copy it and replace entries.
var Default = defaultCalls()
