package columns

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Derived ids (segfmt.EncIDChunksDerived, doc.go "Version 6 encodings"): a single-value
// dimension's bitmaps partition its rows, so they alone say each row's id. Under zstd the
// writer stores no ids for such a dimension of at most derivedMaxCard values, and a reader
// rebuilds a chunk's ids from the bitmaps: one bitmap cursor per id, each handing out its rows
// of the chunk and keeping its place for the next chunk, so that reading the column front to
// back decodes every bitmap once.

// derivedMaxCard bounds the cardinality of a dimension whose ids the writer leaves to be
// derived: a reader keeps a cursor per id (a few hundred bytes, twice spanWindow more for a
// segment that is not mapped) and visits each once a chunk.
const derivedMaxCard = 1024

// deriveIDs reports whether the writer derives the ids of dimension d of card values: under
// zstd (planes), single-value, with a bitmap index, and at least two values (one value has no
// ids to store).
func deriveIDs(d Dimension, card int, zstd bool) bool {
	return zstd && !d.MultiValue && !d.NoBitmapIndex && !d.Raw && card >= 2 && card <= derivedMaxCard
}

// unsetID marks a row of a derived chunk no bitmap has claimed yet: never an id (a dictionary
// holds fewer than 2^32-1 values).
const unsetID = ^uint32(0)

// spanWindow is how many bytes of a span a spanReader reads at a time from a segment that is
// not mapped.
const spanWindow = 256

// spanReader reads a span of a segment's bytes front to back. Over a mapped segment buf is
// the whole span; otherwise it is a window of at most spanWindow bytes, read again as the
// reader goes on.
type spanReader struct {
	src *source
	at  int64 // the file offset of buf[0]
	end int64 // the file offset where the span ends
	buf []byte
	pos int    // the next byte in buf
	own []byte // the buffer the windows of a segment that is not mapped are read into
}

// reset points the reader at the n bytes at file offset off.
func (r *spanReader) reset(src *source, off, n int64) error {
	r.src, r.pos, r.at, r.end = src, 0, off, off+n
	if src.data != nil {
		b, err := src.view(off, n, nil)
		if err != nil {
			return err
		}
		r.buf = b
		return nil
	}
	if off < 0 || n < 0 || off > src.size || n > src.size-off {
		return corruptf("range [%d, %d+%d) outside the file of %d bytes", off, off, n, src.size)
	}
	r.buf = r.own[:0]
	return nil
}

// left returns how many bytes of the span are not consumed yet.
func (r *spanReader) left() int64 { return r.end - r.at - int64(r.pos) }

// peek returns the next k bytes (k at most spanWindow) without consuming them; fewer than k
// left is an error wrapping ErrCorrupt.
func (r *spanReader) peek(k int) ([]byte, error) {
	if r.pos+k <= len(r.buf) {
		return r.buf[r.pos : r.pos+k], nil
	}
	if int64(k) > r.left() {
		return nil, corruptf("truncated: %d bytes wanted, %d left", k, r.left())
	}
	if err := r.refill(); err != nil {
		return nil, err
	}
	return r.buf[:k], nil
}

// take consumes and returns the next min(k, left) bytes, k at most spanWindow.
func (r *spanReader) take(k int) ([]byte, error) {
	k = int(min(int64(k), r.left()))
	b, err := r.peek(k)
	if err != nil {
		return nil, err
	}
	r.pos += k
	return b, nil
}

// skip consumes k bytes without reading them.
func (r *spanReader) skip(k int64) error {
	if k < 0 || k > r.left() {
		return corruptf("truncated: %d bytes to skip, %d left", k, r.left())
	}
	if int64(len(r.buf)-r.pos) >= k {
		r.pos += int(k)
		return nil
	}
	r.at += int64(r.pos) + k
	r.buf, r.pos = r.buf[:0], 0
	return nil
}

// refill reads the next window of a segment that is not mapped from the current position.
func (r *spanReader) refill() error {
	r.at += int64(r.pos)
	r.pos = 0
	n := min(int64(spanWindow), r.end-r.at)
	if cap(r.own) < spanWindow {
		r.own = make([]byte, spanWindow)
	}
	b, err := r.src.view(r.at, n, r.own[:n])
	if err != nil {
		return err
	}
	r.buf = b
	return nil
}

