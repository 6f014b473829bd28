package columns

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
)

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
			row, len(r.Dims), len(r.Metrics), len(w.schema.Dimensions), len(w.schema.Metrics), ErrInvalid)
	}
	for i, d := range w.schema.Dimensions {
		if !d.MultiValue && len(r.Dims[i]) > 1 {
			return fmt.Errorf("columns: column %q: row %d: %d values in a single-value dimension: %w", d.Name, row, len(r.Dims[i]), ErrInvalid)
		}
		for _, v := range r.Dims[i] {
			if len(v) > MaxValueBytes {
				return fmt.Errorf("columns: column %q: row %d: value of %d bytes, at most %d: %w", d.Name, row, len(v), MaxValueBytes, ErrInvalid)
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
			return w.fail(err)
		}
	}
	return nil
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
