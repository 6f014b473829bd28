package columns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/axiomhq/hyperloglog"

	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// WriterOptions configure a Writer. The zero value is the default.
type WriterOptions struct {
	// Medium stages the parts. The writer takes a child of it (NewChild) and closes the child
	// when it finishes or aborts; the medium itself stays the caller's. Nil means a heap medium
	// owned by the writer.
	Medium medium.Medium
	// Compression of chunked parts; each chunk is stored compressed only when that is smaller.
	// The default is s2 (see the benchmarks in columns/*_timing_test.go for why).
	Compression Compression
	// ChunkRows is the number of rows per chunk of values and ids: 1 to 65536, default 4096.
	ChunkRows int
}

func (o *WriterOptions) ensureDefaults() error {
	if o.Compression == CompressionDefault {
		o.Compression = CompressionS2
	}
	if o.Compression > CompressionS2 {
		return fmt.Errorf("columns: writer: unknown compression %d: %w", o.Compression, medium.ErrInvalid)
	}
	if o.ChunkRows == 0 {
		o.ChunkRows = DefaultChunkRows
	}
	if o.ChunkRows < 1 || o.ChunkRows > maxChunkRows {
		return fmt.Errorf("columns: writer: ChunkRows %d outside [1, %d]: %w", o.ChunkRows, maxChunkRows, medium.ErrInvalid)
	}
	return nil
}

// Row is one row for Writer.AddRow and Segment.ReadRow.
type Row struct {
	Time int64
	// Dims holds one entry per schema dimension, in schema order: the row's values, nil (or
	// empty) for null. A single-value dimension holds at most one value.
	Dims [][]string
	// Metrics holds one entry per schema metric, in schema order.
	Metrics []Value
}

// Value is one metric value: Long for long metrics (count included), Double for double metrics,
// Sketch for hyperUnique metrics (nil is written as an empty sketch).
type Value struct {
	Long   int64
	Double float64
	Sketch *hyperloglog.Sketch
}

// stage is one part being staged in a medium.Bytes, with its CRC-32C and size kept as it is
// written. Its first error is sticky.
type stage struct {
	b    medium.Bytes
	spec partSpec
	name string
	crc  uint32
	n    int64
	err  error
}

// Write implements io.Writer (for roaring's WriteTo).
func (s *stage) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	k, err := s.b.Write(p)
	s.crc = crc32.Update(s.crc, castagnoli, p[:k])
	s.n += int64(k)
	if err == nil && k != len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return k, s.fail(err)
	}
	return k, nil
}

func (s *stage) write(p []byte) error {
	_, err := s.Write(p)
	return err
}

func (s *stage) fail(err error) error {
	if s.err == nil {
		s.err = fmt.Errorf("columns: column %q part %s: stage: %w", s.name, s.spec.kind, err)
	}
	return s.err
}

// Writer builds one segment: parts are staged in a medium, then Finish publishes them as one
// file (or FinishTo streams them to any io.Writer).
//
// It is fed one of two ways, not both:
//   - AddRow, a row at a time: the writer builds dictionaries and bitmaps itself, holding the
//     dimension ids of every row in memory until Finish. Not for a Rollup schema: AddRow does
//     not roll rows up.
//   - Column at a time, through the writers Time, Dim, Raw, Long, Double and Sketch return, for
//     the merger: memory stays bounded; see DimWriter for the order dictionary dimensions take.
//     Distinct column writers may be used from different goroutines at the same time; one
//     column writer is used by one goroutine at a time.
//
// Rows must come in non-decreasing time order, each time truncated to the schema's granularity.
// The segment's interval is Granularity.Interval of the first and last times (the zero
// Interval without rows). Every column must end with the same number of rows. Finish or Abort
// must be called; after either, every call fails.
type Writer struct {
	schema  Schema
	opts    WriterOptions
	med     medium.Medium
	owned   bool // med is the writer's own heap, not a child
	stages  []*stage
	time    *LongWriter
	dims    []*DimWriter // nil for raw dimensions
	raws    []*RawWriter // nil for dictionary dimensions
	longs   []*LongWriter
	doubles []*DoubleWriter
	sketch  []*SketchWriter
	rowDims []*rowDim // AddRow buffers, one per dictionary dimension
	mode    int       // 0 unused, 1 rows, 2 columns
	err     error
	done    bool
	calls   *sys.Calls
}

const (
	modeNone = iota
	modeRows
	modeColumns
)

// NewWriter returns a writer for segments of the schema, which it validates.
func NewWriter(schema Schema, opts WriterOptions) (*Writer, error) {
	if err := schema.Validate(); err != nil {
		return nil, err
	}
	if err := opts.ensureDefaults(); err != nil {
		return nil, err
	}
	w := &Writer{schema: schema.Clone(), opts: opts, calls: &sys.Default}
	if opts.Medium == nil {
		w.med, w.owned = medium.NewHeap(), true
	} else {
		child, err := opts.Medium.NewChild()
		if err != nil {
			return nil, fmt.Errorf("columns: writer: %w", err)
		}
		w.med = child
	}
	for _, spec := range layout(w.schema, Version) {
		b, err := w.med.NewBytes()
		if err != nil {
			return nil, multierr.Join(fmt.Errorf("columns: writer: %w", err), w.med.Close())
		}
		w.stages = append(w.stages, &stage{b: b, spec: spec, name: columnName(w.schema, spec.column)})
	}
	find := func(c int, k PartKind) *stage {
		for _, s := range w.stages {
			if s.spec.column == c && s.spec.kind == k {
				return s
			}
		}
		return nil
	}
	cw := func(c int) chunkedWriter {
		return chunkedWriter{st: find(c, PartValues), comp: opts.Compression}
	}
	w.time = &LongWriter{cw: cw(0), chunkRows: opts.ChunkRows, isTime: true, gran: w.schema.Granularity}
	w.dims = make([]*DimWriter, len(schema.Dimensions))
	w.raws = make([]*RawWriter, len(schema.Dimensions))
	for i, d := range w.schema.Dimensions {
		c := 1 + i
		if d.Raw {
			w.raws[i] = &RawWriter{blobWriter: blobWriter{cw: cw(c), chunkRows: opts.ChunkRows}, nullsSt: find(c, PartNulls), nulls: roaring.New()}
			continue
		}
		dw := &DimWriter{
			dim:       d,
			chunkRows: opts.ChunkRows,
			dict:      dictWriter{st: find(c, PartDictionary)},
			ids:       chunkedWriter{st: find(c, PartIDs), comp: opts.Compression},
			nullsSt:   find(c, PartNulls),
			nulls:     roaring.New(),
		}
		if !d.NoBitmapIndex {
			dw.bitmaps = &bitmapsWriter{st: find(c, PartBitmaps)}
		}
		w.dims[i] = dw
	}
	for i, m := range w.schema.Metrics {
		c := 1 + len(schema.Dimensions) + i
		var times *LongWriter
		if m.Agg().Timed() {
			times = &LongWriter{cw: chunkedWriter{st: find(c, PartTimes), comp: opts.Compression}, chunkRows: opts.ChunkRows}
		}
		switch m.ValueType() {
		case MetricLong:
			w.longs = append(w.longs, &LongWriter{cw: cw(c), chunkRows: opts.ChunkRows, times: times})
			w.doubles, w.sketch = append(w.doubles, nil), append(w.sketch, nil)
		case MetricDouble:
			dw := &DoubleWriter{cw: cw(c), chunkRows: opts.ChunkRows, times: times}
			if m.Agg().Exact() {
				dw.tails = &blobWriter{cw: chunkedWriter{st: find(c, PartTails), comp: opts.Compression}, chunkRows: opts.ChunkRows}
			}
			w.doubles = append(w.doubles, dw)
			w.longs, w.sketch = append(w.longs, nil), append(w.sketch, nil)
		case MetricHyperUnique:
			w.sketch = append(w.sketch, &SketchWriter{blobWriter: blobWriter{cw: cw(c), chunkRows: opts.ChunkRows}})
			w.longs, w.doubles = append(w.longs, nil), append(w.doubles, nil)
		}
	}
	return w, nil
}

