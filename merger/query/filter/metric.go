package filter

import (
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/internal/source"
)

func isMetricLeaf(f Filter) bool {
	switch f.(type) {
	case cmpFilter, numInFilter:
		return true
	}
	return false
}

func notMetricLeaf(f Filter) bool { return !isMetricLeaf(f) }

// matcher selects values of one type: a span, or a set (an in list).
type matcher[T int64 | float64] interface {
	match(out []uint32, first int, vals []T) []uint32
}

// set is an in list's values; not: the values outside it.
type set[T int64 | float64] struct {
	vals map[T]struct{}
	not  bool
}

func (s set[T]) match(out []uint32, first int, vals []T) []uint32 {
	for i, v := range vals {
		if _, ok := s.vals[v]; ok != s.not {
			out = append(out, uint32(first+i))
		}
	}
	return out
}

// metric returns the rows whose metric value f holds for, among within (nil: every row).
// Null values match nothing; a metric the source lacks is null in every row.
func (e *filterEval) metric(f Filter, within *roaring.Bitmap) (*roaring.Bitmap, error) {
	var col string
	switch f := f.(type) {
	case cmpFilter:
		col = f.Col
	case numInFilter:
		col = f.Col
	}
	schema := e.src.Schema()
	k := schema.Metric(col)
	if k < 0 {
		if schema.Dimension(col) >= 0 {
			return nil, fmt.Errorf("filter: %s: %q is a dimension, which compares with quoted strings", f, col)
		}
		return roaring.New(), nil // null everywhere: no comparison holds
	}
	var (
		out *roaring.Bitmap
		err error
	)
	switch typ := schema.Metrics[k].Agg().Type; typ {
	case agg.Long:
		var m matcher[int64]
		switch f := f.(type) {
		case cmpFilter:
			sp := f.intSpan()
			if sp.empty() && !sp.not {
				return roaring.New(), nil
			}
			m = sp
		case numInFilter:
			st := set[int64]{vals: map[int64]struct{}{}, not: f.Not}
			for _, n := range f.Nums {
				if sp := (cmpFilter{Op: opEq, Lo: n}).intSpan(); !sp.empty() {
					st.vals[sp.lo] = struct{}{}
				}
			}
			m = st
		}
		c := e.src.Long(col)
		if c == nil {
			return roaring.New(), nil
		}
		out, err = scan(c, e.n, m, within)
	case agg.Double:
		var m matcher[float64]
		switch f := f.(type) {
		case cmpFilter:
			sp := f.floatSpan()
			if sp.empty() && !sp.not {
				return roaring.New(), nil
			}
			m = sp
		case numInFilter:
			st := set[float64]{vals: map[float64]struct{}{}, not: f.Not}
			for _, n := range f.Nums {
				st.vals[n.float()] = struct{}{}
			}
			m = st
		}
		c := e.src.Double(col)
		if c == nil {
			return roaring.New(), nil
		}
		out, err = scan(c, e.n, m, within)
	case agg.SketchType:
		return nil, fmt.Errorf("filter: %s: %q is a %s metric; comparisons apply to long and double metrics", f, col, schema.Metrics[k].Aggregator)
	default:
		return nil, fmt.Errorf("filter: %s: %q is a %s metric; comparisons apply to long and double metrics", f, col, schema.Metrics[k].Aggregator)
	}
	if err != nil {
		return nil, fmt.Errorf("metric %q: %w", col, err)
	}
	nulls, err := e.src.MetricNulls(col)
	if err != nil {
		return nil, fmt.Errorf("metric %q: %w", col, err)
	}
	if nulls != nil {
		out.AndNot(nulls)
	}
	return out, nil
}

// scan returns the rows among within (nil: rows 0 to n-1) whose values m matches, reading the
// column a chunk at a time: every chunk when within is nil or holds many rows, else only the
// values of within's rows.
func scan[T int64 | float64](c source.Chunker[T], n int, m matcher[T], within *roaring.Bitmap) (*roaring.Bitmap, error) {
	out := roaring.New()
	var buf []uint32
	if within != nil && within.GetCardinality() < uint64(n)/16 {
		cache := source.ChunkCache[T]{C: c}
		rows := make([]uint32, 1024)
		vals := make([]T, 1024)
		it := within.ManyIterator()
		for {
			k := it.NextMany(rows)
			if k == 0 {
				return out, nil
			}
			if int(rows[k-1]) >= n {
				return nil, fmt.Errorf("row %d past the %d rows: %w", rows[k-1], n, columns.ErrCorrupt)
			}
			if err := cache.Gather(rows[:k], vals[:k]); err != nil {
				return nil, err
			}
			buf = m.match(buf[:0], 0, vals[:k])
			for i, j := range buf { // positions in rows -> rows
				buf[i] = rows[j]
			}
			out.AddMany(buf)
		}
	}
	for row := 0; row < n; {
		first, vals, err := c.Chunk(row)
		if err != nil {
			return nil, err
		}
		if first > row || first+len(vals) <= row {
			return nil, fmt.Errorf("chunk at %d of %d values does not hold row %d: %w", first, len(vals), row, columns.ErrCorrupt)
		}
		vals = vals[row-first : min(len(vals), n-first)]
		buf = m.match(buf[:0], row, vals)
		out.AddMany(buf)
		row += len(vals)
	}
	if within != nil {
		out.And(within)
	}
	return out, nil
}
