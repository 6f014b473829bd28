//go:build linux

package mmapfile

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/writeout/writeout/internal/sys"
)

// platformErr reports why mmapfile cannot run here: on Linux, nothing.
func platformErr() error { return nil }

// fallocateUnsupported reports whether err from Fallocate means the file system cannot reserve
// space that way, so that zeros must be written instead.
func fallocateUnsupported(err error) bool {
	return errors.Is(err, sys.ErrUnsupported) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS)
}

// syncFileRangeUnsupported reports whether err from SyncFileRange means the kernel or the file
// system has no sync_file_range, so that pacing is off.
func syncFileRangeUnsupported(err error) bool {
	return errors.Is(err, sys.ErrUnsupported) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)
}