// Schema returns the writer's schema.
func (w *Writer) Schema() Schema { return w.schema.Clone() }

func (w *Writer) columnMode() error {
	if w.done {
		return fmt.Errorf("columns: writer finished or aborted: %w", ErrState)
	}
	if w.mode == modeRows {
		return fmt.Errorf("columns: writer fed by AddRow cannot hand out column writers: %w", ErrState)
	}
	w.mode = modeColumns
	return nil
}

// Time returns the writer of the __time column.
func (w *Writer) Time() (*LongWriter, error) {
	if err := w.columnMode(); err != nil {
		return nil, err
	}
	return w.time, nil
}

// Dim returns the writer of a dictionary dimension.
func (w *Writer) Dim(name string) (*DimWriter, error) {
	if err := w.columnMode(); err != nil {
		return nil, err
	}
	i := w.schema.Dimension(name)
	if i < 0 || w.dims[i] == nil {
		return nil, fmt.Errorf("columns: writer: no dictionary dimension %q: %w", name, ErrSchema)
	}
	return w.dims[i], nil
}

// Raw returns the writer of a raw dimension.
func (w *Writer) Raw(name string) (*RawWriter, error) {
	if err := w.columnMode(); err != nil {
		return nil, err
	}
	i := w.schema.Dimension(name)
	if i < 0 || w.raws[i] == nil {
		return nil, fmt.Errorf("columns: writer: no raw dimension %q: %w", name, ErrSchema)
	}
	return w.raws[i], nil
}

func (w *Writer) metric(name string, t MetricType) (int, error) {
	if err := w.columnMode(); err != nil {
		return 0, err
	}
	i := w.schema.Metric(name)
	if i < 0 || w.schema.Metrics[i].ValueType() != t {
		return 0, fmt.Errorf("columns: writer: no %s metric %q: %w", t, name, ErrSchema)
	}
	return i, nil
}

// Long returns the writer of a long metric.
func (w *Writer) Long(name string) (*LongWriter, error) {
	i, err := w.metric(name, MetricLong)
	if err != nil {
		return nil, err
	}
	return w.longs[i], nil
}

// Double returns the writer of a double metric.
func (w *Writer) Double(name string) (*DoubleWriter, error) {
	i, err := w.metric(name, MetricDouble)
	if err != nil {
		return nil, err
	}
	return w.doubles[i], nil
}

// Sketch returns the writer of a hyperUnique metric.
func (w *Writer) Sketch(name string) (*SketchWriter, error) {
	i, err := w.metric(name, MetricHyperUnique)
	if err != nil {
		return nil, err
	}
	return w.sketch[i], nil
}

// LongWriter appends int64 values: __time or a long metric.
type LongWriter struct {
	cw        chunkedWriter
	chunkRows int
	vals      []int64
	raw       []byte
	isTime    bool
	gran      Granularity // __time: every value is truncated to it
	rows      int
	first     int64
	last      int64
	err       error
	finished  bool
	times     *LongWriter // a first/last metric's times (PartTimes), else nil
}

// Append appends the next row's value. For __time, values must not decrease and must be
// truncated to the schema's granularity. A first/last metric takes AppendTimed instead.
func (l *LongWriter) Append(v int64) error {
	if l.times != nil {
		return l.timedErr()
	}
	return l.append(v)
}

// AppendTimed appends the next row's value of a first/last metric with the time stored with it
// (the event time of the row it came from).
func (l *LongWriter) AppendTimed(v, t int64) error {
	if l.times == nil {
		return l.untimedErr()
	}
	if err := l.append(v); err != nil {
		return err
	}
	if err := l.times.append(t); err != nil {
		l.err = err
	}
	return l.err
}

func (l *LongWriter) timedErr() error {
	if l.err == nil {
		l.err = fmt.Errorf("columns: column %q: a first/last metric takes AppendTimed: %w", l.cw.st.name, ErrState)
	}
	return l.err
}

func (l *LongWriter) untimedErr() error {
	return fmt.Errorf("columns: column %q: AppendTimed on a column that stores no times: %w", l.cw.st.name, ErrState)
}

func (l *LongWriter) append(v int64) error {
	if l.err != nil {
		return l.err
	}
	if l.finished {
		return fmt.Errorf("columns: column %q: append after finish: %w", l.cw.st.name, ErrState)
	}
	if l.isTime {
		if l.rows > 0 && v < l.last {
			l.err = fmt.Errorf("columns: column %q: row %d: time %d before the previous row's %d: rows must come in time order: %w", TimeColumn, l.rows, v, l.last, medium.ErrInvalid)
			return l.err
		}
		if l.gran.Truncate(v) != v {
			l.err = fmt.Errorf("columns: column %q: row %d: time %d not truncated to the granularity %s: %w", TimeColumn, l.rows, v, l.gran, medium.ErrInvalid)
			return l.err
		}
		if l.rows == 0 {
			l.first = v
		}
		l.last = v
	}
	if l.vals == nil {
		l.vals = make([]int64, 0, l.chunkRows)
	}
	l.vals = append(l.vals, v)
	l.rows++
	if len(l.vals) == l.chunkRows {
		return l.flush()
	}
	return nil
}

