package filter

import (
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/columns/agg"

	"github.com/writeout/writeout/merger/internal/source"
)

// Eval evaluates f over a source's rows to the bitmap of the rows it selects; nil means every
// row. The bitmap may be one of the source's own: the caller must not change it. It is the
// query engine's entry point: a source is internal to the merger. Dimension predicates come
// from the bitmap indexes (or a scan of the ids); metric comparisons scan the metric's values
// a chunk at a time, and in an "and" they run after the other predicates, reading only the
// rows those left when they are few (under 1/16 of the rows). A metric comparison on a
// dimension, or on a sketch metric, is an error (the query checks for these first).
func Eval(src source.Source, f Filter) (*roaring.Bitmap, error) {
	if f == nil {
		return nil, nil
	}
	return (&filterEval{src: src, n: src.Rows()}).eval(f)
}

type filterEval struct {
	src source.Source
	n   int
}

func (e *filterEval) all() *roaring.Bitmap {
	bm := roaring.New()
	bm.AddRange(0, uint64(e.n))
	return bm
}

func (e *filterEval) eval(f Filter) (*roaring.Bitmap, error) {
	switch f := f.(type) {
	case nil:
		return e.all(), nil
	case eqFilter:
		return e.values(f.Dim, []string{f.Value})
	case inFilter:
		return e.values(f.Dim, f.Values)
	case nullFilter:
		return e.nulls(f.Dim)
	case cmpFilter, numInFilter:
		return e.metric(f, nil)
	case andFilter:
		if len(f) == 0 {
			return e.all(), nil
		}
		// Metric comparisons last, over the rows the others left (their values are read
		// only there when those are few): dimension predicates come from the bitmap indexes.
		var acc *roaring.Bitmap
		for _, g := range slices.Concat(slices.DeleteFunc(slices.Clone(f), isMetricLeaf), slices.DeleteFunc(slices.Clone(f), notMetricLeaf)) {
			var bm *roaring.Bitmap
			var err error
			if isMetricLeaf(g) {
				bm, err = e.metric(g, acc)
			} else {
				bm, err = e.eval(g)
			}
			if err != nil {
				return nil, err
			}
			if acc == nil {
				acc = bm.Clone()
			} else {
				acc.And(bm)
			}
			if acc.IsEmpty() {
				break
			}
		}
		return acc, nil
	case orFilter:
		bms := make([]*roaring.Bitmap, 0, len(f))
		for _, g := range f {
			bm, err := e.eval(g)
			if err != nil {
				return nil, err
			}
			bms = append(bms, bm)
		}
		return roaring.FastOr(bms...), nil
	case notFilter:
		bm, err := e.eval(f.Filter)
		if err != nil {
			return nil, err
		}
		return roaring.Flip(bm, 0, uint64(e.n)), nil
	}
	return nil, fmt.Errorf("filter: unknown filter %T", f)
}

// values returns the rows holding any of vals in dim: through the bitmap index when there is
// one, else by scanning the rows.
func (e *filterEval) values(dim string, vals []string) (*roaring.Bitmap, error) {
	ds, err := e.src.Dim(dim)
	if err != nil {
		return nil, err
	}
	if ds != nil {
		var ids []uint32
		for _, v := range vals {
			id, ok, err := ds.Lookup(v)
			if err != nil {
				return nil, err
			}
			if ok {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return roaring.New(), nil
		}
		if ds.HasBitmaps() {
			if len(ids) == 1 {
				return ds.Bitmap(ids[0])
			}
			bms := make([]*roaring.Bitmap, len(ids))
			for k, id := range ids {
				bm, err := ds.Bitmap(id)
				if err != nil {
					return nil, err
				}
				bms[k] = bm
			}
			return roaring.FastOr(bms...), nil
		}
		return scanIDs(ds, e.n, ids)
	}
	if rr := e.src.Raw(dim); rr != nil {
		set := map[string]bool{}
		for _, v := range vals {
			set[v] = true
		}
		out := roaring.New()
		for r := 0; r < e.n; r++ {
			b, ok, err := rr.Bytes(r)
			if err != nil {
				return nil, err
			}
			if ok && set[string(b)] {
				out.Add(uint32(r))
			}
		}
		return out, nil
	}
	return roaring.New(), nil // a dimension the source lacks is null: no value matches
}

// scanIDs returns the rows of a dictionary dimension holding any of ids, reading every row.
func scanIDs(ds source.DimSource, n int, ids []uint32) (*roaring.Bitmap, error) {
	match := make([]bool, ds.Cardinality())
	for _, id := range ids {
		match[id] = true
	}
	out := roaring.New()
	ic := source.IDCache{C: ds.Cursor()}
	for r := 0; r < n; r++ {
		row, err := ic.At(r)
		if err != nil {
			return nil, err
		}
		for _, id := range row {
			if int(id) < len(match) && match[id] {
				out.Add(uint32(r))
				break
			}
		}
	}
	return out, nil
}

func (e *filterEval) nulls(dim string) (*roaring.Bitmap, error) {
	if k := e.src.Schema().Metric(dim); k >= 0 {
		if e.src.Schema().Metrics[k].Agg().Type == agg.SketchType {
			return nil, fmt.Errorf("filter: %s is null: %q is a sketch metric (%s), which is never null", quoteIdent(dim), dim, e.src.Schema().Metrics[k].Aggregator)
		}
		bm, err := e.src.MetricNulls(dim)
		if err != nil {
			return nil, fmt.Errorf("metric %q: %w", dim, err)
		}
		if bm == nil {
			return roaring.New(), nil
		}
		return bm, nil
	}
	ds, err := e.src.Dim(dim)
	if err != nil {
		return nil, err
	}
	if ds != nil {
		return ds.Nulls()
	}
	if rr := e.src.Raw(dim); rr != nil {
		out := roaring.New()
		for r := 0; r < e.n; r++ {
			_, ok, err := rr.Bytes(r)
			if err != nil {
				return nil, err
			}
			if !ok {
				out.Add(uint32(r))
			}
		}
		return out, nil
	}
	return e.all(), nil
}
