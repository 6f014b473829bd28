package merger

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/internal/scratch"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/internal/source"
)

// A bview is a Builder's rows as a source. Row numbers are the order rows were added. For
// queries (sorted false) dimension ids are the builder's own, in the order values were first
// seen; for Persist (sorted true) they are the ids of sorted dictionaries, as the merge core
// wants. A view is used under the builder's read lock.
type bview struct {
	b      *Builder
	n      int
	sorted bool
	order  []uint32
	dims   map[string]*bdimView
	// Persist views: the scratch arrays behind order and the dimensions' sorted ids, freed
	// by release. (Scratch memory: a persist after another takes the same pages from the
	// pool instead of faulting in new ones.)
	orderArr scratch.Array[uint32]
}

// release frees a persist view's scratch arrays; nothing may use the view after.
func (v *bview) release() error {
	errs := []error{v.orderArr.Free()}
	for _, dv := range v.dims {
		errs = append(errs, dv.idsArr.Free())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("merger: builder: %w", err)
	}
	return nil
}

// view returns a query view of the builder and the function that releases it.
func (b *Builder) view() (source.Source, func()) {
	b.mu.RLock()
	return b.newView(false), b.mu.RUnlock
}

// init lets package merger/query read builders (source.BuilderView) without this package
// exporting anything for queries.
func init() {
	source.BuilderView = func(q any) (func() (source.Source, func()), bool) {
		b, ok := q.(*Builder)
		if !ok {
			return nil, false
		}
		if b == nil {
			return nil, true
		}
		return b.view, true
	}
}

// persistView returns the view Persist merges; the caller holds the read lock, and releases
// the view (release) once the merge is over.
func (b *Builder) persistView() *bview {
	v := b.newView(true)
	times := b.times[:v.n]
	if slices.IsSorted(times) {
		return v // rows added in time order (the common case): no order needed
	}
	v.orderArr = scratch.New[uint32](v.n)
	v.order = v.orderArr.S
	for i := range v.order {
		v.order[i] = uint32(i)
	}
	slices.SortStableFunc(v.order, func(x, y uint32) int {
		switch tx, ty := times[x], times[y]; {
		case tx < ty:
			return -1
		case tx > ty:
			return 1
		}
		return 0
	})
	return v
}

func (b *Builder) newView(sorted bool) *bview {
	v := &bview{b: b, n: b.n, sorted: sorted, dims: map[string]*bdimView{}}
	for _, d := range b.dims {
		if d.kind == kindRaw {
			continue
		}
		dv := &bdimView{d: d, n: b.n, live: d.live != nil}
		if sorted {
			dv.sortDictionary()
		}
		v.dims[d.dim.Name] = dv
	}
	return v
}

func (v *bview) Schema() columns.Schema { return v.b.schema }
func (v *bview) Rows() int              { return v.n }

func (v *bview) TimeOrder() []uint32       { return v.order }
func (v *bview) Times() source.LongChunker { return wholeLongs(v.b.times[:v.n]) }

func (v *bview) Dim(name string) (source.DimSource, error) {
	if dv, ok := v.dims[name]; ok {
		return dv, nil
	}
	return nil, nil
}

func (v *bview) Raw(name string) source.RawReader {
	k := v.b.schema.Dimension(name)
	if k < 0 || v.b.dims[k].kind != kindRaw {
		return nil
	}
	return bRaw{v.b.dims[k]}
}

func (v *bview) metric(name string) *bmet {
	if k := v.b.schema.Metric(name); k >= 0 {
		return v.b.mets[k]
	}
	return nil
}

func (v *bview) Long(name string) source.LongChunker {
	if m := v.metric(name); m != nil && m.met.ValueType() == columns.MetricLong {
		if err := v.b.overflow(m); err != nil {
			return errLongs{err}
		}
		return wholeLongs(m.longs[:v.n])
	}
	return nil
}

func (v *bview) Double(name string) source.DoubleChunker {
	if m := v.metric(name); m != nil && m.met.ValueType() == columns.MetricDouble {
		return wholeDoubles(m.dbls[:v.n])
	}
	return nil
}

func (v *bview) MetricTimes(name string) source.LongChunker {
	if m := v.metric(name); m != nil && m.agg.Timed() {
		return wholeLongs(m.times[:v.n])
	}
	return nil
}

func (v *bview) Tails(name string) source.TailReader {
	if m := v.metric(name); m != nil && m.agg.Exact() && len(m.sums) > 0 { // none: every value exact
		return bTails{m}
	}
	return nil
}

// bTails reads the exactness tails of a builder's doubleSum metric: rows combined from
// several hold their exact sums; the others are exact as they are.
type bTails struct{ m *bmet }

func (t bTails) Tail(row int, dst []float64) ([]float64, error) {
	if s := t.m.sums[uint32(row)]; s != nil {
		return s.Tail(dst), nil
	}
	return dst, nil
}

func (v *bview) MetricNulls(name string) (*roaring.Bitmap, error) {
	if m := v.metric(name); m != nil && m.nulls != nil && !m.nulls.IsEmpty() {
		return m.nulls, nil
	}
	return nil, nil
}

