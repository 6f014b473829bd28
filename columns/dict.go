package columns

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/writeout/writeout/internal/segfmt"
)

// A dictionary part holds a dimension's distinct non-null values in strictly increasing byte
// order, front-coded in blocks of dictBlock values:
//
//	block 0 | block 1 | ... | block offsets: nblocks x u32 | count u32 | flags u8 | block size u8
//
// A block's first value is stored whole (length uvarint | bytes); each next one as the length
// of the prefix it shares with the value before it, then the rest (prefix uvarint | suffix
// length uvarint | suffix). Block offsets are from the start of the part. flags bit 0 says the
// dimension has the null value; it then has id 0 and value i has id i+1, so that ids follow
// value order with null first. A lookup binary-searches the blocks' first values, then scans one
// block.
const (
	dictBlock       = 16
	dictTrailerSize = 6
	dictHasNull     = 1
)

// dictWriter streams a dictionary into a stage, value by value.
type dictWriter struct {
	st        *stage
	hasNull   bool
	count     int
	prev      []byte
	buf       []byte
	blockOffs []uint32
}

// dictFlushBytes is how many bytes of values the dictionary writer gathers before it writes
// them to its stage.
const dictFlushBytes = 64 << 10

func (d *dictWriter) add(v string) error {
	if len(v) > MaxValueBytes {
		return fmt.Errorf("value of %d bytes, at most %d", len(v), MaxValueBytes)
	}
	if d.count > 0 && bytes.Compare(d.prev, unsafeBytes(v)) >= 0 {
		return fmt.Errorf("value %.64q does not sort after %.64q: dictionary values must be added in strictly increasing order", v, d.prev)
	}
	if d.count%dictBlock == 0 {
		off := d.st.n + int64(len(d.buf))
		if off > 1<<32-1 {
			return fmt.Errorf("dictionary larger than 4 GiB")
		}
		d.blockOffs = append(uint32Pool.Grow(d.blockOffs, 1), uint32(off))
		if d.buf == nil {
			d.buf = bytePool.Get(dictFlushBytes + 1<<10)
		}
		d.buf = binary.AppendUvarint(d.buf, uint64(len(v)))
		d.buf = append(d.buf, v...)
	} else {
		p := commonPrefix(d.prev, v)
		d.buf = binary.AppendUvarint(d.buf, uint64(p))
		d.buf = binary.AppendUvarint(d.buf, uint64(len(v)-p))
		d.buf = append(d.buf, v[p:]...)
	}
	d.prev = append(d.prev[:0], v...)
	d.count++
	if len(d.buf) >= dictFlushBytes {
		err := d.st.write(d.buf)
		d.buf = d.buf[:0]
		return err
	}
	return nil
}

