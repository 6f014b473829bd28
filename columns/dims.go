package columns

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/writeout/writeout/internal/segfmt"
)

// DimColumn is a dictionary dimension: a sorted dictionary, ids per row and (unless the schema
// says NoBitmapIndex) a bitmap per id. Ids follow value order; when the dimension has nulls,
// null is id 0 and the first value id 1. It is safe for concurrent use.
type DimColumn struct {
	seg   *Segment
	dim   Dimension
	dict  *dictReader
	ix    *chunkIndex
	bms   *bitmapsReader // nil without a bitmap index
	nulls *partCheck
	perm  []uint32 // a version 4 or 5 ids part's rank table (perm[rank] is the id), else nil
	// deltas: a version 5 ids part, whose chunks may also be in the id-deltas form
	deltas bool
	// derived: a version 6 ids part (segfmt.EncIDChunksDerived): its chunks hold no bytes, the
	// ids come from the bitmaps (derive.go)
	derived bool
	// The bitmaps' read-path checks (structure.go, checkBitmap): a bit per bitmap that passed,
	// whether one was found corrupt, and under bmMu how many were checked alone and the first
	// verdict of corrupt.
	bmChecked []atomic.Uint64
	bmBad     atomic.Bool
	bmMu      sync.Mutex
	bmAlone   int
	bmErr     error
}

// Dimension returns the column's schema entry.
func (c *DimColumn) Dimension() Dimension { return c.dim }

// Cardinality returns the number of ids, null included.
func (c *DimColumn) Cardinality() int { return c.dict.cardinality() }

// HasNull reports whether the dictionary has the null value, as id 0.
func (c *DimColumn) HasNull() bool { return c.dict.hasNull }

// IsNull reports whether id is the null id.
func (c *DimColumn) IsNull(id uint32) bool { return c.dict.hasNull && id == 0 }

// HasBitmaps reports whether the column has a bitmap index.
func (c *DimColumn) HasBitmaps() bool { return c.bms != nil }

func (c *DimColumn) index(id uint32) int {
	if c.dict.hasNull {
		return int(id) - 1
	}
	return int(id)
}

func (c *DimColumn) idOf(index int) uint32 {
	if c.dict.hasNull {
		return uint32(index + 1)
	}
	return uint32(index)
}

// Value returns the value of id; the null id gives "".
func (c *DimColumn) Value(id uint32) (string, error) {
	if int64(id) >= int64(c.Cardinality()) {
		return "", fmt.Errorf("columns: column %q: id %d not below the cardinality %d: %w", c.dim.Name, id, c.Cardinality(), ErrInvalid)
	}
	if c.IsNull(id) {
		return "", nil
	}
	var it blockIter
	v, err := c.dict.value(c.index(id), &it, nil)
	return v, partError(c.dim.Name, segfmt.PartDictionary, err)
}

// Lookup returns the id of a (non-null) value by binary search, and whether it is present.
func (c *DimColumn) Lookup(v string) (uint32, bool, error) {
	i, ok, err := c.dict.lookup(v)
	if err != nil || !ok {
		return 0, false, partError(c.dim.Name, segfmt.PartDictionary, err)
	}
	return c.idOf(i), true, nil
}

// Bitmap returns the rows holding id, decoding that one bitmap only. The bitmap is the
// caller's to keep and change.
func (c *DimColumn) Bitmap(id uint32) (*roaring.Bitmap, error) {
	if c.bms == nil {
		return nil, fmt.Errorf("columns: column %q has no bitmap index: %w", c.dim.Name, ErrSchema)
	}
	if c.seg.src.closed {
		return nil, fmt.Errorf("columns: column %q: %w", c.dim.Name, errClosed)
	}
	if err := c.bms.chk.check(); err != nil {
		return nil, err
	}
	if err := c.checkBitmap(id); err != nil {
		return nil, err
	}
	bm, err := c.bms.bitmap(int(id))
	return bm, partError(c.dim.Name, segfmt.PartBitmaps, err)
}

