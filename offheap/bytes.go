package offheap

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"sort"

	"github.com/writeout/writeout/internal/backend"
	"github.com/writeout/writeout/medium"
)

// offBytes is a Bytes of an offheap medium: full segments, then the tail segment being written,
// all inside the medium's chunks (the head), then, once a budget refused a chunk, a Bytes of the
// spill medium (the tail of the content).
type offBytes struct {
	m         *Medium
	segs      [][]byte // full segments; len is what was written in each
	starts    []int64  // starts[i] is the offset of segs[i][0]
	tail      []byte   // the segment being written: len written, cap its capacity
	tailStart int64    // offset of tail[0]; tailStart+len(tail) is the size of the head
	size      int64    // the head plus the spilled bytes
	spill     medium.Bytes
	err       error // sticky first write error
}

// The fast paths of the write methods copy into the tail's spare capacity without looking at
// the sticky error or the spill Bytes: fail and the switch to spill take that capacity away.
// Empty writes take the slow path, so that they too return the sticky error.

var (
	_ medium.Bytes    = (*offBytes)(nil)
	_ io.WriterTo     = (*offBytes)(nil)
	_ io.ReaderFrom   = (*offBytes)(nil)
	_ io.StringWriter = (*offBytes)(nil)
	_ io.ByteWriter   = (*offBytes)(nil)
)

func (b *offBytes) Size() int64 { return b.size }

// headSize returns the bytes staged in memory.
func (b *offBytes) headSize() int64 { return b.tailStart + int64(len(b.tail)) }

// closeTail takes the tail's spare capacity away, so that no fast path writes there again.
func (b *offBytes) closeTail() { b.tail = b.tail[:len(b.tail):len(b.tail)] }

// drop forgets every slice into the medium's chunks; the medium is closing.
func (b *offBytes) drop() {
	b.segs, b.starts, b.tail, b.spill = nil, nil, nil, nil
}

// backendIO names this backend in the errors of the ReadAt, ReadFrom and WriteTo steps every
// backend shares.
var backendIO = backend.IO{Name: "offheap", Invalid: medium.ErrInvalid}

func closedErr(op string) error { return fmt.Errorf("offheap: %s: %w", op, medium.ErrClosed) }

func (b *offBytes) Write(p []byte) (int, error) {
	if b.m.lc.Closed() {
		return 0, closedErr("write")
	}
	if n := len(b.tail); uint(len(p)-1) < uint(cap(b.tail)-n) { // 0 < len(p) <= room
		b.tail = b.tail[:n+len(p)]
		copy(b.tail[n:], p)
		b.size += int64(len(p))
		return len(p), nil
	}
	return write(b, p)
}

func (b *offBytes) WriteString(s string) (int, error) {
	if b.m.lc.Closed() {
		return 0, closedErr("write")
	}
	if n := len(b.tail); uint(len(s)-1) < uint(cap(b.tail)-n) { // 0 < len(s) <= room
		b.tail = b.tail[:n+len(s)]
		copy(b.tail[n:], s)
		b.size += int64(len(s))
		return len(s), nil
	}
	return write(b, s)
}

func (b *offBytes) WriteByte(c byte) error {
	if b.m.lc.Closed() {
		return closedErr("write")
	}
	if len(b.tail) < cap(b.tail) {
		b.tail = append(b.tail, c)
		b.size++
		return nil
	}
	_, err := write(b, []byte{c})
	return err
}

// write is the slow path of Write and WriteString: it fills the tail, takes new segments,
// spills, and records a sticky error.
func write[S string | []byte](b *offBytes, p S) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n := 0
	for len(p) > 0 {
		if b.spill != nil {
			var k int
			var err error
			switch v := any(p).(type) {
			case string:
				k, err = b.spill.WriteString(v)
			case []byte:
				k, err = b.spill.Write(v)
			}
			b.size += int64(k)
			n += k
			if err == nil && k < len(p) {
				err = io.ErrShortWrite
			}
			if err != nil {
				return n, b.fail(fmt.Errorf("offheap: write to the spill medium: %w", err))
			}
			return n, nil
		}
		if len(b.tail) == cap(b.tail) {
			if err := b.grow(len(p)); err != nil {
				return n, b.fail(err)
			}
			continue
		}
		k := copy(b.tail[len(b.tail):cap(b.tail)], p)
		b.tail = b.tail[:len(b.tail)+k]
		b.size += int64(k)
		n += k
		p = p[k:]
	}
	return n, nil
}

func (b *offBytes) fail(err error) error {
	if b.err == nil {
		b.err = err
		b.closeTail()
	}
	return b.err
}

