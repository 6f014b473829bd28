package source

import (
	"errors"
	"fmt"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
)

// Slice returns rows [lo, hi) of src as a Source of hi-lo rows, row lo of src its row 0. src
// must hold its rows in time order (a segment: TimeOrder nil), so that the slice does too.
//
// A dictionary dimension of the slice holds only the values its rows hold: its ids are dense
// again, in the order of src's (so its dictionary stays sorted), and its null id is there only
// when a row of the slice is null. Finding them reads the dimension's ids over the slice once,
// when the dimension is first asked for. Everything else reads src through, rows shifted by
// lo: bitmaps and null rows are clipped to the slice.
//
// Release and ReleasePages of the slice act on src; SegmentOf is nil (the slice is not the
// whole segment), Base returns src's segment.
func Slice(src Source, lo, hi int) (Source, error) {
	if src.TimeOrder() != nil {
		return nil, fmt.Errorf("source: slice of a source whose rows are not in time order: %w", columns.ErrInvalid)
	}
	if lo < 0 || hi <= lo || hi > src.Rows() {
		return nil, fmt.Errorf("source: rows [%d, %d) of a source of %d rows: %w", lo, hi, src.Rows(), columns.ErrInvalid)
	}
	return &sliceSource{in: src, lo: lo, hi: hi, dims: map[string]*sliceDim{}, nulls: map[string]*roaring.Bitmap{}}, nil
}

// Base returns the segment src reads, whole or a slice of it, or nil when src reads no segment.
func Base(src Source) *columns.Segment {
	if s, ok := src.(*sliceSource); ok {
		return Base(s.in)
	}
	return SegmentOf(src)
}

type sliceSource struct {
	in     Source
	lo, hi int
	mu     sync.Mutex // guards dims and nulls: readers are taken from several goroutines
	dims   map[string]*sliceDim
	nulls  map[string]*roaring.Bitmap
}

func (s *sliceSource) Schema() columns.Schema { return s.in.Schema() }
func (s *sliceSource) Rows() int              { return s.hi - s.lo }
func (s *sliceSource) TimeOrder() []uint32    { return nil }
func (s *sliceSource) Times() LongChunker     { return clipChunks(s.in.Times(), s.lo, s.hi) }

func (s *sliceSource) Long(name string) LongChunker { return clipChunks(s.in.Long(name), s.lo, s.hi) }

func (s *sliceSource) Double(name string) DoubleChunker {
	return clipChunks(s.in.Double(name), s.lo, s.hi)
}

func (s *sliceSource) MetricTimes(name string) LongChunker {
	return clipChunks(s.in.MetricTimes(name), s.lo, s.hi)
}

func (s *sliceSource) Raw(name string) RawReader {
	r := s.in.Raw(name)
	if r == nil {
		return nil
	}
	return shiftedRaw{r, s.lo}
}

func (s *sliceSource) Tails(name string) TailReader {
	r := s.in.Tails(name)
	if r == nil {
		return nil
	}
	return shiftedTails{r, s.lo}
}

func (s *sliceSource) Sketch(name string) SketchReader {
	r := s.in.Sketch(name)
	if r == nil {
		return nil
	}
	return shiftedSketch{r, s.lo}
}

func (s *sliceSource) SketchMerger(name string) SketchMerger {
	m := s.in.SketchMerger(name)
	if m == nil {
		return nil
	}
	return &shiftedMerger{m, s.lo}
}

func (s *sliceSource) MetricNulls(name string) (*roaring.Bitmap, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if bm, ok := s.nulls[name]; ok {
		return bm, nil
	}
	bm, err := s.in.MetricNulls(name)
	if err != nil || bm == nil {
		return bm, err
	}
	clipped := clipBitmap(bm, s.lo, s.hi)
	if clipped.IsEmpty() {
		clipped = nil // as a source with no null row
	}
	s.nulls[name] = clipped
	return clipped, nil
}

func (s *sliceSource) Dim(name string) (DimSource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.dims[name]; ok {
		return d, nil
	}
	in, err := s.in.Dim(name)
	if err != nil || in == nil {
		return nil, err
	}
	d, err := newSliceDim(in, s.lo, s.hi)
	if err != nil {
		return nil, fmt.Errorf("dimension %s: %w", name, err)
	}
	s.dims[name] = d
	return d, nil
}

// clipChunks returns the chunker of rows [lo, hi) of c, nil when c is.
func clipChunks[T columns.Number](c Chunker[T], lo, hi int) Chunker[T] {
	if c == nil {
		return nil
	}
	return &clipped[T]{in: c, lo: lo, hi: hi}
}

type clipped[T columns.Number] struct {
	in     Chunker[T]
	lo, hi int
}

