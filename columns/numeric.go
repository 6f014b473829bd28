package columns

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/writeout/writeout/internal/segfmt"
)

// Number is the value type of a numeric column: int64 (__time, long metrics, the times of a
// first/last metric) or float64 (double metrics).
type Number interface{ int64 | float64 }

// numericMaxRaw bounds a numeric chunk's raw bytes, from its row count.
func numericMaxRaw(rows int) int { return 32 + 8*rows }

// Column is a numeric column: __time, a long or double metric, or the times stored with a
// first/last metric's values. Segment.Time, Segment.Long and Segment.Double return one.
type Column[T Number] struct {
	seg   *Segment
	name  string
	ix    *chunkIndex
	part  segfmt.PartKind // segfmt.PartValues, or segfmt.PartTimes
	times *Column[int64]  // a first/last metric's times
	tails *TailColumn     // a doubleSum metric's exactness tails
	nulls *partCheck      // a metric's nulls part (version 3), nil when it has no null row
}

// hasNulls reports whether the column is a metric with at least one null row (a segment of
// format version 3 with the metric's nulls part). It reads nothing.
func (c *Column[T]) hasNulls() bool { return c.nulls != nil }

// Nulls returns a metric's null rows, newly decoded (the caller may change it), or nil when it
// has none: always so for __time, the times of a first/last metric, and segments before format
// version 3. A null row stores 0 (+0 for a double), with the time 0 for a first/last metric and
// an empty tail for a doubleSum.
func (c *Column[T]) Nulls() (*roaring.Bitmap, error) {
	if c.nulls == nil {
		return nil, nil
	}
	return c.seg.readNulls(c.name, c.nulls)
}

// Times returns the times stored with a first/last metric's values (segfmt.PartTimes), row by row;
// nil for other columns.
func (c *Column[T]) Times() *Column[int64] { return c.times }

// Tails returns a doubleSum metric's exactness tails (segfmt.PartTails); nil for other columns and
// for segments of format version 1, whose sums were stored rounded only.
func (c *Column[T]) Tails() *TailColumn { return c.tails }

// Cursor returns a new cursor over the column.
func (c *Column[T]) Cursor() *Cursor[T] {
	return &Cursor[T]{name: c.name, part: c.part, cr: newChunkReader(&c.seg.src, c.ix), decode: numDecoder[T](), pd: planesOf(c.ix)}
}

// Get returns one row's value, decoding its chunk; use a cursor for more than a few rows.
func (c *Column[T]) Get(row int) (T, error) { return c.Cursor().At(row) }

// Cursor reads a numeric column, keeping the last chunk it decoded: sequential reads decode
// each chunk once. Use it from one goroutine at a time.
type Cursor[T Number] struct {
	name string
	part segfmt.PartKind // segfmt.PartValues or segfmt.PartTimes, for errors
	cr   chunkReader
	vals []T
	ints []int64 // decode's scratch
	// decode appends the n values of a chunk's raw bytes to dst and returns the bytes after
	// them; pd decodes the planes form of a version 4 part (nil for other parts).
	decode func(dst []T, src []byte, n int, scratch *[]int64, pd *planeDecoder) ([]T, []byte, error)
	pd     *planeDecoder
	// times: what the __time column's structural check gathers, when put off (see Deferral).
	times *timeRowsState
	// bound, when bounded, is at least the magnitude of every value in vals (see Bound).
	bound   uint64
	bounded bool
}

// Bound returns m with |v| <= m for every value of the chunk the cursor read last, when the
// chunk's encoding gives one from its header (an int64 chunk of a constant, a frame of
// reference or a delta chain, with m below 2^62); ok is false otherwise. A sum of n such
// values cannot leave the int64 range while n*m does not.
func (c *Cursor[T]) Bound() (m uint64, ok bool) { return c.bound, c.bounded }

// Sequential makes c a cursor for a reader that reads the column front to back once (a
// merge): a large part of a mapped file is read through the descriptor, a window at a time,
// and its pages do not count in the reader's resident set. Call it before the first read; it
// returns c.
func (c *Cursor[T]) Sequential() *Cursor[T] {
	c.cr.sequential()
	return c
}

// At returns the value of row.
func (c *Cursor[T]) At(row int) (T, error) {
	if row < c.cr.lo || row >= c.cr.hi || c.cr.cur < 0 {
		if err := c.load(row); err != nil {
			return 0, err
		}
	}
	return c.vals[row-c.cr.lo], nil
}

