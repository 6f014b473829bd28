// Package source is the reading layer that package merger and package merger/query share: a
// Source is what a merge or a query reads (a segment, or a Builder's rows), chunk caches read
// a column by row, and bitmaps and sketches decode with checks (bad bytes are errors, never
// panics).
//
// Package merger implements Source for a *merger.Builder (its rows in memory, which need the
// builder's internals) and sets BuilderView, so that merger/query reads builders without
// merger exporting anything for queries.
package source

import (
	"errors"
	"fmt"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/bufpool"
)

// A Source is what the merge core and queries read: a segment, or a Builder's rows. Row
// numbers are the source's own (for a Builder, the order rows were added); bitmaps and the
// merge's row maps use them. Readers are taken one per goroutine.
type Source interface {
	Schema() columns.Schema
	Rows() int
	// TimeOrder returns the row numbers in non-decreasing time order, or nil when the rows
	// already are (a segment).
	TimeOrder() []uint32
	Times() LongChunker
	// Dim returns a dictionary dimension, or nil when the source lacks it (or has it raw); an
	// error when the dimension is there but unreadable (a damaged dictionary).
	Dim(name string) (DimSource, error)
	// Raw returns a raw dimension's reader, or nil when the source lacks it.
	Raw(name string) RawReader
	Long(name string) LongChunker
	Double(name string) DoubleChunker
	// MetricTimes returns the times stored with a first/last metric's values, or nil.
	MetricTimes(name string) LongChunker
	// Tails returns a doubleSum metric's exactness tails, or nil when the source has none (a
	// version 1 segment; every value exact).
	Tails(name string) TailReader
	Sketch(name string) SketchReader
	// MetricNulls returns the null rows of a long or double metric (the source's nulls
	// part), nil when it has none or lacks the metric; the caller must not change it. A
	// metric a source lacks reads as null everywhere (agg decides what a null means).
	MetricNulls(name string) (*roaring.Bitmap, error)
	// SketchMerger returns a sketch metric's reader for queries, or nil.
	SketchMerger(name string) SketchMerger
}

// BuilderView reports whether q is a *merger.Builder and, when it is, returns the function
// that opens the builder's query view: the view, and the function that releases it (the
// builder is read-locked until then). open is nil for a nil *Builder. Package merger sets
// BuilderView in an init function, so that package merger/query reads builders without merger
// exporting anything for queries; it is nil in a program that does not link merger, which then
// has no builder to pass.
var BuilderView func(q any) (open func() (src Source, release func()), ok bool)

// Chunker reads a long or double column a chunk at a time.
type Chunker[T columns.Number] interface {
	Chunk(row int) (first int, vals []T, err error)
}

// The readers are shaped as columns' cursors, which satisfy them as they are.
type (
	LongChunker   = Chunker[int64]
	DoubleChunker = Chunker[float64]

	IDChunker interface {
		Chunk(row int) (first int, ids, offs []uint32, err error)
	}
	RawReader interface {
		Bytes(row int) ([]byte, bool, error)
	}
	SketchReader interface {
		Bytes(row int) ([]byte, error)
	}
	// TailReader reads a doubleSum metric's exactness tails (columns.TailCursor's shape).
	TailReader interface {
		Tail(row int, dst []float64) ([]float64, error)
	}
	DictIterator interface {
		Next() bool
		Value() string
		IsNull() bool
		Err() error
	}
)

// DimSource is a dictionary dimension of a source.
type DimSource interface {
	HasNull() bool
	Cardinality() int
	Dictionary() DictIterator
	Cursor() IDChunker
	HasBitmaps() bool
	// EachRows hands sink the rows of id's bitmap in increasing order, in pieces of at most
	// len(buf) rows (the sink may change a piece: it is buf's memory).
	EachRows(id uint32, buf []uint32, sink RowSink) error
	MultiValue() bool
	// For queries:
	// Lookup returns the id of a non-null value.
	Lookup(v string) (uint32, bool, error)
	// Value returns the value of id and whether it is the null id.
	Value(id uint32) (string, bool, error)
	// Bitmap returns the rows holding id; the caller must not change it.
	Bitmap(id uint32) (*roaring.Bitmap, error)
	// Nulls returns the null rows; the caller must not change it.
	Nulls() (*roaring.Bitmap, error)
}