func (c *clipped[T]) Chunk(row int) (int, []T, error) {
	at := row + c.lo
	if row < 0 || at >= c.hi {
		return 0, nil, fmt.Errorf("source: row %d of a slice of %d rows: %w", row, c.hi-c.lo, columns.ErrInvalid)
	}
	first, vals, err := c.in.Chunk(at)
	if err != nil {
		return 0, nil, err
	}
	start, end := max(first, c.lo), min(first+len(vals), c.hi)
	if at < start || at >= end {
		return 0, nil, fmt.Errorf("source: chunk at %d does not hold row %d: %w", first, at, columns.ErrCorrupt)
	}
	return start - c.lo, vals[start-first : end-first], nil
}

type shiftedRaw struct {
	in RawReader
	lo int
}

func (r shiftedRaw) Bytes(row int) ([]byte, bool, error) { return r.in.Bytes(row + r.lo) }

type shiftedTails struct {
	in TailReader
	lo int
}

func (r shiftedTails) Tail(row int, dst []float64) ([]float64, error) {
	return r.in.Tail(row+r.lo, dst)
}

type shiftedSketch struct {
	in SketchReader
	lo int
}

func (r shiftedSketch) Bytes(row int) ([]byte, error) { return r.in.Bytes(row + r.lo) }

type shiftedMerger struct {
	in SketchMerger
	lo int
}

func (m *shiftedMerger) MergeRow(row int, acc *agg.Sketch) error { return m.in.MergeRow(row+m.lo, acc) }

