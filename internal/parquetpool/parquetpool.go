// Package parquetpool is a parquet-go BufferPool on writeout media: a parquet-go writer given
// parquet.ColumnPageBuffers(pool) stages its column pages in one medium (a tmpfile medium's one
// file, an offheap medium's mappings and budget) instead of one temp file per buffer.
//
// # What parquet-go does with a buffer
//
// parquet-go (v0.32) uses a page buffer in one way: GetBuffer, Seek(0, io.SeekStart) on the
// fresh buffer, sequential writes (Write, or ReadFrom through io.Copy), optionally
// Seek(0, io.SeekCurrent) to learn the size, Seek(0, io.SeekStart), a sequential read to the end
// (Read, or WriteTo through io.Copy), then PutBuffer. A Buffer supports exactly that: each
// buffer is a medium.Bytes, append-only, with a read/write position. Seek moves the position
// anywhere at or past 0 (io.SeekStart, io.SeekCurrent, io.SeekEnd); Read and WriteTo read from
// it; Write and ReadFrom append, and fail with an error wrapping ErrNotAppend when the position
// is not at the end (a Bytes cannot be overwritten).
//
// # Release
//
// Each buffer lives in a child of the pool's medium; PutBuffer closes that child, which
// releases the buffer's memory and, on a tmpfile medium, hands its memory buffer and its space
// in the medium's file to the buffers got next (a tmpfile medium reuses a closed child's
// buffers and file space), so that a writer's row groups keep rewriting the same pages instead
// of growing the file. Pool.Close closes every buffer still out. The
// pool never closes the medium it was given: its owner does.
//
// # Errors
//
// BufferPool has no error results: a GetBuffer that cannot make a buffer returns one whose
// every call fails with the cause, so the writer's first write reports it. An error closing a
// buffer's child in PutBuffer is kept and returned by Close.
package parquetpool

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/medium"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNotAppend is returned by a write at a position that is not the end of the buffer.
	ErrNotAppend = errors.New("parquetpool: write not at the end of an append-only buffer")
	// ErrReleased is returned by every call on a buffer after PutBuffer or Pool.Close.
	ErrReleased = errors.New("parquetpool: buffer released")
	// ErrClosed is the cause of the failing buffers GetBuffer returns after Pool.Close.
	ErrClosed = errors.New("parquetpool: pool closed")
)

// Pool is a parquet-go BufferPool (GetBuffer, PutBuffer) whose buffers are Bytes of a medium.
// It is safe for concurrent use; one buffer is used by one goroutine at a time.
type Pool struct {
	m medium.Medium

	mu     sync.Mutex
	out    map[*Buffer]struct{}
	errs   []error // failed closes of PutBuffer, returned by Close
	closed bool
}

// New returns a pool staging its buffers in m. Closing the pool does not close m.
func New(m medium.Medium) *Pool {
	return &Pool{m: m, out: make(map[*Buffer]struct{})}
}

// GetBuffer returns an empty buffer staged in a new child of the pool's medium. When the child
// or its Bytes cannot be made, or the pool is closed, the buffer fails every call with the cause.
func (p *Pool) GetBuffer() io.ReadWriteSeeker {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return &Buffer{err: fmt.Errorf("parquetpool: get buffer: %w", ErrClosed)}
	}
	child, err := p.m.NewChild()
	if err != nil {
		return &Buffer{err: fmt.Errorf("parquetpool: get buffer: %w", err)}
	}
	b, err := child.NewBytes()
	if err != nil {
		return &Buffer{err: multierr.Join(fmt.Errorf("parquetpool: get buffer: %w", err), child.Close())}
	}
	buf := &Buffer{pool: p, child: child, b: b}
	p.out[buf] = struct{}{}
	return buf
}

// PutBuffer releases a buffer GetBuffer returned: it closes the buffer's child medium. A buffer
// not from this pool, a failing buffer, or one already put is ignored.
func (p *Pool) PutBuffer(rws io.ReadWriteSeeker) {
	buf, ok := rws.(*Buffer)
	if !ok || buf.pool != p {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, out := p.out[buf]; !out {
		return
	}
	delete(p.out, buf)
	if err := buf.release(); err != nil {
		p.errs = append(p.errs, err)
	}
}

// Outstanding returns how many buffers are out (got and not put).
func (p *Pool) Outstanding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.out)
}

