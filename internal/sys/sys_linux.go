//go:build linux

package sys

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Flags and advice values, named here so callers need not import x/sys/unix.
const (
	SyncFileRangeWaitBefore = unix.SYNC_FILE_RANGE_WAIT_BEFORE
	SyncFileRangeWrite      = unix.SYNC_FILE_RANGE_WRITE
	SyncFileRangeWaitAfter  = unix.SYNC_FILE_RANGE_WAIT_AFTER
	MadvHugepage            = unix.MADV_HUGEPAGE
	MadvDontneed            = unix.MADV_DONTNEED
	MadvPopulateWrite       = unix.MADV_POPULATE_WRITE
	MsSync                  = unix.MS_SYNC
	ProtRead                = unix.PROT_READ
	ProtWrite               = unix.PROT_WRITE
	MapShared               = unix.MAP_SHARED
	MapPrivate              = unix.MAP_PRIVATE
	MapAnon                 = unix.MAP_ANON
	RenameNoreplace         = unix.RENAME_NOREPLACE
)

func defaultCalls() Calls {
	return Calls{
		Fdatasync: func(f *os.File) error {
			return fdCall(f, "fdatasync", func(fd int) error { return unix.Fdatasync(fd) })
		},
		Fsync: func(f *os.File) error {
			return fdCall(f, "fsync", func(fd int) error { return unix.Fsync(fd) })
		},
		SyncFileRange: func(f *os.File, off, n int64, flags int) error {
			return fdCall(f, "sync_file_range", func(fd int) error { return unix.SyncFileRange(fd, off, n, flags) })
		},
		TrickleSupported: trickleSupported,
		Fallocate: func(f *os.File, off, n int64) error {
			return fdCall(f, "fallocate", func(fd int) error { return unix.Fallocate(fd, 0, off, n) })
		},
		PunchHole: func(f *os.File, off, n int64) error {
			err := fdCall(f, "fallocate", func(fd int) error {
				return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
			})
			var perr *os.PathError
			if errors.As(err, &perr) && errors.Is(perr.Err, unix.EOPNOTSUPP) {
				return fmt.Errorf("%w: punch a hole in %s: %v", ErrUnsupported, f.Name(), perr.Err)
			}
			return err
		},
		CopyFileRange: copyFileRange,
		Mmap:          unix.Mmap,
		Munmap:        unix.Munmap,
		Msync:         unix.Msync,
		Madvise:       unix.Madvise,
		DropCache: func(f *os.File, off, n int64) error {
			return fdCall(f, "posix_fadvise", func(fd int) error { return unix.Fadvise(fd, off, n, unix.FADV_DONTNEED) })
		},
		WillNeed: func(f *os.File, off, n int64) error {
			return fdCall(f, "posix_fadvise", func(fd int) error { return unix.Fadvise(fd, off, n, unix.FADV_WILLNEED) })
		},
		OpenTmpfile: func(dir string) (*os.File, error) {
			f, err := os.OpenFile(dir, unix.O_TMPFILE|os.O_RDWR, 0o600)
			if err != nil {
				var perr *os.PathError
				if errors.As(err, &perr) && (errors.Is(perr.Err, unix.EOPNOTSUPP) || errors.Is(perr.Err, unix.EISDIR) || errors.Is(perr.Err, unix.EINVAL)) {
					return nil, fmt.Errorf("%w: O_TMPFILE in %s: %v", ErrUnsupported, dir, perr.Err)
				}
				return nil, err
			}
			return f, nil
		},
		Linkat:    linkat,
		Renameat2: renameat2,
		Link:      os.Link,
	}
}

// trickleSupported probes sync_file_range once: on a bad descriptor a kernel that has the call
// says EBADF, one without it (or a seccomp filter refusing it) ENOSYS or EPERM.
var trickleSupported = sync.OnceValue(func() bool {
	err := unix.SyncFileRange(-1, 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	return !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM)
})

// RangeUnsupported reports whether err from SyncFileRange means that the call is missing or
// that the file's file system does not do it (ENOSYS, EINVAL, EOPNOTSUPP, ESPIPE), so that the
// caller should pace some other way; nothing was synced.
func RangeUnsupported(err error) bool {
	return errors.Is(err, ErrUnsupported) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ESPIPE)
}

// LinkUnsupported reports whether err from Link means that the file system makes no hard links
// (EPERM, EOPNOTSUPP: FAT, some FUSE file systems), so that a caller should do without.
func LinkUnsupported(err error) bool {
	return errors.Is(err, ErrUnsupported) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EOPNOTSUPP) ||
		errors.Is(err, unix.ENOSYS)
}

// CanLinkUnnamed reports whether Linkat can name an unnamed file here: /proc/self/fd is
// mounted. Callers that would be stuck with a finished unnamed file check it before they
// create one.
func CanLinkUnnamed() bool { return procFd() }

var procFd = sync.OnceValue(func() bool {
	fi, err := os.Stat("/proc/self/fd")
	return err == nil && fi.IsDir()
})

func linkat(f *os.File, newpath string) error {
	var callErr error
	err := fdCall(f, "linkat", func(fd int) error {
		callErr = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, newpath, unix.AT_SYMLINK_FOLLOW)
		if callErr == unix.EINTR {
			return callErr
		}
		return nil
	})
	if err != nil {
		return err
	}
	if callErr != nil {
		return &os.LinkError{Op: "linkat", Old: f.Name(), New: newpath, Err: callErr}
	}
	return nil
}

func renameat2(oldpath, newpath string, flags uint) error {
	var err error
	for {
		err = unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, flags)
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) && flags != 0 || errors.Is(err, unix.EOPNOTSUPP):
		// EINVAL with flags: "the file system does not support one of the flags".
		return fmt.Errorf("%w: renameat2 %s %s: %v", ErrUnsupported, oldpath, newpath, err)
	}
	return &os.LinkError{Op: "renameat2", Old: oldpath, New: newpath, Err: err}
}

// fdCall runs call on f's descriptor through SyscallConn, so the descriptor stays valid and the
// os.File keeps its blocking mode.
func fdCall(f *os.File, name string, call func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("%s %s: %w", name, f.Name(), err)
	}
	var callErr error
	if err := rc.Control(func(fd uintptr) {
		for {
			callErr = call(int(fd))
			if callErr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return fmt.Errorf("%s %s: %w", name, f.Name(), err)
	}
	if callErr != nil {
		return &os.PathError{Op: name, Path: f.Name(), Err: callErr}
	}
	return nil
}

func copyFileRange(dst, src *os.File, srcOff *int64, n int) (int, error) {
	var copied int
	var callErr error
	err := fdCall(src, "copy_file_range", func(sfd int) error {
		return fdCall(dst, "copy_file_range", func(dfd int) error {
			copied, callErr = unix.CopyFileRange(sfd, srcOff, dfd, nil, n, 0)
			if callErr == unix.EINTR {
				return callErr
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	if callErr != nil {
		// A failed copy_file_range copied nothing; x/sys passes on its -1 as the count.
		return 0, &os.PathError{Op: "copy_file_range", Path: src.Name(), Err: callErr}
	}
	return copied, nil
}

// CopyUnsupported reports whether err from CopyFileRange means the kernel cannot copy between
// these two files (and nothing was copied), so a buffered copy should be used instead.
func CopyUnsupported(err error) bool {
	return errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EBADF) || errors.Is(err, unix.EPERM) ||
		errors.Is(err, unix.ETXTBSY)
}
