package columns

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/internal/sys"
)

// A bitmap index part holds one bitmap per dictionary id, back to back, then a table of where
// each ends:
//
//	bitmap 0 | bitmap 1 | ... | bitmap c-1 | ends: c x u64 | count c u32
//
// Bitmap i spans [ends[i-1], ends[i]) from the start of the part (ends[-1] = 0), so one value's
// bitmap is read without touching the others. In segfmt.EncRoaringTable each bitmap is the portable
// roaring serialization (as roaring's WriteTo writes it); in segfmt.EncRoaringTableV4 each is in one
// of the forms of bitmapef.go. A nulls part is one roaring bitmap.
const bitmapsTrailerSize = 4

// bitmapsWriter streams bitmaps into a stage in id order. With compact, it writes each
// bitmap in the smallest of the version 4 forms and the roaring serialization, and the part
// is segfmt.EncRoaringTableV4 when some bitmap is not in the roaring form; otherwise its bytes are
// exactly the version 2 part's, and it stays segfmt.EncRoaringTable.
type bitmapsWriter struct {
	st      *stage
	ends    []uint64
	enc     roaringEncoder
	buf     []byte
	compact bool
	v4      bool // some bitmap was written in a version 4 form
	vals    []uint32
	words   *[wordsPerContainer]uint64 // addPieces' bitmap container
}

// addRows adds the bitmap of rows, strictly increasing.
func (b *bitmapsWriter) addRows(rows []uint32) error {
	cs := b.enc.rowsContainers(rows)
	if len(rows) >= mappedBitmapRows {
		if buf, unmap := mapBuf(bitmapRowsBound(cs, rows, b.compact)); buf != nil {
			enc, v4 := b.enc.appendBitmapRowsOf(buf, rows, cs, b.compact)
			b.v4 = b.v4 || v4
			mappedBitmaps.Add(1)
			err := b.write(enc)
			unmap()
			return err
		}
	}
	var v4 bool
	b.buf, v4 = b.enc.appendBitmapRowsOf(b.buf[:0], rows, cs, b.compact)
	b.v4 = b.v4 || v4
	return b.addEncoded()
}

// mappedBitmapRows is the fewest rows of a bitmap encoded outside the Go heap (mapBuf; a
// variable for tests): a 300 M-row merge encodes hundreds of bitmaps of up to a million rows, a
// few MB each, which on the heap let the collector's goal grow by as much again. Its peak RSS
// went from 81.2 to 73.4 MiB (contiguous) and 77.6 to 73.4 (overlapping), 3 M rows' unchanged.
var mappedBitmapRows = 1 << 18

// For tests: mappedBitmaps counts the bitmaps encoded outside the Go heap.
var mappedBitmaps atomic.Int64

// bitmapRowsBound returns at least the bytes appendBitmapRowsOf appends for rows, of
// containers cs.
func bitmapRowsBound(cs []roaringContainer, rows []uint32, compact bool) int {
	n := roaringSize(cs)
	if compact && len(rows) > 0 {
		n = max(n, efSize(len(rows), rows[len(rows)-1])+8)
	}
	return n + 64
}

// mapBuf returns an empty buffer of n bytes' room in an anonymous private mapping, outside the
// Go heap, and the function that unmaps it (the buffer is invalid after); nil when there is no
// mapping here.
func mapBuf(n int) ([]byte, func()) {
	m, err := sys.Default.Mmap(-1, 0, n, sys.ProtRead|sys.ProtWrite, sys.MapPrivate|sys.MapAnon)
	if err != nil {
		return nil, nil
	}
	return m[:0], func() { _ = sys.Default.Munmap(m) }
}

// appendBitmapRows appends the bitmap of rows, strictly increasing, in the form a bitmap index
// part stores it: with compact, the smallest of the version 4 forms and the roaring
// serialization (v4 reports a version 4 form); else the roaring serialization.
func (e *roaringEncoder) appendBitmapRows(dst []byte, rows []uint32, compact bool) (_ []byte, v4 bool) {
	return e.appendBitmapRowsOf(dst, rows, e.rowsContainers(rows), compact)
}