func (l *LongWriter) flush() error {
	if len(l.vals) == 0 {
		return l.err
	}
	l.raw = appendInt64s(l.raw[:0], l.vals)
	if err := l.cw.writeChunk(l.raw, len(l.vals)); err != nil && l.err == nil {
		l.err = err
	}
	l.vals = l.vals[:0]
	return l.err
}

// Rows returns the rows appended so far.
func (l *LongWriter) Rows() int { return l.rows }

// Size returns the bytes staged so far for the column's part; after Finish, the part's size.
func (l *LongWriter) Size() int64 { return l.cw.st.n }

func (l *LongWriter) finish() error {
	if l.finished {
		return l.err
	}
	l.finished = true
	if err := l.flush(); err != nil {
		return err
	}
	l.err = l.cw.finish()
	l.vals, l.raw = nil, nil
	if l.err == nil && l.times != nil {
		l.err = l.times.finish()
	}
	return l.err
}

// DoubleWriter appends float64 values of a double metric.
type DoubleWriter struct {
	cw        chunkedWriter
	chunkRows int
	vals      []float64
	ints      []int64
	raw       []byte
	rows      int
	err       error
	finished  bool
	times     *LongWriter // a first/last metric's times (PartTimes), else nil
	tails     *blobWriter // a doubleSum metric's tails (PartTails), else nil
	tailBuf   []byte
}

// Append appends the next row's value (of a doubleSum metric: with an empty tail, an exact
// value). A first/last metric takes AppendTimed instead.
func (d *DoubleWriter) Append(v float64) error {
	if d.times != nil {
		if d.err == nil {
			d.err = fmt.Errorf("columns: column %q: a first/last metric takes AppendTimed: %w", d.cw.st.name, ErrState)
		}
		return d.err
	}
	return d.AppendSum(v, nil)
}

// AppendSum appends the next row's value of a doubleSum metric and its exactness tail: the
// terms that, added to v, give the exact sum it was rounded from (agg.ExactSum.Tail). On other
// double metrics the tail must be empty.
func (d *DoubleWriter) AppendSum(v float64, tail []float64) error {
	if d.tails == nil {
		if len(tail) > 0 {
			return fmt.Errorf("columns: column %q: a tail on a metric that stores none: %w", d.cw.st.name, ErrState)
		}
		return d.append(v)
	}
	if err := d.append(v); err != nil {
		return err
	}
	d.tailBuf = d.tailBuf[:0]
	for _, x := range tail {
		d.tailBuf = binary.LittleEndian.AppendUint64(d.tailBuf, math.Float64bits(x))
	}
	if err := d.tails.append(d.tailBuf); err != nil {
		d.err = err
	}
	return d.err
}

// AppendTimed appends the next row's value of a first/last metric with the time stored with it.
func (d *DoubleWriter) AppendTimed(v float64, t int64) error {
	if d.times == nil {
		return fmt.Errorf("columns: column %q: AppendTimed on a column that stores no times: %w", d.cw.st.name, ErrState)
	}
	if err := d.append(v); err != nil {
		return err
	}
	if err := d.times.append(t); err != nil {
		d.err = err
	}
	return d.err
}

func (d *DoubleWriter) append(v float64) error {
	if d.err != nil {
		return d.err
	}
	if d.finished {
		return fmt.Errorf("columns: column %q: append after finish: %w", d.cw.st.name, ErrState)
	}
	if d.vals == nil {
		d.vals = make([]float64, 0, d.chunkRows)
	}
	d.vals = append(d.vals, v)
	d.rows++
	if len(d.vals) == d.chunkRows {
		return d.flush()
	}
	return nil
}

func (d *DoubleWriter) flush() error {
	if len(d.vals) == 0 {
		return d.err
	}
	d.raw = appendFloat64s(d.raw[:0], d.vals, &d.ints)
	if err := d.cw.writeChunk(d.raw, len(d.vals)); err != nil && d.err == nil {
		d.err = err
	}
	d.vals = d.vals[:0]
	return d.err
}

// Rows returns the rows appended so far.
func (d *DoubleWriter) Rows() int { return d.rows }

// Size returns the bytes staged so far for the column's part.
func (d *DoubleWriter) Size() int64 { return d.cw.st.n }

func (d *DoubleWriter) finish() error {
	if d.finished {
		return d.err
	}
	d.finished = true
	if err := d.flush(); err != nil {
		return err
	}
	d.err = d.cw.finish()
	d.vals, d.raw, d.ints = nil, nil, nil
	if d.err == nil && d.times != nil {
		d.err = d.times.finish()
	}
	if d.err == nil && d.tails != nil {
		d.err = d.tails.finishBlobs()
	}
	return d.err
}

// blobWriter appends byte strings in chunks closed at chunkRows rows or blobChunkTarget bytes.
type blobWriter struct {
	cw        chunkedWriter
	chunkRows int
	lens      []int64
	data      []byte
	raw       []byte
	rows      int
	err       error
	finished  bool
}

func (b *blobWriter) append(v []byte) error {
	if b.err != nil {
		return b.err
	}
	if b.finished {
		return fmt.Errorf("columns: column %q: append after finish: %w", b.cw.st.name, ErrState)
	}
	if len(v) > MaxValueBytes {
		b.err = fmt.Errorf("columns: column %q: row %d: value of %d bytes, at most %d: %w", b.cw.st.name, b.rows, len(v), MaxValueBytes, medium.ErrInvalid)
		return b.err
	}
	b.lens = append(b.lens, int64(len(v)))
	b.data = append(b.data, v...)
	b.rows++
	if len(b.lens) == b.chunkRows || len(b.data) >= blobChunkTarget {
		return b.flush()
	}
	return nil
}

