package tmpfile

import (
	"fmt"
	"io"
	"os"
	"sort"
	"sync"

	"github.com/writeout/writeout/internal/backend"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// extent is a run of a Bytes' content in the file.
type extent struct {
	start int64 // logical offset in the Bytes
	off   int64 // offset in the file
	n     int64
}

// tmpBytes is a Bytes of a tmpfile medium: extents in the file, then a buffer.
type tmpBytes struct {
	m       *Medium
	st      *store
	extents []extent
	flushed int64  // bytes in extents
	buf     []byte // bytes flushed..size
	size    int64
	dropped int64 // DiscardPrefix gave back the bytes before it: reads there fail
	err     error // sticky first write error
	// discarded: Discard gave b's buffer and space back; every call but Size fails.
	discarded bool
}

var (
	_ medium.Bytes           = (*tmpBytes)(nil)
	_ medium.Discarder       = (*tmpBytes)(nil)
	_ medium.PrefixDiscarder = (*tmpBytes)(nil)
	_ io.WriterTo            = (*tmpBytes)(nil)
	_ io.ReaderFrom          = (*tmpBytes)(nil)
)

// backendIO names this backend in the errors of the ReadAt, ReadFrom and WriteTo steps every
// backend shares.
var backendIO = backend.IO{Name: "tmpfile", Invalid: medium.ErrInvalid}

// Pool of copy buffers for the buffered paths of WriteTo.
var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func (b *tmpBytes) Size() int64 { return b.size }

func (b *tmpBytes) check(op string) error {
	if b.m.lc.Closed() {
		return fmt.Errorf("tmpfile: %s: %w", op, medium.ErrClosed)
	}
	if b.discarded {
		return fmt.Errorf("tmpfile: %s: %w (discarded)", op, medium.ErrClosed)
	}
	return nil
}

// Discard gives back what b holds (medium.Discarder): its buffer to the store at once (kept
// for a later Bytes, or its memory returned to the budget), and its extents' space in the
// file, which later extents reuse before the file grows. On an OS file the space is first
// punched out (fallocate), on a goroutine of the store's, so that its pages leave the page
// cache now rather than when the medium closes: a publication that copies each part out and
// discards it writes the output into the pages the parts gave back, while the punching runs
// beside the copy. Where punching is unsupported or fails, the pages stay until the space is
// rewritten or the medium closes; nothing is lost.
func (b *tmpBytes) Discard() error {
	if b.discarded {
		return nil
	}
	if err := b.check("discard"); err != nil {
		return err
	}
	b.discarded = true
	b.st.putBuf(b.buf)
	b.buf = nil
	b.st.punch(b.extents)
	b.extents = nil
	return nil
}

// DiscardPrefix gives back the file space of b's bytes before n (medium.PrefixDiscarder): the
// part of each extent below n is punched out and freed as Discard does with all of them, on the
// store's punching goroutine, and reads before n fail from now on. Bytes of the buffer stay
// until Discard. A publication calls it every few MiB of a part it copies out: the pages it
// gives back are then taken by the output's next writes at once, while the machine still holds
// them (on a virtual machine that reports free memory to its host, pages left free for a second
// or two go back to the host, and the output's next writes fault in fresh ones, several times
// slower), and the part's dirty pages not written back yet are dropped before the kernel
// writes them.
func (b *tmpBytes) DiscardPrefix(n int64) error {
	if err := b.check("discard prefix"); err != nil {
		return err
	}
	if n < 0 || n > b.size {
		return fmt.Errorf("tmpfile: discard prefix of %d bytes, %d written: %w", n, b.size, medium.ErrInvalid)
	}
	if n <= b.dropped {
		return nil
	}
	b.dropped = n
	var gone []extent
	k := 0
	for ; k < len(b.extents); k++ {
		e := &b.extents[k]
		if e.start >= n {
			break
		}
		cut := min(e.n, n-e.start)
		gone = append(gone, extent{start: e.start, off: e.off, n: cut})
		if cut < e.n {
			e.start, e.off, e.n = e.start+cut, e.off+cut, e.n-cut
			break
		}
	}
	b.extents = b.extents[k:]
	b.st.punch(gone)
	return nil
}

// checkDropped fails a read from off of what DiscardPrefix gave back.
func (b *tmpBytes) checkDropped(op string, off int64) error {
	if off < b.dropped {
		return fmt.Errorf("tmpfile: %s at %d: %w (discarded before %d)", op, off, medium.ErrClosed, b.dropped)
	}
	return nil
}

func (b *tmpBytes) checkWrite() error {
	if err := b.check("write"); err != nil {
		return err
	}
	return b.err
}

// fail records the first write error; every later write returns it.
func (b *tmpBytes) fail(err error) error {
	if b.err == nil {
		b.err = err
	}
	return err
}

// makeRoom makes len(b.buf) < cap(b.buf): the first buffer, a larger one while the budget
// allows, or a flush to the file.
func (b *tmpBytes) makeRoom() error {
	if len(b.buf) < cap(b.buf) {
		return nil
	}
	opts := &b.st.opts
	if cap(b.buf) == 0 {
		if kept := b.st.takeBuf(); kept != nil {
			b.buf = kept // already counted in bufMem
			return nil
		}
		b.st.bufMem.Add(int64(opts.MinBufferSize))
		b.buf = make([]byte, 0, opts.MinBufferSize)
		return nil
	}
	if c := cap(b.buf); c < opts.BufferSize {
		if kept := b.st.takeBuf(); kept != nil {
			// A kept full-size buffer replaces this one, already counted in bufMem.
			kept = append(kept, b.buf...)
			b.st.bufMem.Add(-int64(c))
			b.buf = kept
			return nil
		}
		grow := int64(min(2*c, opts.BufferSize) - c)
		if b.st.bufMem.Add(grow) <= opts.BufferBudget {
			nb := make([]byte, len(b.buf), c+int(grow))
			copy(nb, b.buf)
			b.buf = nb
			return nil
		}
		b.st.bufMem.Add(-grow)
	}
	return b.flush()
}

// flush appends the buffer to the file as an extent.
func (b *tmpBytes) flush() error {
	if len(b.buf) == 0 {
		return nil
	}
	k, err := b.appendExtent(b.buf)
	// The first k bytes are in the file now, whatever happened to the rest.
	b.buf = b.buf[:copy(b.buf, b.buf[k:])]
	return err
}

// appendExtent writes p to the file, in as many pieces as the free space it reuses takes, and
// records them as the next extents; p must be the bytes at logical offset b.flushed. It returns
// how many bytes of p are recorded (all of them unless err is not nil).
func (b *tmpBytes) appendExtent(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		off, k, err := b.st.appendAt(p[done:])
		if err != nil {
			return done, err
		}
		n := int64(k)
		if i := len(b.extents); i > 0 && b.extents[i-1].off+b.extents[i-1].n == off {
			b.extents[i-1].n += n
		} else {
			b.extents = append(b.extents, extent{start: b.flushed, off: off, n: n})
		}
		b.flushed += n
		done += k
	}
	return done, nil
}