// SketchMerger adds a row's sketch to an accumulator: *acc nil is an empty one, which
// MergeRow may replace with a sketch of its own. A reader that defers work may also have a
// Flush() error method, which queries call once their rows are read.
type SketchMerger interface {
	MergeRow(row int, acc *agg.Sketch) error
}

// OfSegment returns seg as a Source. The readers it hands out keep their chunk buffers until
// Release gives them back.
func OfSegment(seg *columns.Segment) Source { return &segSource{seg: seg} }

// OfSegmentPages is OfSegment for a segment read with ReadAt over a mapping its caller made (a
// merge's intermediate segment, whose file is mapped and closed so that it holds no
// descriptor): columns.Segment.ReleasePages cannot reach that mapping, so ReleasePages calls
// release instead.
func OfSegmentPages(seg *columns.Segment, release func() error) Source {
	return &segSource{seg: seg, releasePages: release}
}

// ReleasePages takes the pages of the mapping src reads out of the process's resident set:
// columns.Segment.ReleasePages, or the function given to OfSegmentPages. Other sources (a
// Builder's rows) have none; for them it does nothing.
func ReleasePages(src Source) error {
	s := segOf(src)
	if s == nil {
		return nil
	}
	if s.releasePages != nil {
		return s.releasePages()
	}
	return s.seg.ReleasePages()
}

// SegmentOf returns the segment src reads, or nil when src is no segment (a Builder's rows).
func SegmentOf(src Source) *columns.Segment {
	if s, ok := src.(*segSource); ok {
		return s.seg
	}
	return nil
}

// Release gives the chunk buffers of every reader the sources handed out so far (columns'
// cursors), and the id maps IDMap made for them, back to the pools of internal/bufpool, for
// the next merge to reuse instead of allocating them on the Go heap again. Call it once
// nothing reads them any more: every reader, every slice one returned, and every id map is
// invalid after (a reader stays usable, taking new buffers). Sources other than segments are
// skipped; Release may be called again later.
func Release(srcs ...Source) {
	for _, src := range srcs {
		if sl, ok := src.(*sliceSource); ok {
			Release(sl.in)
			continue
		}
		if s, ok := src.(*segSource); ok {
			s.mu.Lock()
			rs, maps := s.readers, s.idMaps
			s.readers, s.idMaps = nil, nil
			s.mu.Unlock()
			for _, r := range rs {
				r.Release()
			}
			for _, m := range maps {
				bufpool.Uint32s.Put(m)
			}
		}
	}
}

// IDMap returns n uint32s for a merge's map from d's ids to merged ids. Their values are
// unspecified: the caller writes each before reading it. For a segment's dimension they come
// from a pool and go back with Release of the segment's Source, after which the map must not
// be used; for others they are allocated.
func IDMap(d DimSource, n int) []uint32 {
	sd, ok := d.(segDim)
	if !ok {
		return make([]uint32, n)
	}
	m := bufpool.Uint32s.Get(n)[:n]
	sd.src.mu.Lock()
	sd.src.idMaps = append(sd.src.idMaps, m)
	sd.src.mu.Unlock()
	return m
}

// DeferChecks makes the __time and ids readers src hands out from now on put off their
// parts' structural checks to a columns.Deferral, and its numeric metrics' readers their
// parts' CRC checks, for a reader that publishes nothing before JudgeChecks (a merge): the
// check is computed from the chunks the readers decode, not by a read of its own first.
// Sources other than segments are left as they are.
func DeferChecks(src Source) {
	if s := segOf(src); s != nil {
		s.mu.Lock()
		if s.deferral == nil {
			s.deferral = &columns.Deferral{}
		}
		s.mu.Unlock()
	}
}