func (v *bview) Sketch(name string) source.SketchReader {
	if m := v.metric(name); m != nil && m.agg.Kind == agg.Union {
		return &bSketches{b: v.b, m: m}
	}
	return nil
}

func (v *bview) SketchMerger(name string) source.SketchMerger {
	if m := v.metric(name); m != nil && m.agg.Kind == agg.Union {
		return &bSketches{b: v.b, m: m, pending: map[agg.Sketch]*roaring.Bitmap{}}
	}
	return nil
}

type wholeLongs []int64

func (w wholeLongs) Chunk(row int) (int, []int64, error) { return 0, w, nil }

// errLongs is a column that cannot be read: a sum of a builder's row overflows int64.
type errLongs struct{ err error }

func (e errLongs) Chunk(row int) (int, []int64, error) { return 0, nil, e.err }

type wholeDoubles []float64

func (w wholeDoubles) Chunk(row int) (int, []float64, error) { return 0, w, nil }

type bRaw struct{ d *bdim }

func (r bRaw) Bytes(row int) ([]byte, bool, error) {
	if !r.d.rawOK[row] {
		return nil, false, nil
	}
	return []byte(r.d.raw[row]), true, nil
}

// bSketches reads a builder's hyperUnique metric: a row's sketch is the one it was given or
// merged into, else the sketch of its values of the source dimension.
type bSketches struct {
	b   *Builder
	m   *bmet
	buf []byte
	// Queries: the source dimension's ids of the derived rows merged into each accumulator,
	// inserted once each at flush (inserting a value twice changes nothing, and costs a
	// sparse sketch insertion).
	pending map[agg.Sketch]*roaring.Bitmap
}

func (s *bSketches) rowSketch(row int) (agg.Sketch, error) {
	if sk := s.m.sks[uint32(row)]; sk != nil {
		return sk, nil
	}
	sk := s.m.kind.New()
	return sk, s.b.insertValues(sk, uint32(row), s.m.src)
}

func (s *bSketches) Bytes(row int) ([]byte, error) {
	sk, err := s.rowSketch(row)
	if err != nil {
		return nil, err
	}
	s.buf, err = sk.AppendBinary(s.buf[:0])
	return s.buf, err
}

func (s *bSketches) MergeRow(row int, accp *agg.Sketch) error {
	if sk := s.m.sks[uint32(row)]; sk != nil {
		if *accp == nil {
			*accp = sk.Clone()
			return nil
		}
		return (*accp).Merge(sk)
	}
	if s.m.src < 0 {
		return nil
	}
	if *accp == nil {
		*accp = s.m.kind.New()
	}
	acc := *accp
	d := s.b.dims[s.m.src]
	if d.kind == kindRaw {
		return s.b.insertValues(acc, uint32(row), s.m.src)
	}
	ids := s.pending[acc]
	if ids == nil {
		ids = roaring.New()
		s.pending[acc] = ids
	}
	for _, id := range d.rowIDs(row) {
		if id != 0 {
			ids.Add(id)
		}
	}
	return nil
}

// Flush inserts the pending values into their accumulators.
func (s *bSketches) Flush() error {
	d := s.b.dims[max(s.m.src, 0)]
	for acc, ids := range s.pending {
		it := ids.Iterator()
		for it.HasNext() {
			if err := acc.Insert([]byte(d.vals[it.Next()])); err != nil {
				return err
			}
		}
	}
	clear(s.pending)
	return nil
}

// bdimView is a dictionary dimension of a builder view.
type bdimView struct {
	d    *bdim
	n    int
	live bool
	// sorted dictionary (persist views only)
	sorted   bool
	nullID   bool
	localOf  []uint32              // sorted id -> local id
	sortedOf []uint32              // local id -> sorted id
	ids      []uint32              // rows' ids, sorted ids for persist views
	idsArr   scratch.Array[uint32] // persist views: ids's memory
	multi    []uint32
	offs     []uint32
	// rows of every id, built on the first bitmap a view without live bitmaps is asked for
	csrOffs []uint32
	csrRows []uint32
}

func (dv *bdimView) sortDictionary() {
	d := dv.d
	dv.sorted = true
	dv.nullID = d.nulls > 0
	locals := make([]uint32, 0, len(d.vals)-1)
	for id := 1; id < len(d.vals); id++ {
		locals = append(locals, uint32(id))
	}
	slices.SortFunc(locals, func(a, b uint32) int { return strings.Compare(d.vals[a], d.vals[b]) })
	if dv.nullID {
		dv.localOf = append([]uint32{0}, locals...)
	} else {
		dv.localOf = locals
	}
	dv.sortedOf = make([]uint32, len(d.vals))
	for s, l := range dv.localOf {
		dv.sortedOf[l] = uint32(s)
	}
	if d.kind == kindSingle {
		dv.idsArr = scratch.New[uint32](dv.n)
		dv.ids = dv.idsArr.S
		for r, l := range d.ids[:dv.n] {
			dv.ids[r] = dv.sortedOf[l]
		}
		return
	}
	dv.offs = d.offs[:dv.n+1]
	dv.multi = make([]uint32, dv.offs[dv.n])
	for k, l := range d.multi[:dv.offs[dv.n]] {
		dv.multi[k] = dv.sortedOf[l]
	}
}

