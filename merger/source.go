package merger

import (
	"fmt"

	"github.com/axiomhq/hyperloglog"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/columns"
)

// A source is what the merge core reads: a segment, or a Builder's rows being persisted. Row
// numbers are the source's own (for a Builder, the order rows were added); bitmaps and the
// merge's row maps use them. Readers are taken one per goroutine.
type source interface {
	schema() columns.Schema
	rows() int
	// timeOrder returns the row numbers in non-decreasing time order, or nil when the rows
	// already are (a segment).
	timeOrder() []uint32
	times() longChunker
	// dim returns a dictionary dimension, or nil when the source lacks it (or has it raw).
	dim(name string) dimSource
	// raw returns a raw dimension's reader, or nil when the source lacks it.
	raw(name string) rawReader
	long(name string) longChunker
	double(name string) doubleChunker
	sketch(name string) sketchReader
	// sketchMerger returns a hyperUnique metric's reader for queries, or nil.
	sketchMerger(name string) sketchMerger
}

// chunker reads a long or double column a chunk at a time.
type chunker[T int64 | float64] interface {
	Chunk(row int) (first int, vals []T, err error)
}

// The readers are shaped as columns' cursors, which satisfy them as they are.
type (
	longChunker   = chunker[int64]
	doubleChunker = chunker[float64]

	idChunker interface {
		Chunk(row int) (first int, ids, offs []uint32, err error)
	}
	rawReader interface {
		Bytes(row int) ([]byte, bool, error)
	}
	sketchReader interface {
		Bytes(row int) ([]byte, error)
	}
	dictIterator interface {
		Next() bool
		Value() string
		IsNull() bool
		Err() error
	}
)

type dimSource interface {
	hasNull() bool
	cardinality() int
	dictionary() dictIterator
	cursor() idChunker
	hasBitmaps() bool
	// eachRows hands sink the rows of id's bitmap in increasing order, in pieces of at most
	// len(buf) rows (the sink may change a piece: it is buf's memory).
	eachRows(id uint32, buf []uint32, sink rowSink) error
	multiValue() bool
	// For queries:
	// lookup returns the id of a non-null value.
	lookup(v string) (uint32, bool, error)
	// value returns the value of id and whether it is the null id.
	value(id uint32) (string, bool, error)
	// bitmap returns the rows holding id; the caller must not change it.
	bitmap(id uint32) (*roaring.Bitmap, error)
	// nulls returns the null rows; the caller must not change it.
	nulls() (*roaring.Bitmap, error)
}

// segSource reads a columns.Segment.
type segSource struct{ seg *columns.Segment }

func (s segSource) schema() columns.Schema { return s.seg.Schema() }
func (s segSource) rows() int              { return s.seg.Rows() }
func (s segSource) timeOrder() []uint32    { return nil }
func (s segSource) times() longChunker     { return s.seg.Time().Cursor() }

func (s segSource) dim(name string) dimSource {
	c, err := s.seg.Dim(name)
	if err != nil {
		return nil
	}
	return segDim{c, s.seg.Rows()}
}

func (s segSource) raw(name string) rawReader {
	c, err := s.seg.Raw(name)
	if err != nil {
		return nil
	}
	return c.Cursor()
}

func (s segSource) long(name string) longChunker {
	c, err := s.seg.Long(name)
	if err != nil {
		return nil
	}
	return c.Cursor()
}

func (s segSource) double(name string) doubleChunker {
	c, err := s.seg.Double(name)
	if err != nil {
		return nil
	}
	return c.Cursor()
}

func (s segSource) sketch(name string) sketchReader {
	c, err := s.seg.Sketch(name)
	if err != nil {
		return nil
	}
	return c.Cursor()
}

func (s segSource) sketchMerger(name string) sketchMerger {
	if r := s.sketch(name); r != nil {
		return &segSketches{r: r}
	}
	return nil
}

type segDim struct {
	c    *columns.DimColumn
	rows int
}

