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

// ReadSome is one step of a backend's ReadFrom loop: one Read from r into room (the spare
// capacity the backend appends into). It returns the bytes read, to append whatever else
// happened, and done when the loop should end, with the error to return: nil at io.EOF, r's
// error, or an error naming the backend when r returns a count outside [0, len(room)] (then n
// is 0).
func ReadSome(backend string, r io.Reader, room []byte) (n int, done bool, err error) {
	n, err = r.Read(room)
	switch {
	case n < 0 || n > len(room):
		return 0, true, fmt.Errorf("%s: read from: reader returned invalid count %d", backend, n)
	case err == io.EOF:
		return n, true, nil
	case err != nil:
		return n, true, err
	}
	return n, false, nil
}