func (dv *bdimView) HasNull() bool {
	if dv.sorted {
		return dv.nullID
	}
	return dv.d.nulls > 0
}

func (dv *bdimView) Cardinality() int {
	if dv.sorted {
		return len(dv.localOf)
	}
	return len(dv.d.vals)
}

func (dv *bdimView) MultiValue() bool { return dv.d.kind == kindMulti }
func (dv *bdimView) HasBitmaps() bool { return dv.live }

func (dv *bdimView) Cursor() source.IDChunker {
	if dv.sorted {
		if dv.d.kind == kindSingle {
			return wholeIDs{ids: dv.ids}
		}
		return wholeIDs{ids: dv.multi, offs: dv.offs}
	}
	if dv.d.kind == kindSingle {
		return wholeIDs{ids: dv.d.ids[:dv.n]}
	}
	return wholeIDs{ids: dv.d.multi[:dv.d.offs[dv.n]], offs: dv.d.offs[:dv.n+1]}
}

type wholeIDs struct{ ids, offs []uint32 }

func (w wholeIDs) Chunk(row int) (int, []uint32, []uint32, error) { return 0, w.ids, w.offs, nil }

// dictionary iterates the sorted dictionary (persist views).
func (dv *bdimView) Dictionary() source.DictIterator { return &bDictIter{dv: dv, pos: -1} }

type bDictIter struct {
	dv  *bdimView
	pos int
}

func (it *bDictIter) Next() bool    { it.pos++; return it.pos < len(it.dv.localOf) }
func (it *bDictIter) Value() string { return it.dv.d.vals[it.dv.localOf[it.pos]] }
func (it *bDictIter) IsNull() bool  { return it.dv.localOf[it.pos] == 0 }
func (it *bDictIter) Err() error    { return nil }
func (dv *bdimView) local(id uint32) uint32 {
	if dv.sorted {
		return dv.localOf[id]
	}
	return id
}

func (dv *bdimView) Lookup(v string) (uint32, bool, error) {
	id, ok := dv.d.index[v]
	if !ok {
		return 0, false, nil
	}
	if dv.sorted {
		id = dv.sortedOf[id]
	}
	return id, true, nil
}

func (dv *bdimView) Value(id uint32) (string, bool, error) {
	l := dv.local(id)
	return dv.d.vals[l], l == 0, nil
}

func (dv *bdimView) Bitmap(id uint32) (*roaring.Bitmap, error) {
	if dv.live {
		return dv.d.liveBitmap(dv.local(id)), nil
	}
	bm := roaring.New()
	err := dv.EachRows(id, make([]uint32, 4096), bitmapSink{bm})
	return bm, err
}

type bitmapSink struct{ bm *roaring.Bitmap }

func (s bitmapSink) Rows(rs []uint32) error { s.bm.AddMany(rs); return nil }

func (dv *bdimView) Nulls() (*roaring.Bitmap, error) {
	if dv.live {
		return dv.d.liveBitmap(0), nil
	}
	out := roaring.New()
	d := dv.d
	for r := 0; r < dv.n; r++ {
		if d.rowIDs(r)[0] == 0 {
			out.Add(uint32(r))
		}
	}
	return out, nil
}

func (dv *bdimView) EachRows(id uint32, buf []uint32, sink source.RowSink) error {
	l := dv.local(id)
	if dv.live {
		return source.EachBitmapRows(dv.d.liveBitmap(l), buf, sink)
	}
	if dv.csrOffs == nil {
		dv.buildCSR()
	}
	rows := dv.csrRows[dv.csrOffs[l]:dv.csrOffs[l+1]]
	for len(rows) > 0 {
		k := copy(buf, rows)
		if err := sink.Rows(buf[:k]); err != nil {
			return err
		}
		rows = rows[k:]
	}
	return nil
}

// buildCSR lists the rows of every local id in one pass (a counting sort), for builders
// without live bitmaps: the rows of id l are csrRows[csrOffs[l]:csrOffs[l+1]], increasing.
func (dv *bdimView) buildCSR() {
	d := dv.d
	offs := make([]uint32, len(d.vals)+1)
	for r := 0; r < dv.n; r++ {
		ids := d.rowIDs(r)
		for k, id := range ids {
			if k > 0 && ids[k-1] == id {
				continue
			}
			offs[id+1]++
		}
	}
	for i := 1; i < len(offs); i++ {
		offs[i] += offs[i-1]
	}
	rows := make([]uint32, offs[len(offs)-1])
	fill := slices.Clone(offs[:len(offs)-1])
	for r := 0; r < dv.n; r++ {
		ids := d.rowIDs(r)
		for k, id := range ids {
			if k > 0 && ids[k-1] == id {
				continue
			}
			rows[fill[id]] = uint32(r)
			fill[id]++
		}
	}
	dv.csrOffs, dv.csrRows = offs, rows
}