// Chunk returns the values of the Chunk holding row, and the row of its first value. The slice
// is valid until the cursor's next call.
func (c *Cursor[T]) Chunk(row int) (first int, vals []T, err error) {
	if row < c.cr.lo || row >= c.cr.hi || c.cr.cur < 0 {
		if err := c.load(row); err != nil {
			return 0, nil, err
		}
	}
	return c.cr.lo, c.vals, nil
}

func (c *Cursor[T]) load(row int) error {
	if err := c.cr.seg(row); err != nil {
		return err
	}
	i := c.cr.next(row)
	n := c.cr.ix.first(i+1) - c.cr.ix.first(i)
	raw, err := c.cr.load(i, numericMaxRaw(n))
	if err == nil {
		var rest []byte
		c.vals = numPool[T]().Regrow(c.vals, n)
		c.vals, rest, err = c.decode(c.vals, raw, n, &c.ints, c.pd)
		if err == nil && len(rest) != 0 {
			err = corruptf("%d trailing bytes", len(rest))
		}
		c.bounded = false
		if _, ints := any(c.vals).([]int64); ints && err == nil {
			c.bound, c.bounded = int64Bound(raw)
		}
		if err != nil {
			err = fmt.Errorf("chunk %d: %w", i, err)
		}
	}
	if err != nil {
		c.cr.cur = -1
		return c.cr.readErr(partError(c.name, partOr(c.part), err))
	}
	if df := c.cr.df; df != nil && df.took(i) {
		// The times' deferred check (see Deferral): a chunk that breaks it fails the read.
		if err := c.times.chunk(c.cr.lo, any(c.vals).([]int64)); err != nil {
			c.cr.cur = -1
			err = c.cr.ix.chk.seg.timeErr(err)
			if rerr := c.cr.readErr(err); rerr != err {
				return rerr // the part's CRC: the bytes are not the ones written
			}
			return df.fail(err)
		}
	}
	c.cr.cur = i
	return nil
}

// Release gives the cursor's buffers back to the package's pools, for the next cursor of any
// segment to reuse: call it when done with a cursor that read many rows (a merge's). Every
// slice the cursor returned is invalid after; the cursor itself stays usable (it takes new
// buffers), and a second Release does nothing more.
func (c *Cursor[T]) Release() {
	c.cr.release()
	numPool[T]().Put(c.vals)
	int64Pool.Put(c.ints)
	c.vals, c.ints = nil, nil
}

// planesOf returns a plane decoder for a part in a version 4 encoding, else nil: the planes
// form is then refused as an unknown encoding.
func planesOf(ix *chunkIndex) *planeDecoder {
	if isV4Encoding(ix.part.Encoding) {
		return newPlaneDecoder()
	}
	return nil
}

// TailColumn holds, for each row of a doubleSum metric, the terms that, added to the row's
// value, give the exact sum it was rounded from: empty when the value is exact (see
// columns/agg, ExactSum.Tail). Each row's bytes are its terms as little-endian float64s.
type TailColumn struct {
	seg  *Segment
	name string
	ix   *chunkIndex
}

// Cursor returns a new cursor over the column.
func (c *TailColumn) Cursor() *TailCursor {
	return &TailCursor{blobCursor{name: c.name, part: segfmt.PartTails, cr: newChunkReader(&c.seg.src, c.ix)}}
}

// TailCursor reads a tail column chunk by chunk; one goroutine at a time.
type TailCursor struct{ blobCursor }

// Tail appends row's terms to dst. Bad bytes (a length not a multiple of 8, a term that is
// zero or not finite) are an error wrapping ErrCorrupt.
func (c *TailCursor) Tail(row int, dst []float64) ([]float64, error) {
	b, err := c.at(row)
	if err != nil {
		return dst, err
	}
	if len(b)%8 != 0 {
		return dst, partError(c.name, segfmt.PartTails, corruptf("row %d: tail of %d bytes, not whole float64s", row, len(b)))
	}
	for ; len(b) > 0; b = b[8:] {
		x := math.Float64frombits(binary.LittleEndian.Uint64(b))
		if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
			return dst, partError(c.name, segfmt.PartTails, corruptf("row %d: tail term %v", row, x))
		}
		dst = append(dst, x)
	}
	return dst, nil
}