func (b *blobWriter) flush() error {
	if len(b.lens) == 0 {
		return b.err
	}
	b.raw = appendBlobs(b.raw[:0], b.lens, b.data)
	if err := b.cw.writeChunk(b.raw, len(b.lens)); err != nil && b.err == nil {
		b.err = err
	}
	b.lens, b.data = b.lens[:0], b.data[:0]
	if cap(b.raw) > 4*blobChunkTarget {
		b.raw, b.data = nil, nil // do not keep one huge value's buffers
	}
	return b.err
}

// Rows returns the rows appended so far.
func (b *blobWriter) Rows() int { return b.rows }

// Size returns the bytes staged so far for the column's values part.
func (b *blobWriter) Size() int64 { return b.cw.st.n }

func (b *blobWriter) finishBlobs() error {
	if b.finished {
		return b.err
	}
	b.finished = true
	if err := b.flush(); err != nil {
		return err
	}
	b.err = b.cw.finish()
	b.lens, b.data, b.raw = nil, nil, nil
	return b.err
}

// RawWriter appends the strings of a raw dimension.
type RawWriter struct {
	blobWriter
	nullsSt *stage
	nulls   *roaring.Bitmap
}

// Append appends the next row's value.
func (r *RawWriter) Append(v string) error {
	return r.append(unsafeBytes(v))
}

// AppendNull appends a null row.
func (r *RawWriter) AppendNull() error {
	if r.err == nil && !r.finished {
		r.nulls.Add(uint32(r.rows))
	}
	return r.append(nil)
}

func (r *RawWriter) finish() error {
	if r.finished {
		return r.err
	}
	if err := r.finishBlobs(); err != nil {
		return err
	}
	r.nulls.RunOptimize()
	if _, err := r.nulls.WriteTo(r.nullsSt); err != nil {
		r.err = r.nullsSt.fail(err)
	}
	r.nulls = nil
	return r.err
}

// SketchWriter appends the HyperLogLog sketches of a hyperUnique metric.
type SketchWriter struct {
	blobWriter
	buf []byte
}

// Append appends the next row's sketch; nil appends an empty sketch.
func (s *SketchWriter) Append(sk *hyperloglog.Sketch) error {
	if sk == nil {
		sk = hyperloglog.New()
	}
	var err error
	s.buf, err = sk.AppendBinary(s.buf[:0])
	if err != nil {
		if s.err == nil {
			s.err = fmt.Errorf("columns: column %q: row %d: %w", s.cw.st.name, s.rows, err)
		}
		return s.err
	}
	return s.append(s.buf)
}

// AppendBytes appends the next row's sketch in its serialized form, as SketchCursor.Bytes
// returns it. The bytes are not checked here (Segment.Verify checks them); they must come from
// a sketch's MarshalBinary.
func (s *SketchWriter) AppendBytes(b []byte) error { return s.append(b) }

func (s *SketchWriter) finish() error { return s.finishBlobs() }

// DimWriter writes a dictionary dimension in three phases, each closing the one before:
//
//  1. the dictionary: AddNull first if the dimension has nulls (null gets id 0), then AddValue
//     for every distinct value in strictly increasing byte order (ids follow);
//  2. the rows: AppendID (single value) or AppendIDs (either kind) for each row in order,
//     AppendNull for a null row; the null bitmap is built from them;
//  3. the bitmap index (unless the dimension has NoBitmapIndex): WriteBitmap for every id in
//     order, each the set of rows holding that id. Only one bitmap is held at a time.
//
// The writer checks what it cheaply can: ids below the cardinality, the null id alone in a row,
// each bitmap within the rows, the null id's bitmap equal to the null rows, the bitmaps' total
// cardinality equal to the number of distinct (row, id) pairs, and (by a sum of a 64-bit hash
// over the pairs, computed from the rows and again from the bitmaps) that the bitmaps hold
// exactly the rows' ids. The pair hashes cost a hash per (row, id) twice over, and the distinct
// pairs of multi-value rows a sort per row, so those two are computed only in builds with the
// invariants tag (go test -tags invariants), as CI runs; Verify checks the same of a file.
type DimWriter struct {
	dim       Dimension
	chunkRows int
	phase     int // 0 dictionary, 1 rows, 2 bitmaps, 3 finished
	dict      dictWriter
	card      int
	width     int
	ids       chunkedWriter
	vals      []uint32 // ids of the rows of the current chunk
	counts    []uint32 // multi-value: ids per row of the current chunk
	raw       []byte
	rows      int
	pairs     uint64 // distinct (row, id) pairs (of a multi-value dimension: invariants only)
	pairHash  uint64 // sum of pairHash over the distinct (row, id) pairs of the rows
	bmHash    uint64 // the same over the bitmaps written
	nullsSt   *stage
	nulls     *roaring.Bitmap
	nullRows  []uint32 // null rows of the current chunk, not yet in nulls
	bitmaps   *bitmapsWriter
	nextBM    int
	bmCard    uint64
	seen      []uint32 // scratch for distinct counting
	err       error
}

func (d *DimWriter) fail(err error) error {
	if d.err == nil {
		d.err = fmt.Errorf("columns: column %q: %w", d.dim.Name, err)
	}
	return d.err
}

// AddNull gives the null value id 0. It must come before any AddValue.
func (d *DimWriter) AddNull() error {
	if d.err != nil {
		return d.err
	}
	if d.phase != 0 || d.dict.count > 0 || d.dict.hasNull {
		return d.fail(fmt.Errorf("AddNull after other dictionary values or rows: %w", ErrState))
	}
	d.dict.hasNull = true
	return nil
}

// AddValue adds the next dictionary value, which must sort strictly after the previous one, and
// returns its id.
func (d *DimWriter) AddValue(v string) (uint32, error) {
	if d.err != nil {
		return 0, d.err
	}
	if d.phase != 0 {
		return 0, d.fail(fmt.Errorf("AddValue after the first row: %w", ErrState))
	}
	if d.dict.count >= math.MaxUint32-1 {
		return 0, d.fail(fmt.Errorf("dictionary full"))
	}
	if err := d.dict.add(v); err != nil {
		return 0, d.fail(fmt.Errorf("dictionary: %w: %w", err, medium.ErrInvalid))
	}
	id := uint32(d.dict.count - 1)
	if d.dict.hasNull {
		id++
	}
	return id, nil
}

// HasNull reports whether the dictionary has the null value (id 0).
func (d *DimWriter) HasNull() bool { return d.dict.hasNull }

// Cardinality returns the number of ids so far, null included.
func (d *DimWriter) Cardinality() int {
	if d.dict.hasNull {
		return d.dict.count + 1
	}
	return d.dict.count
}

