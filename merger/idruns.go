package merger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/internal/slicesx"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/scratch"
)

// The id logs' runs (see idlog.go): the memory their sorts borrow, and how the bitmaps phase
// reads them back.

// runSorts lends the logs of a merge the memory of a run's sort (4 bytes a row of the run),
// which a log needs only while it writes a run: the logs share one a goroutine writing runs
// at once, rather than hold one each (six dimensions of 1-byte ids held 24 MiB of sorts for 6
// MiB of ids). Its methods are safe for concurrent use; close frees what it keeps.
type runSorts struct {
	mu   sync.Mutex
	free []scratch.Array[uint32]
}

// get returns an array of at least n elements.
func (p *runSorts) get(n int) (scratch.Array[uint32], error) {
	p.mu.Lock()
	var a scratch.Array[uint32]
	if k := len(p.free) - 1; k >= 0 {
		a, p.free = p.free[k], p.free[:k]
	}
	p.mu.Unlock()
	if len(a.S) >= n {
		return a, nil
	}
	// Too small: to the system, not the scratch pool, whose mappings stay resident, where no
	// later array of the merge would take it (the sorts only grow).
	err := a.FreeToSystem()
	return scratch.New[uint32](n), err
}

// put takes back an array get returned.
func (p *runSorts) put(a scratch.Array[uint32]) {
	p.mu.Lock()
	p.free = append(p.free, a)
	p.mu.Unlock()
}

func (p *runSorts) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	for _, a := range p.free {
		err = errors.Join(err, a.Free())
	}
	p.free = nil
	return err
}

// writeLargeID writes the bitmap of id, the next id of every reader, from the stretch of rows
// each run holds for it, read buf's length at a time (colwrite.DimWriter.WriteBitmapPieces),
// and moves the readers past it.
func writeLargeID(dw colwrite.DimWriter, id int, readers []runReader, buf []uint32) error {
	type stretch struct {
		b     medium.Bytes
		off   int64
		count int
	}
	var stretches []stretch
	for i := range readers {
		rr := &readers[i]
		off, count, err := rr.skip(id)
		if err != nil {
			return fmt.Errorf("id log: run %d: %w", i, err)
		}
		if count > 0 {
			stretches = append(stretches, stretch{rr.run.rows, off, count})
		}
	}
	err := dw.WriteBitmapPieces(uint32(id), func(fn func(rows []uint32) error) error {
		for i, s := range stretches {
			for k := 0; k < s.count; {
				piece := buf[:min(len(buf), s.count-k)]
				if err := readFull(s.b, slicesx.AsBytes(piece), s.off+4*int64(k)); err != nil {
					return fmt.Errorf("id log: run %d: %w", i, err)
				}
				if err := fn(piece); err != nil {
					return err
				}
				k += len(piece)
			}
		}
		return nil
	})
	return err
}

// runIDsBuf is the buffer a run's ids are read through.
const runIDsBuf = 1 << 10

// runReader reads a run on, sequentially: its ids and counts, and their rows.
type runReader struct {
	run logRun
	// rowsBuf and idsBuf are the memory (empty, of their capacity) the rows and the ids are
	// read through.
	rowsBuf, idsBuf []byte
	ids             chunkReader
	rows            chunkReader
	id, count       int // the id read last (0 before the first), and its rows not read yet
	done            bool
}

// gather reads the run's ids below hi and puts each one's rows at pos[id] of rows, advancing
// pos. The ids before must have been gathered.
func (rr *runReader) gather(hi int, rows, pos []uint32) error {
	for {
		if err := rr.next(); err != nil || rr.done {
			return err
		}
		if rr.id >= hi {
			break
		}
		p := pos[rr.id]
		if err := rr.rows.read(slicesx.AsBytes(rows[p : int(p)+rr.count])); err != nil {
			return err
		}
		pos[rr.id] += uint32(rr.count)
		rr.count = 0
	}
	return nil
}

