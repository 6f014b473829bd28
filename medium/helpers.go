package medium

import (
	"fmt"
	"io"
)

// WriteFull writes p to w in one call and turns a short write that came without an error into
// io.ErrShortWrite, as io.Copy does. Backends use it in WriteTo.
func WriteFull(w io.Writer, p []byte) (int, error) {
	n, err := w.Write(p)
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	return n, err
}

// ReadAtBounds checks a ReadAt request against the size of a Bytes, the way os.File.ReadAt
// answers it: a negative offset is an error wrapping ErrInvalid (named after the backend), an
// empty p reads nothing, and an offset at or past size is io.EOF. When done is true the caller
// returns 0 and err at once; otherwise it reads.
func ReadAtBounds(backend string, p []byte, off, size int64) (done bool, err error) {
	switch {
	case off < 0:
		return true, fmt.Errorf("%s: read at %d: %w: negative offset", backend, off, ErrInvalid)
	case len(p) == 0:
		return true, nil
	case off >= size:
		return true, io.EOF
	}
	return false, nil
}