// Rows returns the rows appended so far.
func (d *DimWriter) Rows() int { return d.rows }

func (d *DimWriter) closeDict() error {
	if d.phase > 0 {
		return nil
	}
	d.card = d.Cardinality()
	d.width = idWidth(d.card)
	d.phase = 1
	if err := d.dict.finish(); err != nil {
		return d.fail(err)
	}
	return nil
}

// AppendID appends a row of a single-value dimension holding id (0 is null when HasNull).
func (d *DimWriter) AppendID(id uint32) error {
	// The fast path: the rows phase under way, a valid id, room in the chunk.
	if d.phase == 1 && d.err == nil && !d.dim.MultiValue && int64(id) < int64(d.card) && d.rows < maxRows &&
		len(d.vals)+1 < d.chunkRows {
		if id == 0 && d.dict.hasNull {
			d.nullRows = append(d.nullRows, uint32(d.rows))
		}
		if invariants {
			d.pairHash += pairHash(uint32(d.rows), id)
		}
		d.vals = append(d.vals, id)
		d.pairs++
		d.rows++
		return nil
	}
	one := [1]uint32{id}
	return d.AppendIDs(one[:])
}

// AppendNull appends a null row; the dictionary must have the null value.
func (d *DimWriter) AppendNull() error { return d.AppendIDs(nil) }

// AppendIDs appends a row holding ids, in the row's order (duplicates kept). An empty row is
// null and is stored as the null id alone. A single-value dimension takes at most one id.
func (d *DimWriter) AppendIDs(ids []uint32) error {
	if d.err != nil {
		return d.err
	}
	if d.phase > 1 {
		return d.fail(fmt.Errorf("row appended after the bitmaps: %w", ErrState))
	}
	if err := d.closeDict(); err != nil {
		return err
	}
	if d.rows >= maxRows {
		return d.fail(fmt.Errorf("more than %d rows", maxRows))
	}
	var nullRow [1]uint32
	if len(ids) == 0 {
		if !d.dict.hasNull {
			return d.fail(fmt.Errorf("row %d: null row, but the dictionary has no null value (call AddNull first): %w", d.rows, medium.ErrInvalid))
		}
		ids = nullRow[:]
	}
	if !d.dim.MultiValue && len(ids) > 1 {
		return d.fail(fmt.Errorf("row %d: %d values in a single-value dimension: %w", d.rows, len(ids), medium.ErrInvalid))
	}
	if len(ids) > maxChunkValues {
		return d.fail(fmt.Errorf("row %d: %d values, at most %d: %w", d.rows, len(ids), maxChunkValues, medium.ErrInvalid))
	}
	for _, id := range ids {
		if int64(id) >= int64(d.card) {
			return d.fail(fmt.Errorf("row %d: id %d not below the cardinality %d: %w", d.rows, id, d.card, medium.ErrInvalid))
		}
		if id == 0 && d.dict.hasNull && len(ids) > 1 {
			return d.fail(fmt.Errorf("row %d: the null id inside a multi-value row: %w", d.rows, medium.ErrInvalid))
		}
	}
	if d.dict.hasNull && ids[0] == 0 {
		d.nullRows = append(d.nullRows, uint32(d.rows))
	}
	if d.dim.MultiValue && len(d.vals)+len(ids) > maxChunkValues {
		if err := d.flush(); err != nil {
			return err
		}
	}
	d.vals = append(d.vals, ids...)
	if d.dim.MultiValue {
		d.counts = append(d.counts, uint32(len(ids)))
		if invariants {
			d.pairs += d.distinct(ids)
		}
	} else {
		d.pairs++
		if invariants {
			d.pairHash += pairHash(uint32(d.rows), ids[0])
		}
	}
	d.rows++
	if d.rowsInChunk() == d.chunkRows {
		return d.flush()
	}
	return nil
}

func (d *DimWriter) rowsInChunk() int {
	if d.dim.MultiValue {
		return len(d.counts)
	}
	return len(d.vals)
}

// distinct counts the distinct ids of one row and adds their pair hashes (invariants only).
func (d *DimWriter) distinct(ids []uint32) uint64 {
	row := uint32(d.rows)
	if len(ids) == 1 {
		d.pairHash += pairHash(row, ids[0])
		return 1
	}
	d.seen = append(d.seen[:0], ids...)
	slices.Sort(d.seen)
	d.seen = slices.Compact(d.seen)
	for _, id := range d.seen {
		d.pairHash += pairHash(row, id)
	}
	return uint64(len(d.seen))
}