// The kinds of bitmap cursor.
const (
	bmEmpty uint8 = iota
	bmEF
	bmRoaring
)

// The kinds of roaring container (ctNone: between containers).
const (
	ctNone uint8 = iota
	ctArray
	ctBitmap
	ctRun
)

// bmCursor hands out the rows of one stored bitmap (empty, Elias-Fano or roaring), chunk after
// chunk: fill writes its id into a chunk's ids for each of its rows in the chunk and stops at
// the first row past it, where the next fill goes on. It checks what keeps its reads in bounds
// and its rows right: rows strictly increasing, each in one bitmap only (the chunk's slot
// still unset), the counts the bitmap states.
type bmCursor struct {
	kind uint8
	a, b spanReader // Elias-Fano: the lows and the highs; roaring: the headers and the containers
	prev int64      // the last row handed out, -1 before the first
	// Elias-Fano
	n, i  int
	l     uint
	word  uint64 // highs bits not consumed yet, of the word whose bit 0 is bit wbase
	wbase int64
	acc   uint64 // lows not consumed yet, nacc bits of them
	nacc  uint
	// roaring
	runFlags []byte
	size, ci int   // containers, and the next one's index
	prevKey  int   // the last container's key, -1 before the first
	base     int64 // the current container's first possible row
	ctype    uint8
	left     int   // values (array), words (bitmap) or runs (run) of the current container left
	runV     int64 // run: the next row of the current run, and where the run ends
	runEnd   int64
}

// open points the cursor at the stored bitmap in the n bytes at file offset off (a version 4
// form when v4).
func (c *bmCursor) open(src *source, off, n int64, v4 bool) error {
	c.prev, c.word, c.wbase, c.acc, c.nacc, c.i, c.ci, c.ctype, c.prevKey = -1, 0, -64, 0, 0, 0, 0, ctNone, -1
	if v4 && n == 0 {
		c.kind = bmEmpty
		return nil
	}
	if err := c.a.reset(src, off, n); err != nil {
		return err
	}
	first, err := c.a.peek(1)
	if err != nil {
		return err
	}
	if v4 && first[0] == efTag {
		return c.openEF(src, off, n)
	}
	return c.openRoaring(src, off, n)
}

func (c *bmCursor) openEF(src *source, off, n int64) error {
	c.kind = bmEF
	h, err := c.a.peek(int(min(n, 1+binary.MaxVarintLen64+1)))
	if err != nil {
		return err
	}
	cnt, k := binary.Uvarint(h[1:])
	if k <= 0 || cnt == 0 || cnt > 1<<32 || 1+k >= len(h) {
		return corruptf("elias-fano: bad header")
	}
	c.n, c.l = int(cnt), uint(h[1+k])
	if c.l > efMaxLow {
		return corruptf("elias-fano: %d low bits", c.l)
	}
	hdr := int64(2 + k)
	lowBytes := int64((cnt*uint64(c.l) + 7) / 8)
	if lowBytes >= n-hdr {
		return corruptf("elias-fano: %d values of %d low bits in %d bytes", cnt, c.l, n-hdr)
	}
	if err := c.a.reset(src, off+hdr, lowBytes); err != nil {
		return err
	}
	return c.b.reset(src, off+hdr+lowBytes, n-hdr-lowBytes)
}

func (c *bmCursor) openRoaring(src *source, off, n int64) error {
	c.kind = bmRoaring
	h, err := c.a.take(4)
	if err != nil || len(h) < 4 {
		return corruptf("roaring: %d bytes", n)
	}
	cookie := binary.LittleEndian.Uint32(h)
	hasOffsets := true
	c.runFlags = c.runFlags[:0]
	switch {
	case cookie&0xffff == roaringCookieRun:
		c.size = int(cookie>>16) + 1
		for k := (c.size + 7) / 8; k > 0; {
			f, err := c.a.take(min(k, spanWindow))
			if err != nil || len(f) == 0 {
				return corruptf("roaring: truncated run flags")
			}
			c.runFlags = append(c.runFlags, f...)
			k -= len(f)
		}
		hasOffsets = c.size >= roaringNoOffsetMax
	case cookie == roaringCookieNoRun:
		s, err := c.a.take(4)
		if err != nil || len(s) < 4 {
			return corruptf("roaring: truncated size")
		}
		c.size = int(binary.LittleEndian.Uint32(s))
	default:
		return corruptf("roaring: unknown cookie %#x", cookie)
	}
	if c.size > 1<<16 || int64(4*c.size) > c.a.left() {
		return corruptf("roaring: %d containers in %d bytes", c.size, n)
	}
	hdrOff := c.a.end - c.a.left()
	data := hdrOff + int64(4*c.size)
	if hasOffsets {
		data += int64(4 * c.size) // containers follow in order: the offsets are implied
	}
	if data > off+n {
		return corruptf("roaring: truncated offsets")
	}
	if err := c.a.reset(src, hdrOff, int64(4*c.size)); err != nil {
		return err
	}
	return c.b.reset(src, data, off+n-data)
}

