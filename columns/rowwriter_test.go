package columns

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/segwrite"
)

// rowsWriter feeds a writer rows for columns' own tests, through the column writers: times,
// raw dimensions and metrics are appended as rows come; dictionary dimensions are buffered
// (provisional ids in order of first appearance) and written at Finish: the dictionary in
// value order, the ids, then a bitmap per id. It does not roll rows up. Rows reach a segment
// outside tests through merger.Builder.
type rowsWriter struct {
	*writer
	schema  Schema
	time    segwrite.NumWriter[int64]
	dims    []segwrite.DimWriter // nil for raw dimensions
	raws    []segwrite.RawWriter // nil for dictionary dimensions
	longs   []segwrite.NumWriter[int64]
	doubles []segwrite.NumWriter[float64]
	sketch  []segwrite.SketchWriter
	buf     []*rowDim // one per dictionary dimension
	rows    int
	flushed bool
}

// rowDim buffers a dictionary dimension.
type rowDim struct {
	index  map[string]uint32 // provisional id, in order of first appearance
	values []string
	ids    []uint32 // provisional ids of every row; nullID for null
	counts []uint32 // multi-value: ids per row
	nulls  bool
}

const nullID = math.MaxUint32

// newRowsWriter returns a writer for schema fed row by row.
func newRowsWriter(schema Schema, opts writerOptions) (*rowsWriter, error) {
	w, err := newWriter(schema, opts)
	if err != nil {
		return nil, err
	}
	rw := &rowsWriter{writer: w, schema: w.Schema()}
	n, m := len(rw.schema.Dimensions), len(rw.schema.Metrics)
	rw.dims, rw.raws, rw.buf = make([]segwrite.DimWriter, n), make([]segwrite.RawWriter, n), make([]*rowDim, n)
	rw.longs, rw.doubles, rw.sketch = make([]segwrite.NumWriter[int64], m), make([]segwrite.NumWriter[float64], m), make([]segwrite.SketchWriter, m)
	if rw.time, err = w.Time(); err != nil {
		return nil, err
	}
	for i, d := range rw.schema.Dimensions {
		if d.Raw {
			rw.raws[i], err = w.Raw(d.Name)
		} else {
			rw.dims[i], err = w.Dim(d.Name)
			rw.buf[i] = &rowDim{index: map[string]uint32{}}
		}
		if err != nil {
			return nil, err
		}
	}
	for i, mt := range rw.schema.Metrics {
		switch mt.column() {
		case MetricLong:
			rw.longs[i], err = w.Long(mt.Name)
		case MetricDouble:
			rw.doubles[i], err = w.Double(mt.Name)
		case MetricHyperUnique:
			rw.sketch[i], err = w.Sketch(mt.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	return rw, nil
}

// AddRow appends one row.
func (w *rowsWriter) AddRow(r Row) error {
	if len(r.Dims) != len(w.schema.Dimensions) || len(r.Metrics) != len(w.schema.Metrics) {
		return fmt.Errorf("columns: row %d: %d dimensions and %d metrics, the schema has %d and %d: %w",
			w.rows, len(r.Dims), len(r.Metrics), len(w.schema.Dimensions), len(w.schema.Metrics), ErrInvalid)
	}
	if err := w.time.Append(r.Time); err != nil {
		return err
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
				return err
			}
			continue
		}
		rd := w.buf[i]
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
		switch m.column() {
		case MetricLong:
			if v.Null {
				err = w.longs[i].AppendNull()
			} else if timed {
				err = w.longs[i].AppendTimed(v.Long, r.Time)
			} else {
				err = w.longs[i].Append(v.Long)
			}
		case MetricDouble:
			if v.Null {
				err = w.doubles[i].AppendNull()
			} else if timed {
				err = w.doubles[i].AppendTimed(v.Double, r.Time)
			} else {
				err = w.doubles[i].Append(v.Double)
			}
		case MetricHyperUnique:
			err = w.sketch[i].Append(v.Sketch)
		}
		if err != nil {
			return err
		}
	}
	w.rows++
	return nil
}

// flush writes the buffered dictionary dimensions: dictionary, ids, bitmaps.
func (w *rowsWriter) flush() error {
	if w.flushed || w.rows == 0 {
		return nil // no row added: the dimensions are the caller's (or empty)
	}
	w.flushed = true
	for i, rd := range w.buf {
		if rd == nil {
			continue
		}
		if err := w.flushDim(w.dims[i], !w.schema.Dimensions[i].NoBitmapIndex, rd); err != nil {
			return err
		}
		w.buf[i] = nil
	}
	return nil
}

func (w *rowsWriter) flushDim(dw segwrite.DimWriter, bitmaps bool, rd *rowDim) error {
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
	var bms []*roaring.Bitmap
	if bitmaps {
		bms = make([]*roaring.Bitmap, dw.Cardinality())
		for k := range bms {
			bms[k] = roaring.New()
		}
	}
	var buf []uint32
	pos := 0
	for row := 0; row < w.rows; row++ {
		n := 1
		if rd.counts != nil {
			n = int(rd.counts[row])
		}
		buf = buf[:0]
		for _, p := range rd.ids[pos : pos+n] {
			id := uint32(0)
			if p != nullID {
				id = final[p]
			}
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
	for id, bm := range bms {
		bm.RunOptimize()
		if err := dw.WriteBitmap(uint32(id), bm); err != nil {
			return err
		}
	}
	return nil
}

// Finish writes the buffered dimensions, then publishes the segment (writer.Finish).
func (w *rowsWriter) Finish(dst string, opts PublishOptions) (Info, error) {
	return w.FinishContext(context.Background(), dst, opts)
}

// FinishContext writes the buffered dimensions, then publishes (writer.FinishContext).
func (w *rowsWriter) FinishContext(ctx context.Context, dst string, opts PublishOptions) (Info, error) {
	if err := w.flush(); err != nil {
		return Info{}, multierr.Join(err, w.Abort())
	}
	return w.writer.FinishContext(ctx, dst, opts)
}

// FinishTo writes the buffered dimensions, then streams the segment (writer.FinishTo).
func (w *rowsWriter) FinishTo(out io.Writer) (Info, error) {
	if err := w.flush(); err != nil {
		return Info{}, multierr.Join(err, w.Abort())
	}
	return w.writer.FinishTo(out)
}