// appendBitmapRowsOf is appendBitmapRows of rows whose containers (rowsContainers) are cs.
func (e *roaringEncoder) appendBitmapRowsOf(dst []byte, rows []uint32, cs []roaringContainer, compact bool) (_ []byte, v4 bool) {
	if compact && len(rows) == 0 {
		return dst, true
	}
	if compact && efSize(len(rows), rows[len(rows)-1]) < roaringSize(cs) {
		return appendEFRows(dst, rows), true
	}
	return e.appendRowsBodies(appendRoaringHeader(dst, cs), rows), false
}

// addRun adds the bitmaps encoded in r (see bitmapRun).
func (b *bitmapsWriter) addRun(r *bitmapRun) error {
	base := uint64(b.st.n)
	if err := b.st.write(r.buf); err != nil {
		return err
	}
	b.ends = uint64Pool.Grow(b.ends, len(r.ends))
	for _, e := range r.ends {
		b.ends = append(b.ends, base+e)
	}
	b.v4 = b.v4 || r.v4
	return nil
}

// addWords adds the bitmap of the bitset words.
func (b *bitmapsWriter) addWords(words []uint64) error {
	cs := b.enc.wordsContainers(words)
	n := 0
	for i := range cs {
		n += cs[i].card
	}
	switch {
	case b.compact && n == 0:
		b.buf, b.v4 = b.buf[:0], true
	case b.compact && efSize(n, lastBit(words)) < roaringSize(cs):
		b.buf, b.v4 = appendEFWords(b.buf[:0], words, n, lastBit(words)), true
	default:
		b.buf = b.enc.appendWordsBodies(appendRoaringHeader(b.buf[:0], cs), words)
	}
	return b.addEncoded()
}

func (b *bitmapsWriter) addEncoded() error {
	if err := b.write(b.buf); err != nil {
		return err
	}
	if cap(b.buf) > 1<<20 {
		b.buf = nil // a rare large bitmap: do not keep its buffer
	}
	return nil
}

// write writes one encoded bitmap to the stage and notes where it ends.
func (b *bitmapsWriter) write(enc []byte) error {
	if err := b.st.write(enc); err != nil {
		return err
	}
	b.ends = append(uint64Pool.Grow(b.ends, 1), uint64(b.st.n))
	return nil
}

func (b *bitmapsWriter) add(bm *roaring.Bitmap) error {
	if bm == nil {
		bm = roaring.New()
	}
	if b.compact {
		if bm.IsEmpty() {
			b.buf, b.v4 = b.buf[:0], true
			return b.addEncoded()
		}
		n := bm.GetCardinality()
		if n <= 1<<32 && uint64(efSize(int(n), bm.Maximum())) < bm.GetSerializedSizeInBytes() {
			if b.vals == nil {
				b.vals = make([]uint32, 4096)
			}
			p := beginEF(b.buf[:0], int(n), bm.Maximum())
			it := bm.ManyIterator()
			for k := it.NextMany(b.vals); k > 0; k = it.NextMany(b.vals) {
				p.addAll(b.vals[:k])
			}
			b.buf, b.v4 = p.finish(), true
			return b.addEncoded()
		}
	}
	if _, err := bm.WriteTo(b.st); err != nil {
		return b.st.fail(err)
	}
	b.ends = append(uint64Pool.Grow(b.ends, 1), uint64(b.st.n))
	return b.st.err
}

func (b *bitmapsWriter) finish() error {
	buf := bytePool.Get(8*len(b.ends) + 4)
	for _, e := range b.ends {
		buf = binary.LittleEndian.AppendUint64(buf, e)
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(b.ends)))
	uint64Pool.Put(b.ends)
	b.ends = nil
	if b.v4 {
		b.st.spec.enc = segfmt.EncRoaringTableV4
	}
	err := b.st.write(buf)
	bytePool.Put(buf)
	return err
}