// EachBitmapRows hands fn the rows holding id in increasing order, in pieces of at most
// len(buf) rows (4096 when buf is empty). A piece is buf's memory: fn may change it, and must not
// keep it past the call. It decodes the stored bitmap straight from the segment's bytes (a view
// of the mapping for a segment from Open), without building a roaring.Bitmap, and checks what it
// reads, every row below the segment's row count included: bad bytes give an error wrapping
// ErrCorrupt, which may come after some pieces went to fn. An error from fn stops the walk and
// is returned as it is.
func (c *DimColumn) EachBitmapRows(id uint32, buf []uint32, fn func(rows []uint32) error) error {
	raw, err := c.bitmapBytes(id)
	if err != nil {
		return err
	}
	if len(buf) == 0 {
		buf = make([]uint32, 4096)
	}
	d := roaringDecoder{out: buf[:0], piece: len(buf)}
	err = d.eachStored(raw, c.bms.v4, uint64(c.seg.Rows()), fn)
	if d.fnErr != nil {
		return d.fnErr
	}
	if err != nil {
		return partError(c.dim.Name, segfmt.PartBitmaps, fmt.Errorf("bitmap %d: %w", id, err))
	}
	return nil
}

// bitmapBytes returns value id's bitmap as stored (the portable roaring serialization, or in
// a version 4 part one of the forms of bitmapef.go), not decoded (but the part's CRC is checked). For a segment from Open it is a view of the mapping,
// valid until Close; otherwise it is a copy.
func (c *DimColumn) bitmapBytes(id uint32) ([]byte, error) {
	if c.bms == nil {
		return nil, fmt.Errorf("columns: column %q has no bitmap index: %w", c.dim.Name, ErrSchema)
	}
	if c.seg.src.closed {
		return nil, fmt.Errorf("columns: column %q: %w", c.dim.Name, errClosed)
	}
	if err := c.bms.chk.check(); err != nil {
		return nil, err
	}
	if err := c.checkBitmap(id); err != nil {
		return nil, err
	}
	raw, err := c.bms.raw(int(id))
	return raw, partError(c.dim.Name, segfmt.PartBitmaps, err)
}

// Nulls returns the null rows.
func (c *DimColumn) Nulls() (*roaring.Bitmap, error) { return c.seg.readNulls(c.dim.Name, c.nulls) }

// Dictionary returns an iterator over the dictionary in id order, null (when present) first.
func (c *DimColumn) Dictionary() *DictIter { return &DictIter{col: c, id: -1} }

// DictIter walks a dictionary in id order, decoding one block at a time. Use it from one
// goroutine at a time.
//
//	it := col.Dictionary()
//	for it.Next() { use(it.ID(), it.Value()) }
//	if err := it.Err(); err != nil { ... }
type DictIter struct {
	col   *DimColumn
	id    int
	block blockIter
	left  int // values left in the current block
	bn    int // next block
	val   string
	err   error
	// The current block's values, decoded at once into one string (one allocation a block):
	// vals is their bytes back to back, ends where each ends.
	vals  string
	ends  [dictBlock]int
	next  int // index in ends of the next value
	stage []byte
}

// Next advances to the next id; false at the end or on an error.
func (it *DictIter) Next() bool {
	if it.err != nil {
		return false
	}
	// The cardinality comes from the dictionary: checked before it ends the walk.
	if err := it.col.dict.check(); err != nil {
		it.err = err
		return false
	}
	if it.id+1 >= it.col.Cardinality() {
		return false
	}
	if it.col.seg.src.closed { // the current block may be a view of the mapping
		it.err = fmt.Errorf("columns: column %q: %w", it.col.dim.Name, errClosed)
		return false
	}
	it.id++
	if it.col.IsNull(uint32(it.id)) {
		it.val = ""
		return true
	}
	if it.left == 0 {
		if err := it.loadBlock(); err != nil {
			it.err = partError(it.col.dim.Name, segfmt.PartDictionary, err)
			return false
		}
	}
	start := 0
	if it.next > 0 {
		start = it.ends[it.next-1]
	}
	it.val = it.vals[start:it.ends[it.next]]
	it.next++
	it.left--
	return true
}