// next reads the run's next id and its count, unless the rows of the one read last are not
// read yet; it sets done at the run's end.
func (rr *runReader) next() error {
	if rr.ids.b == nil {
		// A merge of 300 M rows reads 300 runs a dimension at once: runReadBytes in all.
		rr.ids = chunkReader{b: rr.run.ids, off: rr.run.idsOff, end: rr.run.idsEnd, buf: rr.idsBuf}
		rr.rows = chunkReader{b: rr.run.rows, off: rr.run.rowsOff, end: rr.run.rowsEnd, buf: rr.rowsBuf}
	}
	if rr.count > 0 || rr.done {
		return nil
	}
	d, err := rr.ids.uvarint()
	if err == io.EOF {
		rr.done = true
		return nil
	}
	c, err2 := rr.ids.uvarint()
	if err = errors.Join(err, err2); err != nil {
		return err
	}
	rr.id += int(d)
	rr.count = int(c)
	return nil
}

// skip moves the reader past the rows of id, which no id before it may have left unread,
// and returns where they lie in the run's rows and how many there are (none: 0).
func (rr *runReader) skip(id int) (off int64, count int, err error) {
	if err := rr.next(); err != nil || rr.done || rr.id != id {
		return 0, 0, err
	}
	off, count = rr.rows.pos(), rr.count
	rr.rows.skip(4 * int64(count))
	rr.count = 0
	return off, count, nil
}

// chunkReader reads [off, end) of a medium.Bytes on, through a buffer.
type chunkReader struct {
	b   medium.Bytes
	off int64  // where the bytes read into buf so far end
	end int64  // where b's bytes to read end
	buf []byte // buf[p:] is read and not consumed
	p   int
}

// fill reads more of b into buf, keeping what is not consumed; io.EOF at b's end.
func (c *chunkReader) fill() error {
	if c.off >= c.end {
		return io.EOF
	}
	n := copy(c.buf[:cap(c.buf)], c.buf[c.p:])
	k := int(min(int64(cap(c.buf)-n), c.end-c.off))
	if err := readFull(c.b, c.buf[n:n+k], c.off); err != nil {
		return err
	}
	c.buf, c.p, c.off = c.buf[:n+k], 0, c.off+int64(k)
	return nil
}

// pos returns where in b the next byte read lies.
func (c *chunkReader) pos() int64 { return c.off - int64(len(c.buf)-c.p) }

// skip moves past the next n bytes.
func (c *chunkReader) skip(n int64) {
	k := min(n, int64(len(c.buf)-c.p))
	c.p += int(k)
	c.off += n - k
}

// uvarint reads a uvarint; io.EOF when b is read whole.
func (c *chunkReader) uvarint() (uint64, error) {
	if len(c.buf)-c.p < binary.MaxVarintLen64 {
		if err := c.fill(); err != nil && (err != io.EOF || c.p == len(c.buf)) {
			return 0, err
		}
	}
	v, k := binary.Uvarint(c.buf[c.p:])
	if k <= 0 {
		return 0, fmt.Errorf("merger: internal error: a bad uvarint at byte %d", c.off-int64(len(c.buf)-c.p))
	}
	c.p += k
	return v, nil
}

// read fills dst with the next bytes.
func (c *chunkReader) read(dst []byte) error {
	n := copy(dst, c.buf[c.p:])
	c.p += n
	dst = dst[n:]
	if len(dst) >= cap(c.buf) {
		// Straight into dst: a large read costs no copy.
		if c.off+int64(len(dst)) > c.end {
			return io.ErrUnexpectedEOF
		}
		if err := readFull(c.b, dst, c.off); err != nil {
			return err
		}
		c.off += int64(len(dst))
		return nil
	}
	for len(dst) > 0 {
		if err := c.fill(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		n := copy(dst, c.buf[c.p:])
		c.p += n
		dst = dst[n:]
	}
	return nil
}

// readFull reads len(p) bytes of b at off.
func readFull(b medium.Bytes, p []byte, off int64) error {
	n, err := b.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}