// put writes id into ids for row, ids holding rows [lo, lo+len(ids)) and row below
// lo+len(ids); a row below lo (a chunk skipped) is passed over.
func (c *bmCursor) put(ids []uint32, row, lo int64, id uint32) error {
	if row <= c.prev {
		return corruptf("rows not increasing (%d after %d)", row, c.prev)
	}
	c.prev = row
	if row < lo {
		return nil
	}
	if ids[row-lo] != unsetID {
		return corruptf("row %d is in bitmaps %d and %d", row, ids[row-lo], id)
	}
	ids[row-lo] = id
	return nil
}

// seek passes over the rows below lo without handing them out, a word of Elias-Fano highs or a
// roaring container at a time where it can (rows then are not checked: a chunk read after a
// jump is derived as the rows it holds say; the read path's checks ran on the whole bitmaps).
func (c *bmCursor) seek(lo int64) error {
	switch c.kind {
	case bmEF:
		return c.seekEF(lo)
	case bmRoaring:
		return c.seekRoaring(lo)
	}
	return nil
}

func (c *bmCursor) seekEF(lo int64) error {
	for c.i < c.n {
		if c.word == 0 {
			if err := c.nextWord(); err != nil {
				return err
			}
		}
		cnt := bits.OnesCount64(c.word)
		top := int64(63 - bits.LeadingZeros64(c.word))
		lastHigh := c.wbase + top - int64(c.i+cnt-1)
		if lastHigh < 0 || cnt > c.n-c.i {
			return corruptf("elias-fano: more values than the header's %d", c.n)
		}
		if (lastHigh+1)<<(c.l&63) > lo {
			return nil // this word may hold rows from lo on: the rest one by one
		}
		c.word, c.i = 0, c.i+cnt
		c.prev = lastHigh<<(c.l&63) - 1
		if err := c.skipLows(uint64(cnt) * uint64(c.l)); err != nil {
			return err
		}
	}
	return nil
}

// nextWord loads the next word of Elias-Fano highs.
func (c *bmCursor) nextWord() error {
	b, err := c.b.take(8)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return corruptf("elias-fano: %d values, the header says %d", c.i, c.n)
	}
	var x uint64
	for j := len(b) - 1; j >= 0; j-- {
		x = x<<8 | uint64(b[j])
	}
	c.word, c.wbase = x, c.wbase+64
	return nil
}

// skipLows passes over n bits of Elias-Fano lows.
func (c *bmCursor) skipLows(n uint64) error {
	if n <= uint64(c.nacc) {
		c.acc >>= n & 63
		if n == 64 {
			c.acc = 0
		}
		c.nacc -= uint(n)
		return nil
	}
	rem := n - uint64(c.nacc)
	c.acc, c.nacc = 0, 0
	if err := c.a.skip(int64(rem / 8)); err != nil {
		return err
	}
	if rem%8 != 0 {
		b, err := c.a.take(1)
		if err != nil || len(b) == 0 {
			return corruptf("elias-fano: truncated lows")
		}
		c.acc, c.nacc = uint64(b[0])>>(rem%8), uint(8-rem%8)
	}
	return nil
}

func (c *bmCursor) seekRoaring(lo int64) error {
	for c.ctype == ctNone && c.ci < c.size {
		h, err := c.a.peek(4)
		if err != nil {
			return err
		}
		key := int64(binary.LittleEndian.Uint16(h))
		if (key+1)<<16 > lo {
			return nil // this container may hold rows from lo on
		}
		if err := c.nextContainer(); err != nil {
			return err
		}
		switch c.ctype {
		case ctArray:
			err = c.b.skip(int64(2 * c.left))
		case ctBitmap:
			err = c.b.skip(8 * wordsPerContainer)
		case ctRun:
			err = c.b.skip(int64(4 * c.left))
		}
		if err != nil {
			return err
		}
		c.ctype, c.prev = ctNone, (key+1)<<16-1
	}
	return nil
}