func commonPrefix(a []byte, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func (d *dictWriter) finish() error {
	for _, o := range d.blockOffs {
		d.buf = binary.LittleEndian.AppendUint32(d.buf, o)
	}
	d.buf = binary.LittleEndian.AppendUint32(d.buf, uint32(d.count))
	var flags byte
	if d.hasNull {
		flags |= dictHasNull
	}
	d.buf = append(d.buf, flags, dictBlock)
	err := d.st.write(d.buf)
	bytePool.Put(d.buf)
	uint32Pool.Put(d.blockOffs)
	d.buf, d.prev, d.blockOffs = nil, nil, nil
	return err
}

// dictReader reads a dictionary part. It holds no mutable state and is safe for concurrent use.
type dictReader struct {
	src  *source
	part *segfmt.PartInfo
	chk  *partCheck // the part's read-path check; nil before Open sets it

	count    int // non-null values
	hasNull  bool
	nblocks  int
	tableOff int64 // from the part start
}

func parseDict(src *source, p *segfmt.PartInfo) (*dictReader, error) {
	if p.Length < dictTrailerSize {
		return nil, corruptf("%d bytes, too short for a dictionary", p.Length)
	}
	tr, err := src.view(p.Offset+p.Length-dictTrailerSize, dictTrailerSize, nil)
	if err != nil {
		return nil, err
	}
	count := int64(binary.LittleEndian.Uint32(tr))
	flags, bs := tr[4], tr[5]
	if flags&^dictHasNull != 0 || bs != dictBlock {
		return nil, corruptf("dictionary flags %#x block size %d", flags, bs)
	}
	nblocks := (count + dictBlock - 1) / dictBlock
	body := p.Length - dictTrailerSize
	// Every block takes its table entry and at least one byte per value.
	if nblocks*4+count > body {
		return nil, corruptf("%d values do not fit in %d bytes", count, body)
	}
	return &dictReader{src: src, part: p, count: int(count), hasNull: flags&dictHasNull != 0,
		nblocks: int(nblocks), tableOff: body - nblocks*4}, nil
}

// cardinality counts the null value too.
func (d *dictReader) cardinality() int {
	if d.hasNull {
		return d.count + 1
	}
	return d.count
}

// check checks the dictionary part's CRC the first time its bytes are used (an atomic load
// after that): every value, lookup and block read goes through it.
func (d *dictReader) check() error {
	if d.chk == nil {
		return nil
	}
	return d.chk.check()
}

// block returns the bytes of block b.
func (d *dictReader) block(b int, buf []byte) ([]byte, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.blockRaw(b, buf)
}

// blockRaw is block without the part's check.
func (d *dictReader) blockRaw(b int, buf []byte) ([]byte, error) {
	var ends [8]byte
	n := int64(8)
	if b == d.nblocks-1 {
		n = 4
	}
	t, err := d.src.view(d.part.Offset+d.tableOff+int64(b)*4, n, ends[:0])
	if err != nil {
		return nil, err
	}
	start := int64(binary.LittleEndian.Uint32(t))
	end := d.tableOff
	if n == 8 {
		end = int64(binary.LittleEndian.Uint32(t[4:]))
	}
	if start >= end || end > d.tableOff || (b == 0 && start != 0) {
		return nil, corruptf("dictionary block %d at [%d, %d) outside [0, %d)", b, start, end, d.tableOff)
	}
	return d.src.view(d.part.Offset+start, end-start, buf)
}

// blockIter walks the values of one block.
type blockIter struct {
	rest []byte
	val  []byte
	i    int
}

func (it *blockIter) next() error {
	if it.i == 0 {
		l, k := binary.Uvarint(it.rest)
		if k <= 0 || l > MaxValueBytes || l > uint64(len(it.rest)-k) {
			return corruptf("dictionary: bad value length")
		}
		it.val = append(it.val[:0], it.rest[k:k+int(l)]...)
		it.rest = it.rest[k+int(l):]
	} else {
		p, k := binary.Uvarint(it.rest)
		if k <= 0 || p > uint64(len(it.val)) {
			return corruptf("dictionary: bad shared prefix")
		}
		it.rest = it.rest[k:]
		l, k := binary.Uvarint(it.rest)
		if k <= 0 || l > MaxValueBytes || l > uint64(len(it.rest)-k) {
			return corruptf("dictionary: bad suffix length")
		}
		it.val = append(it.val[:p], it.rest[k:k+int(l)]...)
		it.rest = it.rest[k+int(l):]
	}
	it.i++
	return nil
}

// blockLen returns the number of values in block b.
func (d *dictReader) blockLen(b int) int {
	if b == d.nblocks-1 {
		return d.count - b*dictBlock
	}
	return dictBlock
}

// value returns value i (0-based among non-null values), using scratch for the block.
func (d *dictReader) value(i int, scratch *blockIter, buf []byte) (string, error) {
	if err := d.check(); err != nil {
		return "", err
	}
	if i < 0 || i >= d.count {
		return "", fmt.Errorf("columns: dictionary index %d out of range [0, %d): %w", i, d.count, ErrInvalid)
	}
	b := i / dictBlock
	raw, err := d.block(b, buf)
	if err != nil {
		return "", err
	}
	scratch.rest, scratch.i = raw, 0
	for k := 0; k <= i%dictBlock; k++ {
		if err := scratch.next(); err != nil {
			return "", err
		}
	}
	return string(scratch.val), nil
}

// firstValue returns the first value of block b without copying it out of raw.
func (d *dictReader) firstValue(b int) ([]byte, error) {
	raw, err := d.block(b, nil)
	if err != nil {
		return nil, err
	}
	l, k := binary.Uvarint(raw)
	if k <= 0 || l > uint64(len(raw)-k) {
		return nil, corruptf("dictionary block %d: bad first value", b)
	}
	return raw[k : k+int(l)], nil
}

// lookup returns the index (among non-null values) of v, and whether it is present.
func (d *dictReader) lookup(v string) (int, bool, error) {
	if err := d.check(); err != nil {
		return 0, false, err
	}
	if d.count == 0 {
		return 0, false, nil
	}
	// The last block whose first value is <= v.
	lo, hi := 0, d.nblocks // invariant: first(lo-1) <= v < first(hi)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		f, err := d.firstValue(m)
		if err != nil {
			return 0, false, err
		}
		if string(f) <= v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	b := lo - 1
	if b < 0 {
		return 0, false, nil
	}
	raw, err := d.block(b, nil)
	if err != nil {
		return 0, false, err
	}
	it := blockIter{rest: raw}
	for k := 0; k < d.blockLen(b); k++ {
		if err := it.next(); err != nil {
			return 0, false, err
		}
		switch c := strings.Compare(string(it.val), v); {
		case c == 0:
			return b*dictBlock + k, true, nil
		case c > 0:
			return 0, false, nil
		}
	}
	return 0, false, nil
}