func (b *tmpBytes) Write(p []byte) (int, error) {
	if err := b.checkWrite(); err != nil {
		return 0, err
	}
	if len(p) <= cap(b.buf)-len(b.buf) {
		b.buf = append(b.buf, p...)
		b.size += int64(len(p))
		return len(p), nil
	}
	return b.writeSlow(p)
}

func (b *tmpBytes) writeSlow(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		// A write as large as the largest buffer goes to the file directly.
		if len(b.buf) == 0 && len(p) >= b.st.opts.BufferSize {
			k, err := b.appendExtent(p)
			b.size += int64(k)
			if err != nil {
				return n + k, b.fail(err)
			}
			return n + k, nil
		}
		if err := b.makeRoom(); err != nil {
			return n, b.fail(err)
		}
		k := copy(b.buf[len(b.buf):cap(b.buf)], p)
		b.buf = b.buf[:len(b.buf)+k]
		b.size += int64(k)
		n += k
		p = p[k:]
	}
	return n, nil
}

func (b *tmpBytes) WriteString(s string) (int, error) {
	if err := b.checkWrite(); err != nil {
		return 0, err
	}
	n := 0
	for len(s) > 0 {
		if err := b.makeRoom(); err != nil {
			return n, b.fail(err)
		}
		k := copy(b.buf[len(b.buf):cap(b.buf)], s)
		b.buf = b.buf[:len(b.buf)+k]
		b.size += int64(k)
		n += k
		s = s[k:]
	}
	return n, nil
}

func (b *tmpBytes) WriteByte(c byte) error {
	if err := b.checkWrite(); err != nil {
		return err
	}
	if len(b.buf) == cap(b.buf) {
		if err := b.makeRoom(); err != nil {
			return b.fail(err)
		}
	}
	b.buf = append(b.buf, c)
	b.size++
	return nil
}

// ReadFrom reads from r into the buffer, flushing as it fills, until io.EOF. Bytes read before
// an error of r stay appended and r's error is returned; a failure to write the file is sticky.
func (b *tmpBytes) ReadFrom(r io.Reader) (int64, error) {
	if err := b.checkWrite(); err != nil {
		return 0, err
	}
	var total int64
	for {
		if err := b.makeRoom(); err != nil {
			return total, b.fail(err)
		}
		k, done, err := backendIO.ReadSome(r, b.buf[len(b.buf):cap(b.buf)])
		b.buf = b.buf[:len(b.buf)+k]
		b.size += int64(k)
		total += int64(k)
		if done {
			return total, err
		}
	}
}