// loadBlock decodes the next block's values into vals.
func (it *DictIter) loadBlock() error {
	raw, err := it.col.dict.block(it.bn, nil)
	if err != nil {
		return err
	}
	n := it.col.dict.blockLen(it.bn)
	if n < 1 || n > dictBlock {
		return corruptf("dictionary: block %d of %d values", it.bn, n)
	}
	it.block.rest, it.block.i = raw, 0
	it.stage = it.stage[:0]
	for k := 0; k < n; k++ {
		if err := it.block.next(); err != nil {
			return err
		}
		it.stage = append(it.stage, it.block.val...)
		it.ends[k] = len(it.stage)
	}
	it.vals, it.next, it.left = string(it.stage), 0, n
	it.bn++
	return nil
}

// ID returns the current id.
func (it *DictIter) ID() uint32 { return uint32(it.id) }

// Value returns the current value ("" for null).
func (it *DictIter) Value() string { return it.val }

// IsNull reports whether the current id is the null id.
func (it *DictIter) IsNull() bool { return it.col.IsNull(uint32(it.id)) }

// Err returns the error that stopped the iteration, if any.
func (it *DictIter) Err() error { return it.err }

// Cursor returns a new cursor over the rows' ids.
func (c *DimColumn) Cursor() *DimCursor {
	return &DimCursor{col: c, cr: newChunkReader(&c.seg.src, c.ix)}
}

// DimCursor reads the ids of a dictionary dimension chunk by chunk; one goroutine at a time.
type DimCursor struct {
	col   *DimColumn
	cr    chunkReader
	ids   []uint32
	offs  []uint32          // multi-value: row k's ids are ids[offs[k]:offs[k+1]]
	cache map[uint32]string // values already looked up by Values
	it    blockIter
	pd    *planeDecoder // a version 4 ids part's
	dv    *deriver      // a derived ids part's
	// rows: what the ids' structural check gathers, when put off (see Deferral).
	rows *dimRowsState
}

// maxValueCache bounds the values a DimCursor remembers for Values.
const maxValueCache = 1 << 12

// Sequential is Cursor.Sequential for the ids: a large ids part of a mapped file is read
// through the descriptor. Call it before the first read; it returns c.
func (c *DimCursor) Sequential() *DimCursor {
	c.cr.sequential()
	return c
}

// IDs returns the ids of row (the null id alone for a null row), valid until the cursor's next
// call. Every id is below the cardinality.
func (c *DimCursor) IDs(row int) ([]uint32, error) {
	if row < c.cr.lo || row >= c.cr.hi || c.cr.cur < 0 {
		if err := c.load(row); err != nil {
			return nil, err
		}
	}
	k := row - c.cr.lo
	if c.col.dim.MultiValue {
		return c.ids[c.offs[k]:c.offs[k+1]:c.offs[k+1]], nil
	}
	return c.ids[k : k+1 : k+1], nil
}

