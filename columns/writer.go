package columns

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/segfmt"
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

// Validate returns the error NewWriter gives for these options, if any: one wrapping
// ErrInvalid that names the bad option. The zero value is valid.
func (o WriterOptions) Validate() error { return o.ensureDefaults() }

func (o *WriterOptions) ensureDefaults() error {
	if o.Compression == CompressionDefault {
		o.Compression = CompressionS2
	}
	if o.Compression > CompressionS2 {
		return fmt.Errorf("columns: writer: unknown compression %d: %w", o.Compression, ErrInvalid)
	}
	if o.ChunkRows == 0 {
		o.ChunkRows = defaultChunkRows
	}
	if o.ChunkRows < 1 || o.ChunkRows > maxChunkRows {
		return fmt.Errorf("columns: writer: ChunkRows %d outside [1, %d]: %w", o.ChunkRows, maxChunkRows, ErrInvalid)
	}
	return nil
}

// Row is one row: what Segment.ReadRow returns and merger.Builder takes.
type Row struct {
	Time int64
	// Dims holds one entry per schema dimension, in schema order: the row's values, nil (or
	// empty) for null. A single-value dimension holds at most one value.
	Dims [][]string
	// Metrics holds one entry per schema metric, in schema order.
	Metrics []Value
}

// Value is one metric value: Long for long metrics (count included), Double for double metrics,
// Sketch for sketch metrics (nil is written as an empty sketch).
//
// Null marks a missing long or double value (SQL-compatible null handling, as Druid's): Long and
// Double are then ignored and should be zero. A sketch metric has no null: its missing
// value is a nil Sketch.
type Value struct {
	Long   int64
	Double float64
	Sketch agg.Sketch
	Null   bool
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
// It is fed a column at a time, through the writers Time, Dim, Raw, Long, Double and Sketch
// return: memory stays bounded; see DimWriter for the order dictionary dimensions take.
// Distinct column writers may be used from different goroutines at the same time; one column
// writer is used by one goroutine at a time. Rows reach a segment through merger.Builder, which
// feeds this writer.
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
	time    *NumWriter[int64]
	dims    []*DimWriter // nil for raw dimensions
	raws    []*RawWriter // nil for dictionary dimensions
	longs   []*NumWriter[int64]
	doubles []*NumWriter[float64]
	sketch  []*SketchWriter
	err     error
	done    bool
	calls   *sys.Calls
}

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
	for _, spec := range layout(w.schema, versionNoNulls) {
		b, err := w.med.NewBytes()
		if err != nil {
			return nil, multierr.Join(fmt.Errorf("columns: writer: %w", err), w.med.Close())
		}
		w.stages = append(w.stages, &stage{b: b, spec: spec, name: columnName(w.schema, spec.column)})
	}
	find := func(c int, k segfmt.PartKind) *stage {
		for _, s := range w.stages {
			if s.spec.column == c && s.spec.kind == k {
				return s
			}
		}
		return nil
	}
	cw := func(c int) chunkedWriter {
		return chunkedWriter{st: find(c, segfmt.PartValues), comp: opts.Compression}
	}
	pcs := func() *planeCoder {
		if planesFor(opts.Compression) {
			return newPlaneCoder()
		}
		return nil
	}
	w.time = newNumWriter[int64](cw(0), opts.ChunkRows, pcs())
	w.time.isTime, w.time.gran = true, w.schema.Granularity
	w.dims = make([]*DimWriter, len(schema.Dimensions))
	w.raws = make([]*RawWriter, len(schema.Dimensions))
	for i, d := range w.schema.Dimensions {
		c := 1 + i
		if d.Raw {
			w.raws[i] = &RawWriter{blobWriter: blobWriter{cw: cw(c), chunkRows: opts.ChunkRows}, nullsSt: find(c, segfmt.PartNulls), nulls: roaring.New()}
			continue
		}
		dw := &DimWriter{
			dim:       d,
			chunkRows: opts.ChunkRows,
			dict:      dictWriter{st: find(c, segfmt.PartDictionary)},
			ids:       chunkedWriter{st: find(c, segfmt.PartIDs), comp: opts.Compression},
			nullsSt:   find(c, segfmt.PartNulls),
			nulls:     roaring.New(),
			med:       w.med,
			pc:        pcs(),
		}
		if !d.NoBitmapIndex {
			dw.bitmaps = &bitmapsWriter{st: find(c, segfmt.PartBitmaps), compact: opts.Compression != CompressionNone}
		}
		w.dims[i] = dw
	}
	for i, m := range w.schema.Metrics {
		c := 1 + len(schema.Dimensions) + i
		var times *NumWriter[int64]
		if m.Agg().Timed() {
			times = newNumWriter[int64](chunkedWriter{st: find(c, segfmt.PartTimes), comp: opts.Compression}, opts.ChunkRows, pcs())
		}
		switch m.column() {
		case MetricLong:
			lw := newNumWriter[int64](cw(c), opts.ChunkRows, pcs())
			lw.times, lw.metric = times, true
			w.longs = append(w.longs, lw)
			w.doubles, w.sketch = append(w.doubles, nil), append(w.sketch, nil)
		case MetricDouble:
			dw := newNumWriter[float64](cw(c), opts.ChunkRows, pcs())
			dw.times, dw.metric = times, true
			if m.Agg().Exact() {
				dw.tails = &blobWriter{cw: chunkedWriter{st: find(c, segfmt.PartTails), comp: opts.Compression}, chunkRows: opts.ChunkRows}
			}
			w.doubles = append(w.doubles, dw)
			w.longs, w.sketch = append(w.longs, nil), append(w.sketch, nil)
		case MetricHyperUnique:
			sks, err := m.Sketches()
			if err != nil {
				return nil, fmt.Errorf("columns: writer: metric %q: %w: %w", m.Name, ErrSchema, err)
			}
			w.sketch = append(w.sketch, &SketchWriter{blobWriter: blobWriter{cw: cw(c), chunkRows: opts.ChunkRows}, sks: sks})
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
	return nil
}

// Time returns the writer of the __time column.
func (w *Writer) Time() (*NumWriter[int64], error) {
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
	if i < 0 || w.schema.Metrics[i].column() != t {
		return 0, fmt.Errorf("columns: writer: no %s metric %q: %w", t, name, ErrSchema)
	}
	return i, nil
}

// Long returns the writer of a long metric.
func (w *Writer) Long(name string) (*NumWriter[int64], error) {
	i, err := w.metric(name, MetricLong)
	if err != nil {
		return nil, err
	}
	return w.longs[i], nil
}

// Double returns the writer of a double metric.
func (w *Writer) Double(name string) (*NumWriter[float64], error) {
	i, err := w.metric(name, MetricDouble)
	if err != nil {
		return nil, err
	}
	return w.doubles[i], nil
}

// Sketch returns the writer of a sketch metric.
func (w *Writer) Sketch(name string) (*SketchWriter, error) {
	i, err := w.metric(name, MetricHyperUnique)
	if err != nil {
		return nil, err
	}
	return w.sketch[i], nil
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
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