// grow makes room for more bytes: a larger or new tail segment (hint bytes are waiting; 0 if
// unknown) or, when a budget refuses a chunk and there is a spill medium, a spill Bytes. The
// current tail is full.
func (b *offBytes) grow(hint int) error {
	want := max(2*cap(b.tail), minSegment)
	if h := min(hint, maxSegment); h > want {
		want = 1 << bits.Len(uint(h-1)) // the next power of two
	}
	seg, extended, err := b.m.segment(b, min(want, maxSegment))
	if err != nil {
		if errors.Is(err, medium.ErrClosed) {
			return closedErr("write")
		}
		if !errors.Is(err, ErrBudget) {
			return err
		}
		if b.m.spill == nil {
			return fmt.Errorf("%w (writing at offset %d, no spill medium)", err, b.size)
		}
		sp, serr := b.m.spillBytes()
		if serr != nil {
			return serr
		}
		b.spill = sp
		b.closeTail()
		return nil
	}
	if extended {
		b.tail = seg
		return nil
	}
	if len(b.tail) > 0 {
		b.segs = append(b.segs, b.tail)
		b.starts = append(b.starts, b.tailStart)
	}
	b.tailStart += int64(len(b.tail))
	b.tail = seg
	return nil
}

// ReadFrom reads from r straight into the segments (then into the spill Bytes) until io.EOF.
// Bytes read before an error stay appended; the error is returned (io.EOF is not). A failure of
// r is not sticky; a budget or spill failure is.
func (b *offBytes) ReadFrom(r io.Reader) (int64, error) {
	if b.m.lc.Closed() {
		return 0, closedErr("read from")
	}
	if b.err != nil {
		return 0, b.err
	}
	var total int64
	for {
		if b.spill != nil {
			k, err := b.spill.ReadFrom(r)
			b.size += k
			return total + k, err
		}
		if len(b.tail) == cap(b.tail) {
			if err := b.grow(0); err != nil {
				return total, b.fail(err)
			}
			continue
		}
		k, done, err := backendIO.ReadSome(r, b.tail[len(b.tail):cap(b.tail)])
		b.tail = b.tail[:len(b.tail)+k]
		b.size += int64(k)
		total += int64(k)
		if done {
			return total, err
		}
	}
}

// WriteTo writes the head segment by segment (with writev into an *os.File), then the spilled
// tail through the spill Bytes' WriteTo.
func (b *offBytes) WriteTo(w io.Writer) (int64, error) {
	if b.m.lc.Closed() {
		return 0, closedErr("write to")
	}
	var total int64
	head := b.headSize()
	if f, ok := w.(*os.File); ok && head > 0 {
		bufs := make([][]byte, 0, len(b.segs)+1)
		bufs = append(bufs, b.segs...)
		bufs = append(bufs, b.tail)
		k, err := b.m.writev(f, bufs)
		total += k
		if err == nil && k != head {
			err = io.ErrShortWrite
		}
		if err != nil {
			return total, err
		}
	} else {
		for i := 0; i <= len(b.segs); i++ {
			c := b.tail
			if i < len(b.segs) {
				c = b.segs[i]
			}
			if len(c) == 0 {
				continue
			}
			k, err := backendIO.WriteFull(w, c)
			total += int64(k)
			if err != nil {
				return total, err
			}
		}
	}
	if b.spill != nil {
		k, err := b.spill.WriteTo(w)
		total += k
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (b *offBytes) ReadAt(p []byte, off int64) (int, error) {
	if b.m.lc.Closed() {
		return 0, closedErr("read at")
	}
	if done, err := backendIO.ReadAtBounds(p, off, b.size); done {
		return 0, err
	}
	n := 0
	head := b.headSize()
	if off < head {
		n = b.readHead(p, off)
	}
	if n < len(p) && b.spill != nil {
		k, err := b.spill.ReadAt(p[n:], off+int64(n)-head)
		n += k
		if err != nil && err != io.EOF {
			return n, err
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readHead copies from the head at off (< head) into p and returns the count.
func (b *offBytes) readHead(p []byte, off int64) int {
	n := 0
	if off < b.tailStart {
		i := sort.Search(len(b.starts), func(i int) bool { return b.starts[i] > off }) - 1
		for ; i < len(b.segs) && n < len(p); i++ {
			within := off + int64(n) - b.starts[i]
			n += copy(p[n:], b.segs[i][within:])
		}
	}
	if n < len(p) {
		if within := off + int64(n) - b.tailStart; within < int64(len(b.tail)) {
			n += copy(p[n:], b.tail[within:])
		}
	}
	return n
}
