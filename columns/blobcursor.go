package columns

import (
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/writeout/writeout/internal/segfmt"
)

// Cursors over blob chunks: raw string dimensions (RawCursor) and, through blobCursor, sketch
// metrics and doubleSum tails.

// blobCursor reads blob chunks.
type blobCursor struct {
	name string
	part segfmt.PartKind // segfmt.PartValues or segfmt.PartTails, for errors
	cr   chunkReader
	offs []int   // value k of the chunk is data[offs[k]:offs[k+1]]
	lens []int64 // decodeBlobs' scratch
	data []byte  // the chunk's raw bytes
}

func (c *blobCursor) at(row int) ([]byte, error) {
	// The current chunk may be a view of the mapping: never touch it after Close.
	if row < c.cr.lo || row >= c.cr.hi || c.cr.cur < 0 || c.cr.src.closed {
		if err := c.load(row); err != nil {
			return nil, err
		}
	}
	k := row - c.cr.lo
	return c.data[c.offs[k]:c.offs[k+1]:c.offs[k+1]], nil
}

func (c *blobCursor) load(row int) error {
	if err := c.cr.seg(row); err != nil {
		return err
	}
	i := c.cr.next(row)
	raw, err := c.cr.load(i, maxChunkBytes)
	if err == nil {
		var rest []byte
		n := c.cr.ix.first(i+1) - c.cr.ix.first(i)
		c.offs = intPool.Regrow(c.offs, n+1)
		c.lens = int64Pool.Regrow(c.lens, n)
		c.offs, rest, err = decodeBlobs(c.offs, raw, n, &c.lens)
		if err == nil && len(rest) != 0 {
			err = corruptf("blob chunk: lengths add up to %d, have %d bytes", c.offs[len(c.offs)-1]-c.offs[0], len(raw)-c.offs[0])
		}
		c.data = raw
		if err != nil {
			err = fmt.Errorf("chunk %d: %w", i, err)
		}
	}
	if err != nil {
		c.cr.cur = -1
		return partError(c.name, partOr(c.part), err)
	}
	c.cr.cur = i
	return nil
}

// Release gives the cursor's buffers back to the package's pools, as Cursor.Release.
func (c *blobCursor) Release() {
	c.cr.release()
	intPool.Put(c.offs)
	int64Pool.Put(c.lens)
	c.offs, c.lens, c.data = nil, nil, nil
}

// RawColumn is a raw string dimension.
type RawColumn struct {
	seg   *Segment
	dim   Dimension
	ix    *chunkIndex
	nulls *partCheck
}

// Nulls returns the null rows.
func (c *RawColumn) Nulls() (*roaring.Bitmap, error) { return c.seg.readNulls(c.dim.Name, c.nulls) }

// Cursor returns a new cursor over the column.
func (c *RawColumn) Cursor() *RawCursor {
	return &RawCursor{blobCursor: blobCursor{name: c.dim.Name, cr: newChunkReader(&c.seg.src, c.ix)}, col: c}
}

// RawCursor reads a raw dimension chunk by chunk; one goroutine at a time.
type RawCursor struct {
	blobCursor
	col   *RawColumn
	nulls *roaring.Bitmap
}

// Bytes returns the value of row, valid until the cursor's next call, and whether it is
// non-null.
func (c *RawCursor) Bytes(row int) ([]byte, bool, error) {
	if c.nulls == nil {
		bm, err := c.col.Nulls()
		if err != nil {
			return nil, false, err
		}
		c.nulls = bm
	}
	b, err := c.at(row)
	if err != nil {
		return nil, false, err
	}
	if c.nulls.Contains(uint32(row)) {
		return nil, false, nil
	}
	return b, true, nil
}

// At returns the value of row and whether it is non-null.
func (c *RawCursor) At(row int) (string, bool, error) {
	b, ok, err := c.Bytes(row)
	return string(b), ok, err
}