// Close releases every buffer still out and returns the first error of the releases, of this
// call or of earlier PutBuffer calls, with the others joined. Later GetBuffer calls return failing
// buffers. A second Close returns nil.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	errs := p.errs
	p.errs = nil
	for buf := range p.out {
		errs = append(errs, buf.release())
	}
	clear(p.out)
	return multierr.Join(errs...)
}

// Buffer is a pool buffer: an append-only medium.Bytes with a read/write position.
type Buffer struct {
	pool  *Pool
	child medium.Medium
	b     medium.Bytes // nil once released
	pos   int64
	err   error // a buffer GetBuffer could not make: every call fails with it
}

func (buf *Buffer) release() error {
	if buf.b == nil {
		return nil
	}
	buf.b = nil
	if err := buf.child.Close(); err != nil {
		return fmt.Errorf("parquetpool: release buffer: %w", err)
	}
	return nil
}

func (buf *Buffer) check(op string) error {
	if buf.err != nil {
		return buf.err
	}
	if buf.b == nil {
		return fmt.Errorf("parquetpool: %s: %w", op, ErrReleased)
	}
	return nil
}

func (buf *Buffer) checkAppend(op string) error {
	if err := buf.check(op); err != nil {
		return err
	}
	if size := buf.b.Size(); buf.pos != size {
		return fmt.Errorf("parquetpool: %s at %d, size %d: %w", op, buf.pos, size, ErrNotAppend)
	}
	return nil
}

// Size returns the bytes written to the buffer, 0 for a failing or released buffer.
func (buf *Buffer) Size() int64 {
	if buf.b == nil {
		return 0
	}
	return buf.b.Size()
}

// Write appends p; the position must be at the end (ErrNotAppend otherwise).
func (buf *Buffer) Write(p []byte) (int, error) {
	if err := buf.checkAppend("write"); err != nil {
		return 0, err
	}
	n, err := buf.b.Write(p)
	buf.pos += int64(n)
	return n, err
}

// ReadFrom appends everything read from r; the position must be at the end.
func (buf *Buffer) ReadFrom(r io.Reader) (int64, error) {
	if err := buf.checkAppend("read from"); err != nil {
		return 0, err
	}
	n, err := buf.b.ReadFrom(r)
	buf.pos += n
	return n, err
}

// Read reads from the position; at or past the end it returns 0, io.EOF.
func (buf *Buffer) Read(p []byte) (int, error) {
	if err := buf.check("read"); err != nil {
		return 0, err
	}
	if buf.pos >= buf.b.Size() {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := buf.b.ReadAt(p, buf.pos)
	buf.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// WriteTo writes the bytes from the position to the end into w and moves the position by the
// bytes written. From position 0 it is the Bytes' own WriteTo (a kernel copy from a tmpfile
// medium into an *os.File).
func (buf *Buffer) WriteTo(w io.Writer) (int64, error) {
	if err := buf.check("write to"); err != nil {
		return 0, err
	}
	size := buf.b.Size()
	if buf.pos >= size {
		return 0, nil
	}
	var n int64
	var err error
	if buf.pos == 0 {
		n, err = buf.b.WriteTo(w)
	} else {
		n, err = io.Copy(w, io.NewSectionReader(buf.b, buf.pos, size-buf.pos))
	}
	buf.pos += n
	return n, err
}

// Seek sets the position for the next Read, Write or WriteTo, like os.File.Seek: a position
// before 0 is an error wrapping medium.ErrInvalid; past the end is allowed (reads give io.EOF,
// writes ErrNotAppend).
func (buf *Buffer) Seek(offset int64, whence int) (int64, error) {
	if err := buf.check("seek"); err != nil {
		return 0, err
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = buf.pos
	case io.SeekEnd:
		base = buf.b.Size()
	default:
		return 0, fmt.Errorf("parquetpool: seek: whence %d: %w", whence, medium.ErrInvalid)
	}
	pos := base + offset
	if pos < 0 || (offset > 0 && pos < base) {
		return 0, fmt.Errorf("parquetpool: seek: offset %d from %d: %w", offset, base, medium.ErrInvalid)
	}
	buf.pos = pos
	return pos, nil
}