// ReadSequentially makes the __time, ids and metric readers src hands out from now on read
// their columns front to back (columns' Sequential cursors: a large part of a mapped file
// through the descriptor, so that its pages do not count in the process's resident set), for
// a reader that reads each column once, in row order (a merge). Sources other than segments
// are left as they are.
func ReadSequentially(src Source) {
	if s := segOf(src); s != nil {
		s.mu.Lock()
		s.sequential = true
		s.mu.Unlock()
	}
}

// JudgeChecks returns the verdict of the checks src's readers put off since
// DeferChecks (columns.Deferral.Judge), and makes later readers check first again.
func JudgeChecks(src Source) error {
	s := segOf(src)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	d := s.deferral
	s.deferral = nil
	s.mu.Unlock()
	if d == nil {
		return nil
	}
	return d.Judge()
}

// segOf returns the segment source src reads, through a slice of one, or nil (a Builder's
// rows).
func segOf(src Source) *segSource {
	if sl, ok := src.(*sliceSource); ok {
		return segOf(sl.in)
	}
	s, _ := src.(*segSource)
	return s
}

// releaser is a columns cursor, whose buffers Release gives back.
type releaser interface{ Release() }

// segSource reads a columns.Segment and remembers the cursors it hands out and the id maps
// made for its dimensions, for Release.
type segSource struct {
	seg          *columns.Segment
	releasePages func() error // nil: seg.ReleasePages
	mu           sync.Mutex   // readers are taken from several goroutines
	readers      []releaser
	idMaps       [][]uint32
	deferral     *columns.Deferral // see DeferChecks
	sequential   bool              // see ReadSequentially
}

// isSequential reports whether s's readers read their columns front to back.
func (s *segSource) isSequential() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sequential
}

// seqNum makes c a sequential cursor when s's readers are (see ReadSequentially).
func seqNum[T columns.Number](s *segSource, c *columns.Cursor[T]) *columns.Cursor[T] {
	if s.isSequential() {
		c.Sequential()
	}
	return c
}

// deferralOf returns the Deferral of s's readers, nil when they check first.
func (s *segSource) deferralOf() *columns.Deferral {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deferral
}

// track remembers r for Release and returns it.
func track[R releaser](s *segSource, r R) R {
	s.mu.Lock()
	s.readers = append(s.readers, r)
	s.mu.Unlock()
	return r
}

func (s *segSource) Schema() columns.Schema { return s.seg.Schema() }
func (s *segSource) Rows() int              { return s.seg.Rows() }
func (s *segSource) TimeOrder() []uint32    { return nil }
func (s *segSource) Times() LongChunker {
	return track(s, seqNum(s, s.seg.Time().DeferredCursor(s.deferralOf())))
}

func (s *segSource) Dim(name string) (DimSource, error) {
	c, err := s.seg.Dim(name)
	if errors.Is(err, columns.ErrSchema) {
		return nil, nil // absent, or raw
	}
	if err != nil {
		return nil, err
	}
	return segDim{c: c, src: s}, nil
}

func (s *segSource) Raw(name string) RawReader {
	c, err := s.seg.Raw(name)
	if err != nil {
		return nil
	}
	return track(s, c.Cursor())
}

func (s *segSource) Long(name string) LongChunker {
	c, err := s.seg.Long(name)
	if err != nil {
		return nil
	}
	return track(s, seqNum(s, c.DeferredCursor(s.deferralOf())))
}

func (s *segSource) Double(name string) DoubleChunker {
	c, err := s.seg.Double(name)
	if err != nil {
		return nil
	}
	return track(s, seqNum(s, c.DeferredCursor(s.deferralOf())))
}

func (s *segSource) MetricTimes(name string) LongChunker {
	if c, err := s.seg.Long(name); err == nil && c.Times() != nil {
		return track(s, seqNum(s, c.Times().DeferredCursor(s.deferralOf())))
	}
	if c, err := s.seg.Double(name); err == nil && c.Times() != nil {
		return track(s, seqNum(s, c.Times().DeferredCursor(s.deferralOf())))
	}
	return nil
}