// pairHash mixes a (row, id) pair into 64 bits (the splitmix64 finalizer).
func pairHash(row, id uint32) uint64 {
	x := uint64(row)<<32 | uint64(id)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func (d *DimWriter) flush() error {
	if len(d.nullRows) > 0 {
		d.nulls.AddMany(d.nullRows)
		d.nullRows = d.nullRows[:0]
	}
	n := d.rowsInChunk()
	if n == 0 {
		return d.err
	}
	if d.dim.MultiValue {
		d.raw = appendMultiIDs(d.raw[:0], d.counts, d.vals, d.width)
	} else {
		d.raw = appendIDs(d.raw[:0], d.vals, d.width)
	}
	if err := d.ids.writeChunk(d.raw, n); err != nil {
		return d.fail(err)
	}
	d.vals, d.counts = d.vals[:0], d.counts[:0]
	return nil
}

func (d *DimWriter) closeRows() error {
	if d.phase > 1 {
		return nil
	}
	if err := d.closeDict(); err != nil {
		return err
	}
	d.phase = 2
	if err := d.flush(); err != nil {
		return err
	}
	if err := d.ids.finish(); err != nil {
		return d.fail(err)
	}
	d.vals, d.counts, d.raw, d.seen, d.nullRows = nil, nil, nil, nil, nil
	return nil
}

// WriteBitmap writes the bitmap of id: the rows holding it. Ids come in order from 0, each
// once; nil is an empty bitmap. The first call closes the rows. The writer does not keep or
// change bm; call bm.RunOptimize first for the smallest file.
func (d *DimWriter) WriteBitmap(id uint32, bm *roaring.Bitmap) error {
	if err := d.beginBitmap(id); err != nil {
		return err
	}
	if bm == nil {
		bm = roaring.New()
	}
	if !bm.IsEmpty() && int64(bm.Maximum()) >= int64(d.rows) {
		return d.fail(fmt.Errorf("bitmap %d holds row %d, the column has %d rows: %w", id, bm.Maximum(), d.rows, medium.ErrInvalid))
	}
	if id == 0 && d.dict.hasNull && !bm.Equals(d.nulls) {
		return d.fail(fmt.Errorf("bitmap of the null id differs from the null rows: %w", medium.ErrInvalid))
	}
	d.bmCard += bm.GetCardinality()
	if invariants {
		h := d.bmHash
		bm.Iterate(func(row uint32) bool {
			h += pairHash(row, id)
			return true
		})
		d.bmHash = h
	}
	if err := d.bitmaps.add(bm); err != nil {
		return d.fail(err)
	}
	d.nextBM++
	return nil
}

// WriteBitmapRows is WriteBitmap for a bitmap given as its rows, strictly increasing. It writes
// the bytes bm.RunOptimize and WriteTo would give without building a roaring.Bitmap, which is
// the fast path for a merge writing many small bitmaps. rows is not kept.
func (d *DimWriter) WriteBitmapRows(id uint32, rows []uint32) error {
	if err := d.beginBitmap(id); err != nil {
		return err
	}
	if k, ok := strictlyIncreasing(rows); !ok {
		return d.fail(fmt.Errorf("bitmap %d: rows not strictly increasing at index %d (%d after %d): %w", id, k, rows[k], rows[k-1], medium.ErrInvalid))
	}
	if n := len(rows); n > 0 && int64(rows[n-1]) >= int64(d.rows) {
		return d.fail(fmt.Errorf("bitmap %d holds row %d, the column has %d rows: %w", id, rows[n-1], d.rows, medium.ErrInvalid))
	}
	if id == 0 && d.dict.hasNull && !equalRows(d.nulls, rows) {
		return d.fail(fmt.Errorf("bitmap of the null id differs from the null rows: %w", medium.ErrInvalid))
	}
	d.bmCard += uint64(len(rows))
	if invariants {
		h := d.bmHash
		for _, row := range rows {
			h += pairHash(row, id)
		}
		d.bmHash = h
	}
	if err := d.bitmaps.addRows(rows); err != nil {
		return d.fail(err)
	}
	d.nextBM++
	return nil
}

// WriteBitmapWords is WriteBitmapRows for a bitmap given as a bitset: row r is in it when bit
// r%64 of words[r/64] is set. words may end before the last row. It is the fast path for a
// value holding many rows; words is not kept.
func (d *DimWriter) WriteBitmapWords(id uint32, words []uint64) error {
	if err := d.beginBitmap(id); err != nil {
		return err
	}
	last := len(words) - 1
	for last >= 0 && words[last] == 0 {
		last--
	}
	if last >= 0 {
		if top := int64(last)<<6 + 63 - int64(bits.LeadingZeros64(words[last])); top >= int64(d.rows) {
			return d.fail(fmt.Errorf("bitmap %d holds row %d, the column has %d rows: %w", id, top, d.rows, medium.ErrInvalid))
		}
	}
	words = words[:last+1]
	if id == 0 && d.dict.hasNull && !equalWords(d.nulls, words) {
		return d.fail(fmt.Errorf("bitmap of the null id differs from the null rows: %w", medium.ErrInvalid))
	}
	card := 0
	for _, w := range words {
		card += bits.OnesCount64(w)
	}
	d.bmCard += uint64(card)
	if invariants {
		h := d.bmHash
		for k, w := range words {
			for ; w != 0; w &= w - 1 {
				h += pairHash(uint32(k<<6+bits.TrailingZeros64(w)), id)
			}
		}
		d.bmHash = h
	}
	if err := d.bitmaps.addWords(words); err != nil {
		return d.fail(err)
	}
	d.nextBM++
	return nil
}

// beginBitmap checks that the bitmap of id may come next, closing the rows on the first call.
func (d *DimWriter) beginBitmap(id uint32) error {
	if d.err != nil {
		return d.err
	}
	if d.bitmaps == nil {
		return d.fail(fmt.Errorf("WriteBitmap on a dimension without a bitmap index: %w", ErrState))
	}
	if d.phase > 2 {
		return d.fail(fmt.Errorf("WriteBitmap after finish: %w", ErrState))
	}
	if err := d.closeRows(); err != nil {
		return err
	}
	if int(id) != d.nextBM {
		return d.fail(fmt.Errorf("WriteBitmap(%d): want id %d next (ids in order, each once): %w", id, d.nextBM, ErrState))
	}
	if int(id) >= d.card {
		return d.fail(fmt.Errorf("WriteBitmap(%d): id not below the cardinality %d: %w", id, d.card, medium.ErrInvalid))
	}
	return nil
}

// equalWords reports whether bm holds exactly the rows set in words.
func equalWords(bm *roaring.Bitmap, words []uint64) bool {
	it := bm.Iterator()
	n := uint64(0)
	for k, w := range words {
		for ; w != 0; w &= w - 1 {
			if !it.HasNext() || it.Next() != uint32(k<<6+bits.TrailingZeros64(w)) {
				return false
			}
			n++
		}
	}
	return n == bm.GetCardinality()
}

// equalRows reports whether bm holds exactly rows (strictly increasing).
func equalRows(bm *roaring.Bitmap, rows []uint32) bool {
	if bm.GetCardinality() != uint64(len(rows)) {
		return false
	}
	it := bm.Iterator()
	for _, r := range rows {
		if !it.HasNext() || it.Next() != r {
			return false
		}
	}
	return true
}

func (d *DimWriter) finish() error {
	if d.err != nil {
		return d.err
	}
	if d.phase > 2 {
		return nil
	}
	if err := d.closeRows(); err != nil {
		return err
	}
	d.phase = 3
	if d.bitmaps != nil {
		if d.nextBM != d.card {
			return d.fail(fmt.Errorf("%d of %d bitmaps written: %w", d.nextBM, d.card, ErrState))
		}
		if (invariants || !d.dim.MultiValue) && d.bmCard != d.pairs {
			return d.fail(fmt.Errorf("bitmaps hold %d rows in all, the rows hold %d distinct values: %w", d.bmCard, d.pairs, medium.ErrInvalid))
		}
		if invariants && d.bmHash != d.pairHash {
			return d.fail(fmt.Errorf("bitmaps do not hold the rows' ids (pair hashes differ): %w", medium.ErrInvalid))
		}
		if err := d.bitmaps.finish(); err != nil {
			return d.fail(err)
		}
	}
	d.nulls.RunOptimize()
	if _, err := d.nulls.WriteTo(d.nullsSt); err != nil {
		return d.fail(d.nullsSt.fail(err))
	}
	d.nulls = nil
	return nil
}

// rowDim buffers a dictionary dimension fed by AddRow.
type rowDim struct {
	index  map[string]uint32 // provisional id, in order of first appearance
	values []string
	ids    []uint32 // provisional ids of every row; nullID for null
	counts []uint32 // multi-value: ids per row
	nulls  bool
}

const nullID = math.MaxUint32

// AddRow appends one row. The writer holds the dictionary dimensions' ids in memory until
// Finish; the other columns are staged as rows come. It does not roll rows up, so a schema
// with Rollup is refused: rows reach a rolled-up segment through merger.Builder.
func (w *Writer) AddRow(r Row) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return fmt.Errorf("columns: writer finished or aborted: %w", ErrState)
	}
	if w.schema.Rollup {
		return fmt.Errorf("columns: AddRow on a rollup schema: AddRow does not roll rows up; rows reach a rolled-up segment through merger.Builder: %w", ErrState)
	}
	if w.mode == modeColumns {
		return fmt.Errorf("columns: AddRow on a writer fed column by column: %w", ErrState)
	}
	if w.mode == modeNone {
		w.mode = modeRows
		w.rowDims = make([]*rowDim, len(w.schema.Dimensions))
		for i, d := range w.schema.Dimensions {
			if !d.Raw {
				w.rowDims[i] = &rowDim{index: map[string]uint32{}}
			}
		}
	}
	row := w.time.rows
	if len(r.Dims) != len(w.schema.Dimensions) || len(r.Metrics) != len(w.schema.Metrics) {
		return fmt.Errorf("columns: row %d: %d dimensions and %d metrics, the schema has %d and %d: %w",
			row, len(r.Dims), len(r.Metrics), len(w.schema.Dimensions), len(w.schema.Metrics), medium.ErrInvalid)
	}
	for i, d := range w.schema.Dimensions {
		if !d.MultiValue && len(r.Dims[i]) > 1 {
			return fmt.Errorf("columns: column %q: row %d: %d values in a single-value dimension: %w", d.Name, row, len(r.Dims[i]), medium.ErrInvalid)
		}
		for _, v := range r.Dims[i] {
			if len(v) > MaxValueBytes {
				return fmt.Errorf("columns: column %q: row %d: value of %d bytes, at most %d: %w", d.Name, row, len(v), MaxValueBytes, medium.ErrInvalid)
			}
		}
	}
	if err := w.time.Append(r.Time); err != nil {
		return w.fail(err)
	}
	for i, d := range w.schema.Dimensions {
		vals := r.Dims[i]
		if d.Raw {
			var err error
			if len(vals) == 0 {
				err = w.raws[i].AppendNull()
			} else {
				err = w.raws[i].Append(vals[0])
			}
			if err != nil {
				return w.fail(err)
			}
			continue
		}
		rd := w.rowDims[i]
		if len(vals) == 0 {
			rd.nulls = true
			rd.ids = append(rd.ids, nullID)
			if d.MultiValue {
				rd.counts = append(rd.counts, 1)
			}
			continue
		}
		for _, v := range vals {
			id, ok := rd.index[v]
			if !ok {
				id = uint32(len(rd.values))
				rd.index[v] = id
				rd.values = append(rd.values, v)
			}
			rd.ids = append(rd.ids, id)
		}
		if d.MultiValue {
			rd.counts = append(rd.counts, uint32(len(vals)))
		}
	}
	for i, m := range w.schema.Metrics {
		var err error
		v := r.Metrics[i]
		timed := m.Agg().Timed()
		switch m.ValueType() {
		case MetricLong:
			if timed {
				err = w.longs[i].AppendTimed(v.Long, r.Time)
			} else {
				err = w.longs[i].Append(v.Long)
			}
		case MetricDouble:
			if timed {
				err = w.doubles[i].AppendTimed(v.Double, r.Time)
			} else {
				err = w.doubles[i].Append(v.Double)
			}
		case MetricHyperUnique:
			err = w.sketch[i].Append(v.Sketch)
		}
		if err != nil {
			return w.fail(err)
		}
	}
	return nil
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// flushRows writes the buffered dictionary dimensions of AddRow through their DimWriters.
func (w *Writer) flushRows() error {
	for i, rd := range w.rowDims {
		if rd == nil {
			continue
		}
		dw := w.dims[i]
		order := make([]uint32, len(rd.values)) // provisional ids in value order
		for k := range order {
			order[k] = uint32(k)
		}
		slices.SortFunc(order, func(a, b uint32) int { return strings.Compare(rd.values[a], rd.values[b]) })
		final := make([]uint32, len(rd.values))
		if rd.nulls {
			if err := dw.AddNull(); err != nil {
				return err
			}
		}
		for _, p := range order {
			id, err := dw.AddValue(rd.values[p])
			if err != nil {
				return err
			}
			final[p] = id
		}
		rd.index, rd.values = nil, nil
		var bms []*roaring.Bitmap
		if dw.bitmaps != nil {
			bms = make([]*roaring.Bitmap, dw.Cardinality())
			for k := range bms {
				bms[k] = roaring.New()
			}
		}
		mapID := func(p uint32) uint32 {
			if p == nullID {
				return 0
			}
			return final[p]
		}
		var buf []uint32
		pos := 0
		for row := 0; row < w.time.rows; row++ {
			n := 1
			if rd.counts != nil {
				n = int(rd.counts[row])
			}
			buf = buf[:0]
			for _, p := range rd.ids[pos : pos+n] {
				id := mapID(p)
				buf = append(buf, id)
				if bms != nil {
					bms[id].Add(uint32(row))
				}
			}
			pos += n
			if err := dw.AppendIDs(buf); err != nil {
				return err
			}
		}
		rd.ids, rd.counts = nil, nil
		for id, bm := range bms {
			bm.RunOptimize()
			if err := dw.WriteBitmap(uint32(id), bm); err != nil {
				return err
			}
			bms[id] = nil
		}
		w.rowDims[i] = nil
	}
	return nil
}

