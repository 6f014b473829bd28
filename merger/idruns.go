package merger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"sync"
	"unsafe"

	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/internal/slicesx"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/scratch"
)

// The id logs' runs (see idlog.go): the memory their sorts borrow, and how the bitmaps phase
// reads them back.

// runSorts lends the logs of a merge the memory of a run's sort (2 or 4 bytes a row of the run),
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
		segs  []runSeg
	}
	var stretches []stretch
	for i := range readers {
		rr := &readers[i]
		off, count, err := rr.skip(id)
		if err != nil {
			return fmt.Errorf("id log: run %d: %w", i, err)
		}
		if count > 0 {
			stretches = append(stretches, stretch{rr.run.rows, off, count, slices.Clone(rr.segs)})
		}
	}
	err := dw.WriteBitmapPieces(uint32(id), func(fn func(rows []uint32) error) error {
		for i, s := range stretches {
			for k := 0; k < s.count; {
				piece := buf[:min(len(buf), s.count-k)]
				if err := readFull(s.b, slicesx.AsBytes(lowsOf(piece)), s.off+2*int64(k)); err != nil {
					return fmt.Errorf("id log: run %d: %w", i, err)
				}
				if err := expandLows(piece, s.segs, k); err != nil {
					return err
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

// runSeg is the rows of an id in one block of a run: n rows, each base plus its low bits.
type runSeg struct{ base, n uint32 }

// lowsOf returns the upper half of dst's memory, as uint16s: where a run's low bits of
// len(dst) rows are read before expandLows makes them rows in dst.
func lowsOf(dst []uint32) []uint16 { return asUint16s(dst)[len(dst):] }

// asUint16s returns s's memory as uint16s (twice as many).
func asUint16s(s []uint32) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s))
}

// expandLows makes the low bits lowsOf(dst) holds rows, in place: the rows of segs past
// their first from rows. segs must hold from+len(dst) rows at least (runReader.next checks
// that an id's blocks hold its rows). (Not inlined: inlined into its callers, its loop's index
// lived on the stack, 0.72 ns a row of 13-row blocks against 0.49.)
//
//go:noinline
func expandLows(dst []uint32, segs []runSeg, from int) error {
	lows := lowsOf(dst)
	// dst[i] takes the uint16s 2i and 2i+1 of the memory, lows[j] is uint16 len(dst)+j:
	// every low bits is read before a row is written over it (2i+1 < len(dst)+j for j > i).
	i := 0
	for _, s := range segs {
		if i == len(dst) {
			break
		}
		if from >= int(s.n) {
			from -= int(s.n)
			continue
		}
		k := min(int(s.n)-from, len(dst)-i)
		d, l := dst[i:i+k], lows[i:i+k]
		l = l[:len(d)]
		for j := range d {
			d[j] = s.base + uint32(l[j])
		}
		i, from = i+k, 0
	}
	if i < len(dst) {
		return fmt.Errorf("merger: internal error: %d rows past an id's blocks", len(dst)-i)
	}
	return nil
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
	id, count       int      // the id read last (0 before the first), and its rows not read yet
	segs            []runSeg // the id's rows by block
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
		dst := rows[p : int(p)+rr.count]
		if err := rr.rows.read(slicesx.AsBytes(lowsOf(dst))); err != nil {
			return err
		}
		if err := expandLows(dst, rr.segs, 0); err != nil {
			return err
		}
		pos[rr.id] += uint32(rr.count)
		rr.count = 0
	}
	return nil
}

// next reads the run's next id, its count and its blocks, unless the rows of the one read
// last are not read yet; it sets done at the run's end.
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
	if c == 0 || c > uint64(rr.run.n) {
		return fmt.Errorf("merger: internal error: an id of %d rows in a run of %d", c, rr.run.n)
	}
	rr.id += int(d)
	rr.count = int(c)
	rr.segs = rr.segs[:0]
	if nb := rr.run.blocks(); nb <= 1 {
		rr.segs = append(rr.segs, runSeg{base: rr.run.first, n: uint32(c)})
	} else {
		mask, err := rr.ids.uvarint()
		if err != nil {
			return err
		}
		if mask == 0 || mask>>nb != 0 {
			return fmt.Errorf("merger: internal error: blocks %#x of a run of %d", mask, nb)
		}
		left := uint32(c)
		for m := mask; m != 0; m &= m - 1 {
			n := uint64(left)
			if m&(m-1) != 0 {
				if n, err = rr.ids.uvarint(); err != nil {
					return err
				}
			}
			if n == 0 || n > uint64(left) || n > blockRows {
				return fmt.Errorf("merger: internal error: a block of %d of an id's %d rows", n, c)
			}
			b := uint32(bits.TrailingZeros64(m))
			rr.segs = append(rr.segs, runSeg{base: rr.run.first + b*blockRows, n: uint32(n)})
			left -= uint32(n)
		}
		if left != 0 {
			return fmt.Errorf("merger: internal error: an id's blocks hold %d of its %d rows", uint32(c)-left, c)
		}
	}
	return nil
}

// skip moves the reader past the rows of id, which no id before it may have left unread,
// and returns where they lie in the run's rows and how many there are (none: 0); rr.segs
// holds their blocks until the next call.
func (rr *runReader) skip(id int) (off int64, count int, err error) {
	if err := rr.next(); err != nil || rr.done || rr.id != id {
		return 0, 0, err
	}
	off, count = rr.rows.pos(), rr.count
	rr.rows.skip(2 * int64(count))
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
