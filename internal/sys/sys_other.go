//go:build !linux

package sys

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Flags and advice values: placeholders where the calls they go with are unsupported.
const (
	SyncFileRangeWaitBefore = 1
	SyncFileRangeWrite      = 2
	SyncFileRangeWaitAfter  = 4
	MadvHugepage            = 14
	MadvDontneed            = 4
	MadvPopulateWrite       = 23
	MsSync                  = 4
	ProtRead                = 1
	ProtWrite               = 2
	MapShared               = 1
	MapPrivate              = 2
	MapAnon                 = 0x20
	RenameNoreplace         = 1
)

func unsupported(name string) error { return fmt.Errorf("%w: %s", ErrUnsupported, name) }

func defaultCalls() Calls {
	return Calls{
		// Without fdatasync, a full fsync is the correct, slower equivalent.
		Fdatasync: func(f *os.File) error { return f.Sync() },
		Fsync:     func(f *os.File) error { return f.Sync() },
		// There is no writeback pacing call: callers pace with fdatasync (RangeUnsupported).
		SyncFileRange:    func(*os.File, int64, int64, int) error { return unsupported("sync_file_range") },
		TrickleSupported: func() bool { return false },
		Fallocate:        func(*os.File, int64, int64) error { return unsupported("fallocate") },
		PunchHole:        func(*os.File, int64, int64) error { return unsupported("fallocate") },
		CopyFileRange: func(*os.File, *os.File, *int64, int) (int, error) {
			return 0, unsupported("copy_file_range")
		},
		Mmap:        func(int, int64, int, int, int) ([]byte, error) { return nil, unsupported("mmap") },
		Munmap:      func([]byte) error { return unsupported("munmap") },
		Msync:       func([]byte, int) error { return unsupported("msync") },
		Madvise:     func([]byte, int) error { return nil },
		DropCache:   func(*os.File, int64, int64) error { return unsupported("posix_fadvise") },
		WillNeed:    func(*os.File, int64, int64) error { return nil },
		OpenTmpfile: func(string) (*os.File, error) { return nil, unsupported("O_TMPFILE") },
		// Without these, callers fall back to a hard link (Link) then an unlink.
		Linkat:    func(*os.File, string) error { return unsupported("linkat") },
		Renameat2: func(string, string, uint) error { return unsupported("renameat2") },
		Link:      os.Link,
	}
}

// LinkUnsupported reports whether err from Link means that the file system makes no hard links,
// so that a caller should do without.
func LinkUnsupported(err error) bool {
	return errors.Is(err, ErrUnsupported) || errors.Is(err, errors.ErrUnsupported) || errors.Is(err, fs.ErrPermission)
}

// RangeUnsupported reports whether err from SyncFileRange means the call is missing: here, for
// any error.
func RangeUnsupported(err error) bool { return err != nil }

// CanLinkUnnamed reports whether Linkat can name an unnamed file: never here.
func CanLinkUnnamed() bool { return false }

// CopyUnsupported reports whether err from CopyFileRange means a buffered copy should be used.
func CopyUnsupported(err error) bool { return err != nil }
