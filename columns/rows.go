package columns

import "github.com/RoaringBitmap/roaring/v2"

// RowReader reads whole rows through one cursor per column: reading rows in order decodes
// each chunk once. Use it from one goroutine at a time.
type RowReader struct {
	seg      *Segment
	time     *Cursor[int64]
	dims     []*DimCursor
	raws     []*RawCursor
	longs    []*Cursor[int64]
	doubles  []*Cursor[float64]
	sketches []*SketchCursor
	nulls    []*roaring.Bitmap // per metric: its null rows, nil when none (or not read yet)
	nullsOK  bool
}

// RowReader returns a reader of whole rows.
func (s *Segment) RowReader() *RowReader {
	r := &RowReader{seg: s, time: s.time.Cursor()}
	for i := range s.f.schema.Dimensions {
		var dc *DimCursor
		var rc *RawCursor
		if s.dims[i] != nil {
			dc = s.dims[i].Cursor()
		} else {
			rc = s.raws[i].Cursor()
		}
		r.dims, r.raws = append(r.dims, dc), append(r.raws, rc)
	}
	for i := range s.f.schema.Metrics {
		var (
			l *Cursor[int64]
			d *Cursor[float64]
			k *SketchCursor
		)
		switch {
		case s.longs[i] != nil:
			l = s.longs[i].Cursor()
		case s.doubles[i] != nil:
			d = s.doubles[i].Cursor()
		default:
			k = s.sketches[i].Cursor()
		}
		r.longs, r.doubles, r.sketches = append(r.longs, l), append(r.doubles, d), append(r.sketches, k)
	}
	return r
}

// Read reads row into out, reusing out's outer slices; dimension values and sketches are new.
func (r *RowReader) Read(row int, out *Row) error {
	var err error
	if out.Time, err = r.time.At(row); err != nil {
		return err
	}
	out.Dims = grow(out.Dims[:0], len(r.dims))
	for i := range r.dims {
		if r.dims[i] != nil {
			if out.Dims[i], err = r.dims[i].Values(row); err != nil {
				return err
			}
			continue
		}
		v, ok, err := r.raws[i].At(row)
		if err != nil {
			return err
		}
		out.Dims[i] = nil
		if ok {
			out.Dims[i] = []string{v}
		}
	}
	if !r.nullsOK {
		r.nulls = make([]*roaring.Bitmap, len(r.longs))
		for i := range r.longs {
			var bm *roaring.Bitmap
			switch {
			case r.seg.longs[i] != nil:
				bm, err = r.seg.longs[i].Nulls()
			case r.seg.doubles[i] != nil:
				bm, err = r.seg.doubles[i].Nulls()
			}
			if err != nil {
				return err
			}
			r.nulls[i] = bm
		}
		r.nullsOK = true
	}
	out.Metrics = grow(out.Metrics[:0], len(r.longs))
	for i := range r.longs {
		var v Value
		switch {
		case r.longs[i] != nil:
			v.Long, err = r.longs[i].At(row)
		case r.doubles[i] != nil:
			v.Double, err = r.doubles[i].At(row)
		default:
			v.Sketch, err = r.sketches[i].sketch(row)
		}
		if err != nil {
			return err
		}
		if r.nulls[i] != nil && r.nulls[i].Contains(uint32(row)) {
			v.Null = true
		}
		out.Metrics[i] = v
	}
	return nil
}

// ReadRow reads one row; use a RowReader to read many.
func (s *Segment) ReadRow(row int) (Row, error) {
	var out Row
	err := s.RowReader().Read(row, &out)
	return out, err
}
