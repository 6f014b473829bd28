package mmapfile

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/writeout/writeout/medium"
)

// bytesImpl is a Bytes of a Medium. Every extent but the last is full.
type bytesImpl struct {
	m          *Medium
	exts       []extent
	free       []byte // the prefilled, unwritten rest of the last extent
	filled     int    // bytes of the last extent prefilled so far
	size       int64
	nextRegion int64 // size of the next region asked for
	err        error // sticky: fails every later write
	syncErr    error // sticky: a failed pacing call fails every later call
}

var (
	_ medium.Bytes    = (*bytesImpl)(nil)
	_ io.WriterTo     = (*bytesImpl)(nil)
	_ io.ReaderFrom   = (*bytesImpl)(nil)
	_ io.StringWriter = (*bytesImpl)(nil)
	_ io.ReaderAt     = (*bytesImpl)(nil)
)

// Size returns the number of bytes written: a counter, no system call.
func (b *bytesImpl) Size() int64 { return b.size }

// writable returns the error that stops a write, if any.
func (b *bytesImpl) writable(op string) error {
	if b.m.lc.Closed() {
		return fmt.Errorf("mmapfile: %s: %w", op, medium.ErrClosed)
	}
	if b.err != nil {
		return b.err
	}
	return b.m.failure()
}

// readable returns the error that stops a read, if any.
func (b *bytesImpl) readable(op string) error {
	if b.m.lc.Closed() {
		return fmt.Errorf("mmapfile: %s: %w", op, medium.ErrClosed)
	}
	if b.syncErr != nil {
		return b.syncErr
	}
	return b.m.failure()
}

// grow makes room for at least one more byte: it prefills the next chunk of the last extent, or
// adds a region sized for a pending write of hint bytes and prefills its first chunk. A failure
// is sticky.
func (b *bytesImpl) grow(hint int) error {
	if k := len(b.exts); k > 0 && b.filled < len(b.exts[k-1].mem) {
		return b.fill()
	}
	page := b.m.page
	want := max(b.nextRegion, (int64(hint)+page-1)/page*page)
	want = min(want, b.m.maxRg)
	e, err := b.m.alloc(want)
	if err != nil {
		if errors.Is(err, medium.ErrClosed) {
			return fmt.Errorf("mmapfile: write: %w", err)
		}
		b.err = err
		return err
	}
	e.start = b.size
	b.exts = append(b.exts, e)
	b.free, b.filled = nil, 0
	b.nextRegion = min(2*want, b.m.maxRg)
	return b.fill()
}

// fill prefills the next chunk of the last extent, which becomes writable, and counts it for
// pacing (which may run a step). A failure is sticky.
func (b *bytesImpl) fill() error {
	e := &b.exts[len(b.exts)-1]
	k := min(prefillChunk, len(e.mem)-b.filled)
	off := e.fileOff() + int64(b.filled)
	if err := b.m.prefill(off, k); err != nil {
		b.err = err
		return err
	}
	b.free = e.mem[b.filled : b.filled+k]
	b.filled += k
	if err := b.m.prefilled(off+int64(k), k); err != nil {
		return b.failSync(err)
	}
	return nil
}

// Write appends p. When the file has no room for all of it, the bytes that fit are kept, the
// error (wrapping ENOSPC) is returned and every later write returns it too.
func (b *bytesImpl) Write(p []byte) (int, error) {
	if err := b.writable("write"); err != nil {
		return 0, err
	}
	n := 0
	for n < len(p) {
		if len(b.free) == 0 {
			if err := b.grow(len(p) - n); err != nil {
				return n, err
			}
		}
		k := copy(b.free, p[n:])
		b.free = b.free[k:]
		b.size += int64(k)
		n += k
	}
	return n, nil
}

// WriteString appends s, like Write.
func (b *bytesImpl) WriteString(s string) (int, error) {
	if err := b.writable("write"); err != nil {
		return 0, err
	}
	n := 0
	for n < len(s) {
		if len(b.free) == 0 {
			if err := b.grow(len(s) - n); err != nil {
				return n, err
			}
		}
		k := copy(b.free, s[n:])
		b.free = b.free[k:]
		b.size += int64(k)
		n += k
	}
	return n, nil
}

// WriteByte appends c.
func (b *bytesImpl) WriteByte(c byte) error {
	if err := b.writable("write"); err != nil {
		return err
	}
	if len(b.free) == 0 {
		if err := b.grow(1); err != nil {
			return err
		}
	}
	b.free[0] = c
	b.free = b.free[1:]
	b.size++
	return nil
}

// ReadFrom reads from r straight into the mapping until io.EOF. Bytes read before an error stay
// appended; the reader's error is returned (io.EOF is not) and leaves the Bytes usable.
func (b *bytesImpl) ReadFrom(r io.Reader) (int64, error) {
	if err := b.writable("read from"); err != nil {
		return 0, err
	}
	var total int64
	for {
		if len(b.free) == 0 {
			if err := b.grow(0); err != nil {
				return total, err
			}
		}
		k, done, err := backendIO.ReadSome(r, b.free)
		b.free = b.free[k:]
		b.size += int64(k)
		total += int64(k)
		if done {
			return total, err
		}
	}
}

// used returns how many bytes of extent i hold data.
func (b *bytesImpl) used(i int) int {
	if i == len(b.exts)-1 {
		return b.filled - len(b.free)
	}
	return len(b.exts[i].mem)
}

// failSync makes a failed pacing call sticky: it is never retried and every later call returns it.
func (b *bytesImpl) failSync(err error) error {
	b.syncErr = err
	b.err = err
	return err
}

// copyChunk is the size of WriteTo's buffer: the most it passes to one Write call.
const copyChunk = 256 << 10

// copyBufs holds WriteTo's buffers (*[]byte of copyChunk bytes).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyChunk); return &b }}

// WriteTo writes every byte written so far to w, copied out of the mapping into a pooled buffer,
// at most copyChunk bytes a Write call (see the package doc for why not straight from the
// mapping). A failing w fails this call only.
func (b *bytesImpl) WriteTo(w io.Writer) (int64, error) {
	if err := b.readable("write to"); err != nil {
		return 0, err
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var total int64
	for i := range b.exts {
		for c := b.exts[i].mem[:b.used(i)]; len(c) > 0; {
			n := copy(buf, c)
			c = c[n:]
			k, err := backendIO.WriteFull(w, buf[:n])
			total += int64(k)
			if err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// ReadAt copies bytes written so far, from offset off, out of the mapping. Fewer than len(p)
// bytes come with io.EOF.
func (b *bytesImpl) ReadAt(p []byte, off int64) (int, error) {
	if err := b.readable("read at"); err != nil {
		return 0, err
	}
	if done, err := backendIO.ReadAtBounds(p, off, b.size); done {
		return 0, err
	}
	i := sort.Search(len(b.exts), func(i int) bool { return b.exts[i].start > off }) - 1
	n := 0
	for ; i < len(b.exts) && n < len(p); i++ {
		within := off + int64(n) - b.exts[i].start
		n += copy(p[n:], b.exts[i].mem[within:b.used(i)])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