// seal finishes every column and returns the footer.
func (w *Writer) seal() (*footer, error) {
	if w.err != nil {
		return nil, w.err
	}
	if w.done {
		return nil, fmt.Errorf("columns: writer finished or aborted: %w", ErrState)
	}
	w.done = true
	if w.mode == modeRows {
		if err := w.flushRows(); err != nil {
			return nil, w.fail(err)
		}
	}
	rows := w.time.rows
	if rows > maxRows {
		return nil, w.fail(fmt.Errorf("columns: %d rows, at most %d in a segment: %w", rows, maxRows, medium.ErrInvalid))
	}
	var errs []error
	check := func(name string, n int, err error) {
		if err != nil {
			errs = append(errs, err)
		} else if n != rows {
			errs = append(errs, fmt.Errorf("columns: column %q has %d rows, %s has %d: %w", name, n, TimeColumn, rows, ErrState))
		}
	}
	check(TimeColumn, rows, w.time.finish())
	for i, d := range w.schema.Dimensions {
		if d.Raw {
			check(d.Name, w.raws[i].rows, w.raws[i].finish())
		} else {
			check(d.Name, w.dims[i].rows, w.dims[i].finish())
		}
	}
	for i, m := range w.schema.Metrics {
		switch m.ValueType() {
		case MetricLong:
			check(m.Name, w.longs[i].rows, w.longs[i].finish())
		case MetricDouble:
			check(m.Name, w.doubles[i].rows, w.doubles[i].finish())
		case MetricHyperUnique:
			check(m.Name, w.sketch[i].rows, w.sketch[i].finish())
		}
	}
	for _, s := range w.stages {
		if s.err != nil {
			errs = append(errs, s.err)
		}
	}
	if len(errs) > 0 {
		return nil, w.fail(multierr.Join(errs...))
	}
	f := &footer{version: Version, rows: rows, schema: w.schema}
	if rows > 0 {
		iv, ok := w.schema.Granularity.Interval(w.time.first, w.time.last)
		if !ok {
			return nil, w.fail(fmt.Errorf("columns: %s: time %d leaves no room for an exclusive interval end: %w", TimeColumn, w.time.last, medium.ErrInvalid))
		}
		f.interval = iv
	}
	off := int64(headerSize)
	for _, s := range w.stages {
		f.parts = append(f.parts, PartInfo{
			Column: s.name, Kind: s.spec.kind, Encoding: s.spec.enc,
			Offset: off, Length: s.n, CRC: s.crc, column: s.spec.column,
		})
		off += s.n
	}
	return f, nil
}