// id returns the first id of row: the id, for a single-value dimension.
func (c *DimCursor) id(row int) (uint32, error) {
	ids, err := c.IDs(row)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// Chunk returns the ids of the chunk holding row and the row of its first entry. For a
// single-value dimension offs is nil and ids[k] is row first+k's id; for a multi-value one row
// first+k's ids are ids[offs[k]:offs[k+1]]. Valid until the cursor's next call.
func (c *DimCursor) Chunk(row int) (first int, ids, offs []uint32, err error) {
	if row < c.cr.lo || row >= c.cr.hi || c.cr.cur < 0 {
		if err := c.load(row); err != nil {
			return 0, nil, nil, err
		}
	}
	if c.col.dim.MultiValue {
		return c.cr.lo, c.ids, c.offs, nil
	}
	return c.cr.lo, c.ids, nil, nil
}

// Values returns the values of row, nil for a null row.
func (c *DimCursor) Values(row int) ([]string, error) {
	ids, err := c.IDs(row)
	if err != nil {
		return nil, err
	}
	if c.col.IsNull(ids[0]) {
		return nil, nil
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		if out[i], err = c.value(id); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// value returns the value of id through the cursor's cache.
func (c *DimCursor) value(id uint32) (string, error) {
	if v, ok := c.cache[id]; ok {
		return v, nil
	}
	if c.cache == nil || len(c.cache) >= maxValueCache {
		c.cache = make(map[uint32]string, 64)
	}
	v, err := c.col.dict.value(c.col.index(id), &c.it, nil)
	if err != nil {
		return "", partError(c.col.dim.Name, segfmt.PartDictionary, err)
	}
	c.cache[id] = v
	return v, nil
}

func (c *DimCursor) load(row int) error {
	if err := c.cr.seg(row); err != nil {
		return err
	}
	if err := c.col.dict.check(); err != nil { // the ids are checked against its cardinality
		return err
	}
	i := c.cr.next(row)
	n := c.cr.ix.first(i+1) - c.cr.ix.first(i)
	card := c.col.Cardinality()
	maxRaw := 16 + 4*n
	if c.col.dim.MultiValue {
		maxRaw = 16 + 4*n + 4*maxChunkValues
	}
	raw, err := c.cr.load(i, maxRaw)
	if err == nil {
		var rest []byte
		c.ids = uint32Pool.Regrow(c.ids, n)
		switch {
		case c.col.derived:
			if len(raw) != 0 {
				err = corruptf("%d bytes in a chunk of derived ids", len(raw))
				break
			}
			return c.derive(i, n)
		case c.col.dim.MultiValue:
			c.offs = uint32Pool.Regrow(c.offs, n+1)
			c.ids, rest, err = decodeMultiIDs(c.ids[:0], raw, n, card, &c.offs)
		case c.col.perm != nil:
			if c.pd == nil {
				c.pd = newPlaneDecoder()
			}
			c.ids, rest, err = decodeRankedIDs(c.ids[:0], raw, n, c.col.perm, c.col.deltas, c.pd)
		default:
			c.ids, rest, err = decodeIDs(c.ids[:0], raw, n, card)
		}
		if err == nil && len(rest) != 0 {
			err = corruptf("%d trailing bytes", len(rest))
		}
		if err == nil {
			err = c.checkNulls()
		}
		if err != nil {
			err = fmt.Errorf("chunk %d: %w", i, err)
		}
	}
	if err != nil {
		c.cr.cur = -1
		return c.cr.readErr(partError(c.col.dim.Name, segfmt.PartIDs, err))
	}
	if c.cr.df != nil && c.cr.df.took(i) {
		var offs []uint32
		if c.col.dim.MultiValue {
			offs = c.offs
		}
		c.rows.chunk(c.cr.lo, c.ids, offs)
	}
	c.cr.cur = i
	return nil
}

// derive sets chunk i, of n rows, as the current one, its ids derived from the bitmaps: an
// error there blames the bitmaps part.
func (c *DimCursor) derive(i, n int) error {
	c.cr.cur = -1
	if err := c.col.bms.chk.checkCRC(); err != nil {
		return err
	}
	if c.dv == nil {
		c.dv = &deriver{}
	}
	c.ids = c.ids[:n]
	if err := c.dv.chunk(c.col, c.ids, c.cr.lo); err != nil {
		return partError(c.col.dim.Name, segfmt.PartBitmaps, fmt.Errorf("the ids of chunk %d: %w", i, err))
	}
	c.cr.cur = i
	return nil
}

// Release gives the cursor's buffers back to the package's pools, as Cursor.Release.
func (c *DimCursor) Release() {
	c.cr.release()
	uint32Pool.Put(c.ids)
	uint32Pool.Put(c.offs)
	c.ids, c.offs, c.dv = nil, nil, nil
}

// checkNulls checks that the null id only ever stands alone in a multi-value row.
func (c *DimCursor) checkNulls() error {
	if !c.col.dim.MultiValue || !c.col.dict.hasNull {
		return nil
	}
	for k := 0; k+1 < len(c.offs); k++ {
		lo, hi := c.offs[k], c.offs[k+1]
		if hi-lo > 1 {
			for _, id := range c.ids[lo:hi] {
				if id == 0 {
					return corruptf("row %d: the null id inside a multi-value row", c.cr.lo+k)
				}
			}
		}
	}
	return nil
}