func (d segDim) hasNull() bool            { return d.c.HasNull() }
func (d segDim) cardinality() int         { return d.c.Cardinality() }
func (d segDim) dictionary() dictIterator { return d.c.Dictionary() }
func (d segDim) cursor() idChunker        { return d.c.Cursor() }
func (d segDim) hasBitmaps() bool         { return d.c.HasBitmaps() }

// eachRows decodes the rows straight from the bitmap's stored bytes (a view of the mapping
// for an opened segment) with the merger's checked decoder: no roaring.Bitmap is built.
func (d segDim) eachRows(id uint32, buf []uint32, sink rowSink) error {
	raw, err := d.c.BitmapBytes(id)
	if err != nil {
		return err
	}
	if err := eachRoaringRows(raw, uint64(d.rows), buf, sink); err != nil {
		return fmt.Errorf("dimension %q: bitmap %d: %w: %w", d.c.Dimension().Name, id, columns.ErrCorrupt, err)
	}
	return nil
}
func (d segDim) multiValue() bool                          { return d.c.Dimension().MultiValue }
func (d segDim) lookup(v string) (uint32, bool, error)     { return d.c.Lookup(v) }
func (d segDim) bitmap(id uint32) (*roaring.Bitmap, error) { return d.c.Bitmap(id) }
func (d segDim) nulls() (*roaring.Bitmap, error)           { return d.c.Nulls() }

func (d segDim) value(id uint32) (string, bool, error) {
	if d.c.IsNull(id) {
		return "", true, nil
	}
	v, err := d.c.Value(id)
	return v, false, err
}

// Chunk caches: a reader by row that decodes each chunk once when rows come in order.

type (
	longCache   = chunkCache[int64]
	doubleCache = chunkCache[float64]
)

// chunkCache reads a long or double column by row, keeping the chunk it read last.
type chunkCache[T int64 | float64] struct {
	c     chunker[T]
	first int
	vals  []T
}

func (l *chunkCache[T]) at(row int) (T, error) {
	if k := row - l.first; k >= 0 && k < len(l.vals) {
		return l.vals[k], nil
	}
	first, vals, err := l.c.Chunk(row)
	if err != nil {
		return 0, err
	}
	if k := row - first; k < 0 || k >= len(vals) {
		return 0, fmt.Errorf("merger: chunk at %d does not hold row %d", first, row)
	}
	l.first, l.vals = first, vals
	return vals[row-first], nil
}

type idCache struct {
	c     idChunker
	first int
	n     int
	ids   []uint32
	offs  []uint32
}

// at returns the ids of row: one for a single-value chunk.
func (l *idCache) at(row int) ([]uint32, error) {
	k := row - l.first
	if k < 0 || k >= l.n {
		first, ids, offs, err := l.c.Chunk(row)
		if err != nil {
			return nil, err
		}
		n := len(ids)
		if offs != nil {
			n = len(offs) - 1
		}
		if k = row - first; k < 0 || k >= n {
			return nil, fmt.Errorf("merger: chunk at %d does not hold row %d", first, row)
		}
		l.first, l.n, l.ids, l.offs = first, n, ids, offs
	}
	if l.offs == nil {
		return l.ids[k : k+1], nil
	}
	return l.ids[l.offs[k]:l.offs[k+1]], nil
}

// rowSink takes a bitmap's rows piece by piece.
type rowSink interface {
	rows(rs []uint32) error
}

// eachBitmapRows hands sink bm's rows in pieces of at most len(buf).
func eachBitmapRows(bm *roaring.Bitmap, buf []uint32, sink rowSink) error {
	if k := bm.GetCardinality(); k <= uint64(len(buf)) {
		out := buf[:k]
		bm.ToExistingArray(&out)
		return sink.rows(out)
	}
	it := bm.ManyIterator()
	for {
		k := it.NextMany(buf)
		if k == 0 {
			return nil
		}
		if err := sink.rows(buf[:k]); err != nil {
			return err
		}
	}
}

// unmarshalSketch decodes a serialized sketch into sk. Bad bytes are an error, never a panic:
// a panic inside the library is turned into one.
func unmarshalSketch(sk *hyperloglog.Sketch, b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("hyperloglog: decoder panicked: %v", r)
		}
	}()
	return sk.UnmarshalBinary(b)
}