// crcWriter passes bytes to w and checksums them.
type crcWriter struct {
	w   io.Writer
	crc uint32
	n   int64
}

func (c *crcWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	if k < 0 || k > len(p) {
		return 0, fmt.Errorf("columns: writer returned invalid count %d", k)
	}
	c.crc = crc32.Update(c.crc, castagnoli, p[:k])
	c.n += int64(k)
	return k, err
}

// emit writes the whole segment to out: the header, every part copied out of its stage with
// WriteTo and checked against the CRC and size computed when it was staged, the footer and the
// trailer. syncStage, when not nil, runs for each stage before it is read back.
func (w *Writer) emit(out io.Writer, f *footer, syncStage func(medium.Bytes) error) (int64, error) {
	var total int64
	put := func(b []byte) error {
		n, err := out.Write(b)
		total += int64(n)
		if err == nil && n != len(b) {
			err = io.ErrShortWrite
		}
		return err
	}
	if err := put(appendHeader(nil)); err != nil {
		return total, fmt.Errorf("columns: write header: %w", err)
	}
	for _, s := range w.stages {
		if syncStage != nil {
			if err := syncStage(s.b); err != nil {
				return total, fmt.Errorf("columns: column %q part %s: sync stage: %w", s.name, s.spec.kind, err)
			}
		}
		if s.b.Size() != s.n {
			return total, fmt.Errorf("columns: column %q part %s: the encoders wrote %d bytes, the stage holds %d: %w",
				s.name, s.spec.kind, s.n, s.b.Size(), ErrCorrupt)
		}
		cw := crcWriter{w: out}
		_, err := s.b.WriteTo(&cw)
		total += cw.n
		if err != nil {
			return total, fmt.Errorf("columns: column %q part %s: copy: %w", s.name, s.spec.kind, err)
		}
		if cw.n != s.n || cw.crc != s.crc {
			return total, corruptf("columns: column %q part %s: copied %d bytes with CRC %08x, staged %d bytes with CRC %08x",
				s.name, s.spec.kind, cw.n, cw.crc, s.n, s.crc)
		}
	}
	fb, err := appendFooter(nil, f)
	if err != nil {
		return total, err
	}
	if len(fb) > maxFooter {
		return total, fmt.Errorf("columns: footer of %d bytes, at most %d: %w", len(fb), maxFooter, medium.ErrInvalid)
	}
	if err := put(appendTrailer(fb, fb)); err != nil {
		return total, fmt.Errorf("columns: write footer: %w", err)
	}
	return total, nil
}

// Info describes a finished segment.
type Info struct {
	Path     string // the published file; empty for FinishTo
	Rows     int
	Interval Interval
	Size     int64 // bytes of the segment file
	Parts    []PartInfo
	// Syncs counts the fdatasync and fsync calls made (file, directory, stages); Trickles the
	// sync_file_range calls.
	Syncs    int
	Trickles int
}

func (f *footer) info(size int64) Info {
	return Info{Rows: f.rows, Interval: f.interval, Size: size, Parts: f.parts}
}

// FinishTo finishes the segment and writes it to out, checking every part's CRC on the way.
// The stages are released whatever happens.
func (w *Writer) FinishTo(out io.Writer) (Info, error) {
	f, err := w.seal()
	if err != nil {
		return Info{}, multierr.Join(err, w.release())
	}
	n, err := w.emit(out, f, nil)
	if err := multierr.Join(err, w.release()); err != nil {
		return Info{}, err
	}
	return f.info(n), nil
}

// Abort discards the segment: the stages are released and nothing is published. It returns nil
// after Finish (the stages are gone already); a second Abort returns nil.
func (w *Writer) Abort() error {
	w.done = true
	if w.err == nil {
		w.err = fmt.Errorf("columns: writer aborted: %w", ErrState)
	}
	return w.release()
}

func (w *Writer) release() error {
	if w.med == nil {
		return nil
	}
	m := w.med
	w.med = nil
	if err := m.Close(); err != nil && !errors.Is(err, medium.ErrClosed) {
		return fmt.Errorf("columns: release stages: %w", err)
	}
	return nil
}
