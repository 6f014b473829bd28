//go:build linux || darwin || openbsd

package sys

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// iovMax is the most buffers passed to one writev(2) call (IOV_MAX on Linux and the BSDs).
const iovMax = 1024

// Writev writes every byte of bufs to f at its current position with as few writev(2) calls as
// the kernel allows (at most 1024 buffers a call), resuming after short writes. bufs is not
// modified. It returns the bytes written; an error is returned with the count written before it.
func Writev(f *os.File, bufs [][]byte) (int64, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return writeEach(f, bufs)
	}
	var total int64
	i, skip := 0, 0 // the next byte to write is bufs[i][skip]
	batch := make([][]byte, 0, min(len(bufs), iovMax))
	for {
		batch = batch[:0]
		for j := i; j < len(bufs) && len(batch) < iovMax; j++ {
			b := bufs[j]
			if j == i {
				b = b[skip:]
			}
			if len(b) > 0 {
				batch = append(batch, b)
			}
		}
		if len(batch) == 0 {
			return total, nil
		}
		var n int
		var callErr error
		err := rc.Write(func(fd uintptr) bool {
			for {
				n, callErr = unix.Writev(int(fd), batch)
				if callErr == unix.EINTR {
					continue
				}
				return callErr != unix.EAGAIN
			}
		})
		if err == nil && callErr != nil {
			err = &os.PathError{Op: "writev", Path: f.Name(), Err: callErr}
		}
		if n > 0 {
			total += int64(n)
			for n > 0 {
				if avail := len(bufs[i]) - skip; n < avail {
					skip += n
					n = 0
				} else {
					n -= avail
					i, skip = i+1, 0
				}
			}
		} else if err == nil {
			err = io.ErrShortWrite // nothing written and no error: do not spin
		}
		if err != nil {
			return total, err
		}
	}
}

// writeEach writes the buffers one Write each.
func writeEach(f *os.File, bufs [][]byte) (int64, error) {
	var total int64
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		n, err := f.Write(b)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
