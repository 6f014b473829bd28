package backend

import (
	"fmt"
	"io"
)

// IO holds the steps of ReadAt, ReadFrom and WriteTo that every backend's Bytes takes the same
// way. Name begins the errors they return ("offheap", "medium: heap"); Invalid is the sentinel
// those errors wrap for a bad argument or a broken reader or writer (medium.ErrInvalid). A
// backend keeps one IO in a package variable.
type IO struct {
	Name    string
	Invalid error
}

// ReadAtBounds checks a ReadAt request against the size of a Bytes, the way os.File.ReadAt
// answers it: a negative offset is an error wrapping Invalid, an empty p reads nothing, and an
// offset at or past size is io.EOF. When done is true the caller returns 0 and err at once;
// otherwise it reads.
func (b IO) ReadAtBounds(p []byte, off, size int64) (done bool, err error) {
	switch {
	case off < 0:
		return true, fmt.Errorf("%s: read at %d: %w: negative offset", b.Name, off, b.Invalid)
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
// error, or an error wrapping Invalid when r returns a count outside [0, len(room)] (then n
// is 0).
func (b IO) ReadSome(r io.Reader, room []byte) (n int, done bool, err error) {
	n, err = r.Read(room)
	switch {
	case n < 0 || n > len(room):
		return 0, true, fmt.Errorf("%s: read from: %w: reader returned invalid count %d", b.Name, b.Invalid, n)
	case err == io.EOF:
		return n, true, nil
	case err != nil:
		return n, true, err
	}
	return n, false, nil
}

// WriteFull writes p to w in one call, as a WriteTo does for each piece of a Bytes. A short
// write that came without an error becomes io.ErrShortWrite, as in io.Copy, and a count outside
// [0, len(p)] an error wrapping Invalid (then n is 0). w's own error is returned as it is.
func (b IO) WriteFull(w io.Writer, p []byte) (int, error) {
	n, err := w.Write(p)
	switch {
	case n < 0 || n > len(p):
		return 0, fmt.Errorf("%s: write to: %w: writer returned invalid count %d", b.Name, b.Invalid, n)
	case err == nil && n != len(p):
		err = io.ErrShortWrite
	}
	return n, err
}