func (s *segSource) Tails(name string) TailReader {
	if c, err := s.seg.Double(name); err == nil && c.Tails() != nil {
		return track(s, c.Tails().Cursor())
	}
	return nil
}

func (s *segSource) MetricNulls(name string) (*roaring.Bitmap, error) {
	if c, err := s.seg.Long(name); err == nil {
		return c.Nulls()
	}
	if c, err := s.seg.Double(name); err == nil {
		return c.Nulls()
	}
	return nil, nil
}

func (s *segSource) Sketch(name string) SketchReader {
	c, err := s.seg.Sketch(name)
	if err != nil {
		return nil
	}
	return track(s, c.Cursor())
}

func (s *segSource) SketchMerger(name string) SketchMerger {
	c, err := s.seg.Sketch(name)
	if err != nil {
		return nil
	}
	cur := c.Cursor()
	return &segSketches{r: track(s, cur), sks: cur.Sketches()}
}

type segDim struct {
	c   *columns.DimColumn
	src *segSource // which tracks the cursors
}

func (d segDim) HasNull() bool            { return d.c.HasNull() }
func (d segDim) Cardinality() int         { return d.c.Cardinality() }
func (d segDim) Dictionary() DictIterator { return d.c.Dictionary() }
func (d segDim) Cursor() IDChunker {
	c := d.c.DeferredCursor(d.src.deferralOf())
	if d.src.isSequential() {
		c.Sequential()
	}
	return track(d.src, c)
}
func (d segDim) HasBitmaps() bool { return d.c.HasBitmaps() }

// EachRows decodes the rows straight from the bitmap's stored bytes (a view of the mapping
// for an opened segment) with columns' checked decoder: no roaring.Bitmap is built.
func (d segDim) EachRows(id uint32, buf []uint32, sink RowSink) error {
	return d.c.EachBitmapRows(id, buf, sink.Rows)
}
func (d segDim) MultiValue() bool                          { return d.c.Dimension().MultiValue }
func (d segDim) Lookup(v string) (uint32, bool, error)     { return d.c.Lookup(v) }
func (d segDim) Bitmap(id uint32) (*roaring.Bitmap, error) { return d.c.Bitmap(id) }
func (d segDim) Nulls() (*roaring.Bitmap, error)           { return d.c.Nulls() }

func (d segDim) Value(id uint32) (string, bool, error) {
	if d.c.IsNull(id) {
		return "", true, nil
	}
	v, err := d.c.Value(id)
	return v, false, err
}

// segSketches merges a segment's serialized sketches.
type segSketches struct {
	r   SketchReader
	sks agg.Sketches
}

func (s *segSketches) MergeRow(row int, acc *agg.Sketch) error {
	b, err := s.r.Bytes(row)
	if err != nil {
		return err
	}
	sk, err := s.sks.Decode(b)
	if err != nil {
		return fmt.Errorf("row %d: %w: %w", row, columns.ErrCorrupt, err)
	}
	if *acc == nil {
		*acc = sk
		return nil
	}
	return (*acc).Merge(sk)
}

// RowSink takes a bitmap's rows piece by piece.
type RowSink interface {
	Rows(rs []uint32) error
}

// EachBitmapRows hands sink bm's rows in pieces of at most len(buf).
func EachBitmapRows(bm *roaring.Bitmap, buf []uint32, sink RowSink) error {
	if k := bm.GetCardinality(); k <= uint64(len(buf)) {
		out := buf[:k]
		bm.ToExistingArray(&out)
		return sink.Rows(out)
	}
	it := bm.ManyIterator()
	for {
		k := it.NextMany(buf)
		if k == 0 {
			return nil
		}
		if err := sink.Rows(buf[:k]); err != nil {
			return err
		}
	}
}