// Flush flushes the merger beneath, when it defers work.
func (m *shiftedMerger) Flush() error {
	if f, ok := m.in.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

// clipBitmap returns the rows of bm in [lo, hi), less lo.
func clipBitmap(bm *roaring.Bitmap, lo, hi int) *roaring.Bitmap {
	out := roaring.New()
	it := bm.Iterator()
	it.AdvanceIfNeeded(uint32(lo))
	buf := make([]uint32, 0, 1024)
	for it.HasNext() {
		r := it.Next()
		if int(r) >= hi {
			break
		}
		if buf = append(buf, r-uint32(lo)); len(buf) == cap(buf) {
			out.AddMany(buf)
			buf = buf[:0]
		}
	}
	out.AddMany(buf)
	return out
}

// noID marks an id of the source beneath that no row of the slice holds.
const noID = ^uint32(0)

// sliceDim is a dictionary dimension of a slice: the ids its rows hold, renumbered densely.
type sliceDim struct {
	in      DimSource
	lo, hi  int
	toNew   []uint32 // id beneath -> id of the slice, noID when unused
	toOld   []uint32 // id of the slice -> id beneath
	hasNull bool
}

func newSliceDim(in DimSource, lo, hi int) (*sliceDim, error) {
	card := in.Cardinality()
	used := make([]bool, card)
	cur := in.Cursor()
	for row := lo; row < hi; {
		first, ids, offs, err := cur.Chunk(row)
		if err != nil {
			return nil, err
		}
		n := len(ids)
		if offs != nil {
			n = len(offs) - 1
		}
		end := min(first+n, hi)
		if row < first || row >= end {
			return nil, fmt.Errorf("chunk at %d does not hold row %d: %w", first, row, columns.ErrCorrupt)
		}
		held := ids[row-first : end-first]
		if offs != nil {
			held = ids[offs[row-first]:offs[end-first]]
		}
		for _, id := range held {
			if int(id) >= card {
				return nil, fmt.Errorf("row id %d at or above the cardinality %d: %w", id, card, columns.ErrCorrupt)
			}
			used[id] = true
		}
		row = end
	}
	d := &sliceDim{in: in, lo: lo, hi: hi, toNew: make([]uint32, card)}
	for id, u := range used {
		if !u {
			d.toNew[id] = noID
			continue
		}
		d.toNew[id] = uint32(len(d.toOld))
		d.toOld = append(d.toOld, uint32(id))
	}
	d.hasNull = in.HasNull() && used[0]
	return d, nil
}

func (d *sliceDim) HasNull() bool     { return d.hasNull }
func (d *sliceDim) Cardinality() int  { return len(d.toOld) }
func (d *sliceDim) HasBitmaps() bool  { return d.in.HasBitmaps() }
func (d *sliceDim) MultiValue() bool  { return d.in.MultiValue() }
func (d *sliceDim) Cursor() IDChunker { return &sliceIDs{d: d, in: d.in.Cursor()} }

func (d *sliceDim) Dictionary() DictIterator {
	return &sliceDict{in: d.in.Dictionary(), toNew: d.toNew, id: -1}
}

func (d *sliceDim) old(id uint32) (uint32, error) {
	if int(id) >= len(d.toOld) {
		return 0, fmt.Errorf("source: id %d of a slice's dimension of cardinality %d: %w", id, len(d.toOld), columns.ErrInvalid)
	}
	return d.toOld[id], nil
}

func (d *sliceDim) EachRows(id uint32, buf []uint32, sink RowSink) error {
	old, err := d.old(id)
	if err != nil {
		return err
	}
	clip := &clipSink{lo: uint32(d.lo), hi: uint32(d.hi), sink: sink}
	if err := d.in.EachRows(old, buf, clip); err != nil && !errors.Is(err, errPastSlice) {
		return err
	}
	return nil
}

func (d *sliceDim) Lookup(v string) (uint32, bool, error) {
	old, ok, err := d.in.Lookup(v)
	if err != nil || !ok || d.toNew[old] == noID {
		return 0, false, err
	}
	return d.toNew[old], true, nil
}

func (d *sliceDim) Value(id uint32) (string, bool, error) {
	old, err := d.old(id)
	if err != nil {
		return "", false, err
	}
	return d.in.Value(old)
}

func (d *sliceDim) Bitmap(id uint32) (*roaring.Bitmap, error) {
	old, err := d.old(id)
	if err != nil {
		return nil, err
	}
	bm, err := d.in.Bitmap(old)
	if err != nil {
		return nil, err
	}
	return clipBitmap(bm, d.lo, d.hi), nil
}

func (d *sliceDim) Nulls() (*roaring.Bitmap, error) {
	bm, err := d.in.Nulls()
	if err != nil || bm == nil {
		return bm, err
	}
	return clipBitmap(bm, d.lo, d.hi), nil
}

// errPastSlice stops a bitmap's rows once they pass the slice's end.
var errPastSlice = errors.New("source: past the slice")

// clipSink passes on the rows in [lo, hi), less lo.
type clipSink struct {
	lo, hi uint32
	sink   RowSink
}

func (c *clipSink) Rows(rs []uint32) error {
	i := 0
	for i < len(rs) && rs[i] < c.lo {
		i++
	}
	j := i
	for j < len(rs) && rs[j] < c.hi {
		rs[j] -= c.lo
		j++
	}
	if j > i {
		if err := c.sink.Rows(rs[i:j]); err != nil {
			return err
		}
	}
	if j < len(rs) {
		return errPastSlice
	}
	return nil
}

// sliceIDs is a slice's id cursor: the ids beneath, clipped to the slice and renumbered.
type sliceIDs struct {
	d         *sliceDim
	in        IDChunker
	ids, offs []uint32
}

func (c *sliceIDs) Chunk(row int) (int, []uint32, []uint32, error) {
	lo, hi := c.d.lo, c.d.hi
	at := row + lo
	if row < 0 || at >= hi {
		return 0, nil, nil, fmt.Errorf("source: row %d of a slice of %d rows: %w", row, hi-lo, columns.ErrInvalid)
	}
	first, ids, offs, err := c.in.Chunk(at)
	if err != nil {
		return 0, nil, nil, err
	}
	n := len(ids)
	if offs != nil {
		n = len(offs) - 1
	}
	start, end := max(first, lo), min(first+n, hi)
	if at < start || at >= end {
		return 0, nil, nil, fmt.Errorf("source: chunk at %d does not hold row %d: %w", first, at, columns.ErrCorrupt)
	}
	held := ids[start-first : end-first]
	c.offs = c.offs[:0]
	if offs != nil {
		base := offs[start-first]
		held = ids[base:offs[end-first]]
		for _, o := range offs[start-first : end-first+1] {
			c.offs = append(c.offs, o-base)
		}
	}
	c.ids = c.ids[:0]
	for _, id := range held {
		if int(id) >= len(c.d.toNew) || c.d.toNew[id] == noID {
			return 0, nil, nil, fmt.Errorf("source: id %d at row %d: %w", id, at, columns.ErrCorrupt)
		}
		c.ids = append(c.ids, c.d.toNew[id])
	}
	if offs == nil {
		return start - lo, c.ids, nil, nil
	}
	return start - lo, c.ids, c.offs, nil
}

// sliceDict walks the dictionary beneath, skipping the values no row of the slice holds.
type sliceDict struct {
	in    DictIterator
	toNew []uint32
	id    int // id beneath of the current value
}

func (it *sliceDict) Next() bool {
	for it.in.Next() {
		it.id++
		if it.id < len(it.toNew) && it.toNew[it.id] != noID {
			return true
		}
		if it.id >= len(it.toNew) {
			return true // more values than the cardinality: the merge reports it
		}
	}
	return false
}

func (it *sliceDict) Value() string { return it.in.Value() }
func (it *sliceDict) IsNull() bool  { return it.in.IsNull() }
func (it *sliceDict) Err() error    { return it.in.Err() }