// decodeBitmap decodes one serialized roaring bitmap that must fill b exactly and hold only
// rows below rows.
func decodeBitmap(b []byte, rows int) (*roaring.Bitmap, error) {
	bm := roaring.New()
	err := safely("roaring", func() error {
		n, err := bm.ReadFrom(bytes.NewReader(b))
		if err != nil {
			return corruptf("roaring: %v", err)
		}
		if n != int64(len(b)) {
			return corruptf("roaring: %d bytes read of %d", n, len(b))
		}
		if err := bm.Validate(); err != nil {
			return corruptf("roaring: %v", err)
		}
		if !bm.IsEmpty() && int64(bm.Maximum()) >= int64(rows) {
			return corruptf("bitmap holds row %d, the segment has %d rows", bm.Maximum(), rows)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return bm, nil
}

// decodeBitmap4 decodes one bitmap of a version 4 part (any form of bitmapef.go) that fills
// b and holds only rows below rows.
func decodeBitmap4(b []byte, rows int) (*roaring.Bitmap, error) {
	if len(b) == 0 {
		return roaring.New(), nil
	}
	if b[0] != efTag {
		return decodeBitmap(b, rows)
	}
	sc := efScratchPool.Get().(*efScratch)
	defer efScratchPool.Put(sc)
	d := roaringDecoder{out: sc.vals[:0]}
	err := d.decodeEF(b, uint64(rows), nil)
	sc.vals = d.out
	if err != nil {
		return nil, err
	}
	// The values are checked. Dense (a value per 32 rows or more, up to the last): build the
	// bitmap from a bitset it keeps; else from the values' roaring serialization, in a buffer of
	// its own that the bitmap's containers keep (copy on write).
	last := d.out[len(d.out)-1]
	if len(d.out) >= int(last/32) {
		words := make([]uint64, last/64+1)
		for _, v := range d.out {
			words[v>>6] |= 1 << (v & 63)
		}
		return roaring.FromDense(words, false), nil
	}
	cs := sc.enc.rowsContainers(d.out)
	raw := appendRoaringHeader(make([]byte, 0, roaringSize(cs)), cs)
	raw = sc.enc.appendRowsBodies(raw, d.out)
	bm := roaring.New()
	if _, err := bm.FromUnsafeBytes(raw); err != nil {
		return nil, corruptf("roaring: %v", err)
	}
	return bm, nil
}

// efScratch is decodeBitmap4's reused memory.
type efScratch struct {
	vals []uint32
	enc  roaringEncoder
}

var efScratchPool = sync.Pool{New: func() any { return new(efScratch) }}

// bitmapsReader reads a bitmap index part; safe for concurrent use.
type bitmapsReader struct {
	src      *source
	part     *segfmt.PartInfo
	chk      *partCheck // the part's read-path check (nil in codec tests): DimColumn calls it
	count    int
	tableOff int64
	rows     int
	v4       bool // segfmt.EncRoaringTableV4: the bitmaps are in the forms of bitmapef.go
}

func parseBitmaps(src *source, p *segfmt.PartInfo, cardinality, rows int) (*bitmapsReader, error) {
	if p.Length < bitmapsTrailerSize {
		return nil, corruptf("%d bytes, too short for a bitmap index", p.Length)
	}
	tr, err := src.view(p.Offset+p.Length-bitmapsTrailerSize, bitmapsTrailerSize, nil)
	if err != nil {
		return nil, err
	}
	count := int64(binary.LittleEndian.Uint32(tr))
	if count != int64(cardinality) {
		return nil, corruptf("%d bitmaps for a dictionary of %d values", count, cardinality)
	}
	body := p.Length - bitmapsTrailerSize
	if count*8 > body {
		return nil, corruptf("a table of %d bitmaps does not fit in %d bytes", count, body)
	}
	return &bitmapsReader{src: src, part: p, count: int(count), tableOff: body - count*8, rows: rows, v4: p.Encoding == segfmt.EncRoaringTableV4}, nil
}

// span returns where bitmap id lies within the part.
func (b *bitmapsReader) span(id int) (int64, int64, error) {
	off, n := b.part.Offset+b.tableOff+int64(id-1)*8, int64(16)
	if id == 0 {
		off, n = b.part.Offset+b.tableOff, 8
	}
	var buf []byte // a mapped segment is read in place; else a buffer (it escapes into ReadAt)
	if b.src.data == nil {
		buf = make([]byte, 16)
	}
	t, err := b.src.view(off, n, buf)
	if err != nil {
		return 0, 0, err
	}
	var start, end uint64
	if id == 0 {
		end = binary.LittleEndian.Uint64(t)
	} else {
		start, end = binary.LittleEndian.Uint64(t), binary.LittleEndian.Uint64(t[8:])
	}
	if start > end || end > uint64(b.tableOff) {
		return 0, 0, corruptf("bitmap %d at [%d, %d) outside [0, %d)", id, start, end, b.tableOff)
	}
	return int64(start), int64(end), nil
}

// raw returns the serialized bytes of bitmap id: a view of the mapping when the segment is
// mapped, else a copy.
func (b *bitmapsReader) raw(id int) ([]byte, error) {
	if id < 0 || id >= b.count {
		return nil, fmt.Errorf("columns: bitmap id %d out of range [0, %d): %w", id, b.count, ErrInvalid)
	}
	start, end, err := b.span(id)
	if err != nil {
		return nil, err
	}
	return b.src.view(b.part.Offset+start, end-start, nil)
}

func (b *bitmapsReader) bitmap(id int) (*roaring.Bitmap, error) {
	raw, err := b.raw(id)
	if err != nil {
		return nil, err
	}
	var bm *roaring.Bitmap
	if b.v4 {
		bm, err = decodeBitmap4(raw, b.rows)
	} else {
		bm, err = decodeBitmap(raw, b.rows)
	}
	if err != nil {
		return nil, fmt.Errorf("bitmap %d: %w", id, err)
	}
	return bm, nil
}

// headers reads the bitmaps' headers for a structural check (storedCount), which needs no
// more of each. A mapped file's part longer than crcViaFileMin it reads through the
// descriptor, a bound on a header's bytes at a time: touched through the mapping, each header
// faults in the pages around it, and a dimension of a thousand values at 60 M rows held some
// 60 MiB of an input resident until the check's release.
type headers struct {
	b    *bitmapsReader
	file *source // nil: through b.src
	max  int64   // the most bytes a header takes (roaringHeader, an Elias-Fano count)
	buf  []byte
}

func (b *bitmapsReader) headers() *headers {
	h := &headers{b: b}
	if f := b.src.file(); f != nil && b.part.Length > crcViaFileMin {
		n := int64(b.rows>>16 + 1) // containers: one a 65,536 rows
		h.file, h.max = f, 8+(n+7)/8+4*n
	}
	return h
}

// count returns the rows bitmap id holds, from its header (storedCount). A header read in part
// that does not parse is read again whole, for the verdict (and the error) the whole bitmap
// gives.
func (h *headers) count(id int) (uint64, error) {
	if h.file == nil {
		raw, err := h.b.raw(id)
		if err != nil {
			return 0, err
		}
		return storedCount(raw, h.b.v4)
	}
	start, end, err := h.b.span(id)
	if err != nil {
		return 0, err
	}
	raw, err := h.file.view(h.b.part.Offset+start, min(end-start, h.max), h.buf)
	if err != nil {
		return 0, err
	}
	h.buf = raw
	n, err := storedCount(raw, h.b.v4)
	if err != nil && int64(len(raw)) < end-start {
		if raw, err = h.b.raw(id); err != nil {
			return 0, err
		}
		return storedCount(raw, h.b.v4)
	}
	return n, err
}