// WriteTo writes the extents and then the buffer to w. Into an *os.File it copies the
// extents in the kernel where it can; into an io.ReaderFrom, such as a bufio.Writer on a file,
// it hands over the file itself (readExtentsInto).
func (b *tmpBytes) WriteTo(w io.Writer) (int64, error) {
	if err := b.check("write to"); err != nil {
		return 0, err
	}
	if err := b.checkDropped("write to", 0); err != nil {
		return 0, err
	}
	var total int64
	if len(b.extents) > 0 {
		if err := b.st.beforeRead(); err != nil {
			return 0, err
		}
		var err error
		dst, isFile := w.(*os.File)
		rf, isReaderFrom := w.(io.ReaderFrom)
		switch {
		case b.st.osFile == nil:
			total, err = b.copyExtentsBuffered(w, 0)
		case isFile:
			total, err = b.copyExtentsKernel(dst)
		case isReaderFrom:
			total, err = b.readExtentsInto(rf)
		default:
			total, err = b.copyExtentsBuffered(w, 0)
		}
		if err != nil {
			return total, err
		}
	}
	if len(b.buf) > 0 {
		k, err := backendIO.WriteFull(w, b.buf)
		total += int64(k)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// copyExtentsKernel copies the extents with copy_file_range; if the kernel cannot copy between
// the two files it finishes with a buffered copy.
func (b *tmpBytes) copyExtentsKernel(dst *os.File) (int64, error) {
	var total int64
	for i, e := range b.extents {
		src := e.off
		for left := e.n; left > 0; {
			k, err := b.st.calls.CopyFileRange(dst, b.st.osFile, &src, int(min(left, 1<<30)))
			if err != nil && total == 0 && k == 0 && sys.CopyUnsupported(err) {
				return b.copyExtentsBuffered(dst, i)
			}
			total += int64(k)
			left -= int64(k)
			if err != nil {
				return total, fmt.Errorf("tmpfile: copy to %s: %w", dst.Name(), err)
			}
			if k == 0 {
				return total, fmt.Errorf("tmpfile: copy to %s: %w: file %s ended at %d", dst.Name(), io.ErrUnexpectedEOF, b.st.path, src)
			}
		}
	}
	return total, nil
}

// readExtentsInto hands each extent to w.ReadFrom as the medium's file, positioned at the
// extent and limited to it, so that a writer whose ReadFrom reaches an *os.File (a bufio.Writer
// or parquet-go's writer on a file) copies in the kernel, as os.File.ReadFrom does from a file
// (copy_file_range); any other ReadFrom reads the file. Only these copies use the file's
// position (every other read and write is pread or pwrite): posMu serializes them.
func (b *tmpBytes) readExtentsInto(w io.ReaderFrom) (int64, error) {
	st := b.st
	st.posMu.Lock()
	defer st.posMu.Unlock()
	var total int64
	for _, e := range b.extents {
		if _, err := st.osFile.Seek(e.off, io.SeekStart); err != nil {
			return total, fmt.Errorf("tmpfile: seek %s to %d: %w", st.path, e.off, err)
		}
		k, err := w.ReadFrom(&io.LimitedReader{R: st.osFile, N: e.n})
		total += k
		if err != nil {
			return total, fmt.Errorf("tmpfile: copy %d bytes at %d of %s: %w", e.n, e.off, st.path, err)
		}
		if k != e.n {
			return total, fmt.Errorf("tmpfile: copy %d bytes at %d of %s: %w: %d copied", e.n, e.off, st.path, io.ErrUnexpectedEOF, k)
		}
	}
	return total, nil
}

// copyExtentsBuffered copies the extents from index first on through a pooled buffer.
func (b *tmpBytes) copyExtentsBuffered(w io.Writer, first int) (int64, error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	var total int64
	for _, e := range b.extents[first:] {
		for pos := int64(0); pos < e.n; {
			p := buf[:min(int64(len(buf)), e.n-pos)]
			if err := b.st.readAt(p, e.off+pos); err != nil {
				return total, err
			}
			k, err := backendIO.WriteFull(w, p)
			total += int64(k)
			pos += int64(k)
			if err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

func (b *tmpBytes) ReadAt(p []byte, off int64) (int, error) {
	if err := b.check("read at"); err != nil {
		return 0, err
	}
	if done, err := backendIO.ReadAtBounds(p, off, b.size); done {
		return 0, err
	}
	if err := b.checkDropped("read", off); err != nil {
		return 0, err
	}
	n := 0
	if off < b.flushed {
		if err := b.st.beforeRead(); err != nil {
			return 0, err
		}
		i := sort.Search(len(b.extents), func(i int) bool { return b.extents[i].start > off }) - 1
		for ; i < len(b.extents) && n < len(p); i++ {
			e := b.extents[i]
			within := off + int64(n) - e.start
			q := p[n:min(int64(len(p)), int64(n)+e.n-within)]
			if err := b.st.readAt(q, e.off+within); err != nil {
				return n, err
			}
			n += len(q)
		}
	}
	if n < len(p) && off+int64(n) < b.size {
		n += copy(p[n:], b.buf[off+int64(n)-b.flushed:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// releaseBuf hands the buffer to the store, which keeps it for a later Bytes or returns its
// memory to the budget, and with freeSpace the extents' space in the file, for later extents.
func (b *tmpBytes) releaseBuf(freeSpace bool) {
	b.st.putBuf(b.buf)
	b.buf = nil
	if freeSpace {
		b.st.release(b.extents)
	}
	b.extents = nil
}