// fill hands out the bitmap's rows below lo+len(ids) into ids, as bitmap id's.
func (c *bmCursor) fill(ids []uint32, lo int64, id uint32) error {
	switch c.kind {
	case bmEF:
		return c.fillEF(ids, lo, id)
	case bmRoaring:
		return c.fillRoaring(ids, lo, id)
	}
	return nil
}

func (c *bmCursor) fillEF(ids []uint32, lo int64, id uint32) error {
	hi := uint64(lo) + uint64(len(ids))
	l := c.l & 63
	mask := uint64(1)<<l - 1
	// The state in locals for the loop (registers), stored back on every way out.
	word, i, acc, nacc, prev := c.word, c.i, c.acc, c.nacc, c.prev
	n, wbase := c.n, c.wbase
	var err error
	for i < n {
		if word == 0 {
			c.word, c.i = 0, i
			if err = c.nextWord(); err != nil {
				break
			}
			word, wbase = c.word, c.wbase
			continue
		}
		if nacc < l {
			c.acc, c.nacc = acc, nacc
			if err = c.moreLows(); err != nil {
				break
			}
			acc, nacc = c.acc, c.nacc
		}
		v := (uint64(wbase+int64(bits.TrailingZeros64(word)))-uint64(i))<<l | acc&mask
		if v >= hi {
			break
		}
		word &= word - 1
		acc >>= l
		nacc -= l
		i++
		row := int64(v)
		if row <= prev {
			err = corruptf("rows not increasing (%d after %d)", row, prev)
			break
		}
		prev = row
		if row < lo {
			continue
		}
		if ids[row-lo] != unsetID {
			err = corruptf("row %d is in bitmaps %d and %d", row, ids[row-lo], id)
			break
		}
		ids[row-lo] = id
	}
	c.word, c.i, c.acc, c.nacc, c.prev = word, i, acc, nacc, prev
	return err
}

// moreLows reads Elias-Fano lows until at least l bits are at hand, as many whole bytes as
// fit at a time.
func (c *bmCursor) moreLows() error {
	for c.nacc < c.l {
		b, err := c.a.take(int(64-c.nacc) / 8)
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return corruptf("elias-fano: truncated lows")
		}
		for j, x := range b {
			c.acc |= uint64(x) << ((c.nacc + 8*uint(j)) & 63)
		}
		c.nacc += 8 * uint(len(b))
	}
	return nil
}

func (c *bmCursor) fillRoaring(ids []uint32, lo int64, id uint32) error {
	hi := lo + int64(len(ids))
	for {
		if c.ctype == ctNone {
			if c.ci == c.size {
				return nil
			}
			if err := c.nextContainer(); err != nil {
				return err
			}
		}
		if c.base >= hi {
			return nil
		}
		switch c.ctype {
		case ctArray:
			for ; c.left > 0; c.left-- {
				b, err := c.b.peek(2)
				if err != nil {
					return err
				}
				v := c.base | int64(binary.LittleEndian.Uint16(b))
				if v >= hi {
					return nil
				}
				c.b.pos += 2
				if err := c.put(ids, v, lo, id); err != nil {
					return err
				}
			}
		case ctBitmap:
			for {
				for c.word == 0 && c.left > 0 {
					b, err := c.b.peek(8)
					if err != nil {
						return err
					}
					c.b.pos += 8
					c.word, c.wbase, c.left = binary.LittleEndian.Uint64(b), c.wbase+64, c.left-1
				}
				if c.word == 0 {
					break
				}
				v := c.base + c.wbase + int64(bits.TrailingZeros64(c.word))
				if v >= hi {
					return nil
				}
				c.word &= c.word - 1
				if err := c.put(ids, v, lo, id); err != nil {
					return err
				}
			}
		case ctRun:
			for {
				if c.runV == c.runEnd {
					if c.left == 0 {
						break
					}
					b, err := c.b.take(4)
					if err != nil || len(b) < 4 {
						return corruptf("roaring: truncated runs")
					}
					start := int64(binary.LittleEndian.Uint16(b))
					length := int64(binary.LittleEndian.Uint16(b[2:])) + 1
					if start+length > 1<<16 {
						return corruptf("roaring: a run leaves its container")
					}
					c.runV, c.runEnd, c.left = c.base+start, c.base+start+length, c.left-1
				}
				if c.runV >= hi {
					return nil
				}
				if err := c.put(ids, c.runV, lo, id); err != nil {
					return err
				}
				c.runV++
			}
		}
		c.ctype = ctNone
	}
}

