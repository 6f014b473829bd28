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
	"github.com/writeout/writeout/internal/segwrite"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// writerOptions configure a writer (segwrite.Options). The zero value is the default.
type writerOptions = segwrite.Options[Compression]

// checkWriterOptions returns the error newWriter gives for opts, if any: one wrapping ErrInvalid
// that names the bad option.
func checkWriterOptions(opts writerOptions) error { return ensureDefaults(&opts) }

// ensureDefaults fills in the defaults of opts and checks it.
func ensureDefaults(o *writerOptions) error {
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

// The writer is not part of columns' API: merger and this module's tests reach it through
// internal/colwrite, which finds it here.
func init() {
	segwrite.Register(segwrite.Door[Schema, Compression, Info, PublishOptions]{
		New: func(schema Schema, opts writerOptions) (segwrite.Writer[Info, PublishOptions], error) {
			w, err := newWriter(schema, opts)
			if err != nil {
				return nil, err
			}
			return w, nil
		},
		Check: checkWriterOptions,
	})
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

// writer builds one segment: parts are staged in a medium, then Finish publishes them as one
// file (or FinishTo streams them to any io.Writer).
//
// It is fed a column at a time, through the writers Time, Dim, Raw, Long, Double and Sketch
// return: memory stays bounded; see dimWriter for the order dictionary dimensions take.
// Distinct column writers may be used from different goroutines at the same time; one column
// writer is used by one goroutine at a time. Rows reach a segment through merger.Builder, which
// feeds this writer.
//
// Rows must come in non-decreasing time order, each time truncated to the schema's granularity.
// The segment's interval is Granularity.Interval of the first and last times (the zero
// Interval without rows). Every column must end with the same number of rows. Finish or Abort
// must be called; after either, every call fails.
type writer struct {
	schema  Schema
	opts    writerOptions
	med     medium.Medium
	owned   bool // med is the writer's own heap, not a child
	stages  []*stage
	time    *numWriter[int64]
	dims    []*dimWriter // nil for raw dimensions
	raws    []*rawWriter // nil for dictionary dimensions
	longs   []*numWriter[int64]
	doubles []*numWriter[float64]
	sketch  []*sketchWriter
	err     error
	done    bool
	calls   *sys.Calls
}

// newWriter returns a writer for segments of the schema, which it validates.
func newWriter(schema Schema, opts writerOptions) (*writer, error) {
	if err := schema.Validate(); err != nil {
		return nil, err
	}
	if err := ensureDefaults(&opts); err != nil {
		return nil, err
	}
	w := &writer{schema: schema.Clone(), opts: opts, calls: &sys.Default}
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
	cw := func(c int, k segfmt.PartKind) chunkedWriter {
		return chunkedWriter{st: find(c, k), med: w.med, comp: opts.Compression}
	}
	pcs := func() *planeCoder {
		if planesFor(opts.Compression) {
			return newPlaneCoder()
		}
		return nil
	}
	w.time = newNumWriter[int64](cw(0, segfmt.PartValues), opts.ChunkRows, pcs())
	w.time.isTime, w.time.gran = true, w.schema.Granularity
	w.dims = make([]*dimWriter, len(schema.Dimensions))
	w.raws = make([]*rawWriter, len(schema.Dimensions))
	for i, d := range w.schema.Dimensions {
		c := 1 + i
		if d.Raw {
			w.raws[i] = &rawWriter{blobWriter: blobWriter{cw: cw(c, segfmt.PartValues), chunkRows: opts.ChunkRows}, nullsSt: find(c, segfmt.PartNulls), nulls: roaring.New()}
			continue
		}
		dw := &dimWriter{
			dim:       d,
			chunkRows: opts.ChunkRows,
			dict:      dictWriter{st: find(c, segfmt.PartDictionary)},
			ids:       cw(c, segfmt.PartIDs),
			nullsSt:   find(c, segfmt.PartNulls),
			nulls:     roaring.New(),
			med:       w.med,
			pc:        pcs(),
			storeIDs:  opts.StoreIDs,
		}
		if !d.NoBitmapIndex {
			dw.bitmaps = &bitmapsWriter{st: find(c, segfmt.PartBitmaps), compact: opts.Compression != CompressionNone}
		}
		w.dims[i] = dw
	}
	for i, m := range w.schema.Metrics {
		c := 1 + len(schema.Dimensions) + i
		var times *numWriter[int64]
		if m.Agg().Timed() {
			times = newNumWriter[int64](cw(c, segfmt.PartTimes), opts.ChunkRows, pcs())
		}
		switch m.column() {
		case MetricLong:
			lw := newNumWriter[int64](cw(c, segfmt.PartValues), opts.ChunkRows, pcs())
			lw.times, lw.metric = times, true
			w.longs = append(w.longs, lw)
			w.doubles, w.sketch = append(w.doubles, nil), append(w.sketch, nil)
		case MetricDouble:
			dw := newNumWriter[float64](cw(c, segfmt.PartValues), opts.ChunkRows, pcs())
			dw.times, dw.metric = times, true
			if m.Agg().Exact() {
				dw.tails = &blobWriter{cw: cw(c, segfmt.PartTails), chunkRows: opts.ChunkRows}
			}
			w.doubles = append(w.doubles, dw)
			w.longs, w.sketch = append(w.longs, nil), append(w.sketch, nil)
		case MetricHyperUnique:
			sks, err := m.Sketches()
			if err != nil {
				return nil, fmt.Errorf("columns: writer: metric %q: %w: %w", m.Name, ErrSchema, err)
			}
			w.sketch = append(w.sketch, &sketchWriter{blobWriter: blobWriter{cw: cw(c, segfmt.PartValues), chunkRows: opts.ChunkRows}, sks: sks})
			w.longs, w.doubles = append(w.longs, nil), append(w.doubles, nil)
		}
	}
	return w, nil
}

// Schema returns the writer's schema.
func (w *writer) Schema() Schema { return w.schema.Clone() }

func (w *writer) columnMode() error {
	if w.done {
		return fmt.Errorf("columns: writer finished or aborted: %w", ErrState)
	}
	return nil
}

// Time implements segwrite.Writer.
func (w *writer) Time() (segwrite.NumWriter[int64], error) {
	if err := w.columnMode(); err != nil {
		return nil, err
	}
	return w.time, nil
}

// Dim implements segwrite.Writer.
func (w *writer) Dim(name string) (segwrite.DimWriter, error) {
	if err := w.columnMode(); err != nil {
		return nil, err
	}
	i := w.schema.Dimension(name)
	if i < 0 || w.dims[i] == nil {
		return nil, fmt.Errorf("columns: writer: no dictionary dimension %q: %w", name, ErrSchema)
	}
	return w.dims[i], nil
}

// Raw implements segwrite.Writer.
func (w *writer) Raw(name string) (segwrite.RawWriter, error) {
	if err := w.columnMode(); err != nil {
		return nil, err
	}
	i := w.schema.Dimension(name)
	if i < 0 || w.raws[i] == nil {
		return nil, fmt.Errorf("columns: writer: no raw dimension %q: %w", name, ErrSchema)
	}
	return w.raws[i], nil
}

func (w *writer) metric(name string, t MetricType) (int, error) {
	if err := w.columnMode(); err != nil {
		return 0, err
	}
	i := w.schema.Metric(name)
	if i < 0 || w.schema.Metrics[i].column() != t {
		return 0, fmt.Errorf("columns: writer: no %s metric %q: %w", t, name, ErrSchema)
	}
	return i, nil
}

// Long implements segwrite.Writer.
func (w *writer) Long(name string) (segwrite.NumWriter[int64], error) {
	i, err := w.metric(name, MetricLong)
	if err != nil {
		return nil, err
	}
	return w.longs[i], nil
}

// Double implements segwrite.Writer.
func (w *writer) Double(name string) (segwrite.NumWriter[float64], error) {
	i, err := w.metric(name, MetricDouble)
	if err != nil {
		return nil, err
	}
	return w.doubles[i], nil
}

// Sketch implements segwrite.Writer.
func (w *writer) Sketch(name string) (segwrite.SketchWriter, error) {
	i, err := w.metric(name, MetricHyperUnique)
	if err != nil {
		return nil, err
	}
	return w.sketch[i], nil
}

func (w *writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// Abort implements segwrite.Writer.
func (w *writer) Abort() error {
	w.done = true
	if w.err == nil {
		w.err = fmt.Errorf("columns: writer aborted: %w", ErrState)
	}
	return w.release()
}

func (w *writer) release() error {
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