// nextContainer starts the next container.
func (c *bmCursor) nextContainer() error {
	h, err := c.a.take(4)
	if err != nil || len(h) < 4 {
		return corruptf("roaring: truncated headers")
	}
	key := int(binary.LittleEndian.Uint16(h))
	card := int(binary.LittleEndian.Uint16(h[2:])) + 1
	if key <= c.prevKey {
		return corruptf("roaring: container keys not increasing")
	}
	c.prevKey, c.base = key, int64(key)<<16
	isRun := len(c.runFlags) > 0 && c.runFlags[c.ci/8]&(1<<(c.ci%8)) != 0
	c.ci++
	switch {
	case isRun:
		b, err := c.b.take(2)
		if err != nil || len(b) < 2 {
			return corruptf("roaring: truncated run container")
		}
		c.ctype, c.left, c.runV, c.runEnd = ctRun, int(binary.LittleEndian.Uint16(b)), 0, 0
	case card <= roaringArrayMax:
		c.ctype, c.left = ctArray, card
	default:
		c.ctype, c.left, c.word, c.wbase = ctBitmap, wordsPerContainer, 0, -64
	}
	return nil
}

// done reports whether the cursor handed out every row of its bitmap.
func (c *bmCursor) done() bool {
	switch c.kind {
	case bmEF:
		return c.i == c.n
	case bmRoaring:
		if c.ci < c.size {
			return false
		}
		switch c.ctype {
		case ctArray:
			return c.left == 0
		case ctBitmap:
			return c.word == 0 && c.left == 0
		case ctRun:
			return c.runV == c.runEnd && c.left == 0
		}
	}
	return true
}

// derivePiece is how many rows' ids a deriver fills at a time: 32 KiB of them.
const derivePiece = 8192

// deriver rebuilds the ids of a derived dimension's chunks from its bitmaps (a DimCursor's).
type deriver struct {
	cur  []bmCursor
	next int // the first row the cursors have not passed: a chunk from there on goes on
}

// chunk fills ids with the ids of rows [lo, lo+len(ids)) of c.
func (d *deriver) chunk(c *DimColumn, ids []uint32, lo int) error {
	if d.cur == nil || lo < d.next {
		if err := d.open(c); err != nil {
			return err
		}
	}
	for i := range ids {
		ids[i] = unsetID
	}
	if lo > d.next {
		for id := range d.cur {
			if err := d.cur[id].seek(int64(lo)); err != nil {
				return fmt.Errorf("bitmap %d: %w", id, err)
			}
		}
	}
	// In pieces that stay in the CPU's cache while every bitmap scatters its ids into them.
	for at := 0; at < len(ids); at += derivePiece {
		piece := ids[at:min(at+derivePiece, len(ids))]
		for id := range d.cur {
			if err := d.cur[id].fill(piece, int64(lo+at), uint32(id)); err != nil {
				return fmt.Errorf("bitmap %d: %w", id, err)
			}
		}
	}
	for k, id := range ids {
		if id == unsetID {
			return corruptf("row %d is in no bitmap", lo+k)
		}
	}
	d.next = lo + len(ids)
	if d.next == c.seg.Rows() {
		for id := range d.cur {
			if !d.cur[id].done() {
				return corruptf("bitmap %d holds rows past the last row %d or more than it says", id, d.next-1)
			}
		}
	}
	return nil
}

// open points a cursor at the start of each of c's bitmaps.
func (d *deriver) open(c *DimColumn) error {
	b := c.bms
	if len(d.cur) != b.count {
		d.cur = make([]bmCursor, b.count)
	}
	for id := range d.cur {
		start, end, err := b.span(id)
		if err != nil {
			return err
		}
		if err := d.cur[id].open(b.src, b.part.Offset+start, end-start, b.v4); err != nil {
			return fmt.Errorf("bitmap %d: %w", id, err)
		}
	}
	d.next = 0
	return nil
}
