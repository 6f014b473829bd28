package merger

import (
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/internal/slicesx"
	"github.com/writeout/writeout/merger/internal/source"
)

// numTask writes a long or double metric. It walks a batch's output rows: runs of single
// values (one source row each, as where inputs interleave row by row, or a run of one source's
// rows) go to the writer as they are, in bulk; every other row is combined by the metric's
// kernel in rows, the one part that differs between longs (pre-aggregated groups, sum
// carries) and doubles (doubleSum's exactness tails, NaN bits kept by copying only sums).
type numTask[T columns.Number] struct {
	name  string
	agg   agg.Agg
	w     colwrite.NumWriter[T]
	vals  valReader[T]
	times *valReader[int64] // first/last only
	nulls nullsReader
	names []string
	// asIs tells, per source, whether one value of it may be stored as it is, not through the
	// kernel: always for a long; for a double only a doubleSum's from a source without tails
	// (Min and Max go through math.Min and math.Max, which change a NaN's bits).
	asIs  []bool
	plain []bool   // per source: asIs, and its values come as they are (see valReader.plain)
	pend  []T      // values waiting to be appended in bulk
	picks []T      // the values of a step's ranges (see gather)
	off   []uint32 // per source: where gather holds its rows in picks
	rows  numRows
}

// numRows is the per-type part of a numTask: longTask or doubleTask.
type numRows interface {
	// row combines refs [start, end) of b into output row r and appends the result, or adds
	// it to the task's pend.
	row(b *batch, r int, start, end int32) error
	// slotRows appends the values of output rows r.. of b (whose refs start at k) while
	// each combines only slots of pre-aggregated groups loaded (see longTask.slotRows); it
	// returns the row it stopped at and that row's first ref.
	slotRows(b *batch, r int, k int32) (int, int32, error)
	// retire drops what the rows kept of the sources b retires.
	retire(b *batch)
}

func (t *numTask[T]) fail(b *batch, k int32, err error) error {
	return fmt.Errorf("merger: %s: metric %q: %w", t.names[b.refIn[k]], t.name, err)
}

// appended wraps a writer's error with the metric's name.
func (t *numTask[T]) appended(err error) error {
	if err != nil {
		return fmt.Errorf("merger: metric %q: %w", t.name, err)
	}
	return nil
}

// flush appends the pending values.
func (t *numTask[T]) flush() error {
	if len(t.pend) == 0 {
		return nil
	}
	err := t.w.AppendValues(t.pend)
	t.pend = t.pend[:0]
	return t.appended(err)
}

func (t *numTask[T]) write(b *batch) error {
	defer t.vals.retire(b)
	defer t.rows.retire(b)
	if t.times != nil {
		defer t.times.retire(b)
	}
	if t.plain == nil {
		t.plain = t.vals.plain(&t.nulls, t.times)
		for i, ok := range t.asIs {
			t.plain[i] = t.plain[i] && ok
		}
	}
	t.pend = t.pend[:0]
	start, step := int32(0), 0
	for r := 0; r < len(b.refEnd); r++ {
		for step < len(b.steps) && int(b.steps[step].row) < r {
			step++
		}
		if step < len(b.steps) && int(b.steps[step].row) == r {
			// Rows of an interleaving step: each input's values read in bulk, then picked.
			s := &b.steps[step]
			step++
			if t.times == nil {
				ok, err := t.gather(b, s)
				if err != nil {
					return err
				}
				if ok {
					r += int(s.n) - 1
					start += s.n
					continue
				}
			}
		}
		next := len(b.refEnd) // the next step's first row
		if step < len(b.steps) {
			next = int(b.steps[step].row)
		}
		if b.run[r] == 1 && t.times == nil && t.plain[b.refIn[start]] {
			// Rows of one source row each, outside re-sorted groups: their values as they
			// are, from each source's chunk at hand, in one loop.
			var err error
			if r, start, err = t.singles(b, r, start, next); err != nil {
				return err
			}
			r-- // the row it stopped at goes on below
			continue
		}
		if n := b.run[r]; n > 1 && t.times == nil && t.asIs[b.refIn[start]] {
			if err := t.flush(); err != nil {
				return err
			}
			copied, err := copyRun(b, start, int(n), &t.vals, &t.nulls, t.w.AppendValues, t.names, t.name)
			if err != nil {
				return err
			}
			if copied {
				r += int(n) - 1
				start += n
				continue
			}
		}
		end := b.refEnd[r]
		if end-start == 1 && (b.refHi[start] == 0 || len(b.aggs) == 0) && t.plain[b.refIn[start]] {
			// One value of a plain source, outside a pre-aggregated group: as it is.
			ok, err := t.single(b, start)
			if err != nil {
				return err
			}
			if ok {
				start = end
				continue
			}
		}
		if b.refHi[start] > 0 && len(b.aggs) > 0 {
			// Rows of slots: a rollup's rows of pre-aggregated groups, in one loop.
			next, k, err := t.rows.slotRows(b, r, start)
			if err != nil {
				return err
			}
			if next > r {
				r, start = next-1, k // the row it stopped at goes on above
				continue
			}
		}
		if err := t.rows.row(b, r, start, end); err != nil {
			return err
		}
		start = end
	}
	return t.flush()
}

// single adds to pend the value of ref k of b, one output row's one ref, of a plain source: from
// the re-sorted group loaded or the chunk. It reports false, having added nothing, for a ref in
// a re-sorted group not loaded: the kernel reads it.
func (t *numTask[T]) single(b *batch, k int32) (bool, error) {
	in := b.refIn[k]
	if hi := b.refHi[k]; hi > 0 {
		if w := &t.vals.win[in]; w.hi == hi && w.lo == b.refLo[k] {
			t.pend = append(t.pend, w.vals[b.refRow[k]-w.lo])
			return true, nil
		}
		return false, nil
	}
	v, err := t.vals.r[in].At(int(b.refRow[k]))
	if err != nil {
		return false, t.fail(b, k, err)
	}
	t.pend = append(t.pend, v)
	return true, nil
}

// gather appends to pend the values of the rows of s, a step of b, when every source of it
// is plain (else it reports false, having appended nothing): each source's rows of the step
// read in bulk, one source after the other, then picked by ref.
func (t *numTask[T]) gather(b *batch, s *ilStep) (bool, error) {
	ranges := b.stepRanges[s.lo:s.hi]
	for _, rg := range ranges {
		if !t.plain[rg.in] {
			return false, nil
		}
	}
	// Source in's row r is at picks[r+off[in]].
	off := sized(t.off, len(t.plain))
	vals := t.picks[:0]
	for _, rg := range ranges {
		off[rg.in] = uint32(len(vals)) - rg.row
		c := t.vals.r[rg.in]
		for row, n := int(rg.row), int(rg.n); n > 0; {
			vs, err := c.Range(row, n)
			if err != nil {
				return false, fmt.Errorf("merger: %s: metric %q: %w", t.names[rg.in], t.name, err)
			}
			vals = append(vals, vs...)
			row += len(vs)
			n -= len(vs)
		}
	}
	t.picks, t.off = vals, off
	refIn, refRow := b.refIn[s.k:s.k+s.n], b.refRow[s.k:s.k+s.n]
	out := slicesx.Extend(&t.pend, len(refIn))
	for i, in := range refIn {
		out[i] = vals[refRow[i]+off[in]]
	}
	interleaveGathered.Add(int64(len(out)))
	return true, nil
}

// singles appends to pend the values of output rows r.. of b (whose refs start at k), up to
// row end, while each is a run of one (one ref, outside a re-sorted group) of a plain source;
// it returns the row it stopped at and that row's first ref. Each source's chunk at hand is
// looked at inline; another chunk loads through the cache.
func (t *numTask[T]) singles(b *batch, r int, k int32, end int) (int, int32, error) {
	p := t.pend
	defer func() { t.pend = p }()
	for ; r < end && b.run[r] == 1; r, k = r+1, k+1 {
		in := b.refIn[k]
		if !t.plain[in] {
			break
		}
		c, row := t.vals.r[in], int(b.refRow[k])
		v, ok := c.Cached(row)
		if !ok {
			var err error
			if v, err = c.At(row); err != nil {
				return r, k, t.fail(b, k, err)
			}
		}
		p = append(p, v)
	}
	return r, k, nil
}

// copyRun appends the values of n output rows that each take one source row's value: refs
// k.. of b, consecutive rows of one source (a run, see batch). It reports false, having appended
// nothing, when the source lacks the column or holds a null among them: those go row by row.
// Errors name metric, and a read error the source (names[input]).
func copyRun[T columns.Number](b *batch, k int32, n int, vals *valReader[T], nulls *nullsReader, appendValues func([]T) error,
	names []string, metric string) (bool, error) {
	in, row := b.refIn[k], int(b.refRow[k])
	c := vals.r[in]
	if c == nil || nulls.absent[in] {
		return false, nil
	}
	if bm := nulls.bms[in]; bm != nil && bm.IntersectsWithInterval(uint64(row), uint64(row+n)) {
		return false, nil
	}
	for n > 0 {
		vs, err := c.Range(row, n)
		if err != nil {
			return false, fmt.Errorf("merger: %s: metric %q: %w", names[in], metric, err)
		}
		if err := appendValues(vs); err != nil {
			return false, fmt.Errorf("merger: metric %q: %w", metric, err)
		}
		row += len(vs)
		n -= len(vs)
	}
	return true, nil
}

// valReader reads one long or double column of every source by batch ref: through a chunk
// cache, or, for a ref in a re-sorted group, from the group's values loaded whole and in order.
type valReader[T columns.Number] struct {
	r     []*source.ChunkCache[T] // per source; nil where the source lacks the column
	win   []rangeBuf[T]           // per source: the re-sorted group loaded last
	spare [][]T                   // the memory of retired sources' groups, for the next
}

// plain reports, per source, whether its values of the column come as they are: it has the
// column, no null row, and the metric stores no times (times nil). It also makes the group
// buffers, so that readers may look at them.
func (v *valReader[T]) plain(nulls *nullsReader, times *valReader[int64]) []bool {
	if v.win == nil {
		v.win = make([]rangeBuf[T], len(v.r))
	}
	p := make([]bool, len(v.r))
	for i := range p {
		p[i] = times == nil && v.r[i] != nil && !nulls.absent[i] && nulls.bms[i] == nil
	}
	return p
}

// retire drops the groups of the sources of b.retired, keeping their memory for the next
// source's: inputs that follow one another in time then hold one group's values, not one each.
func (v *valReader[T]) retire(b *batch) {
	for _, in := range b.retired {
		if v.win != nil && v.win[in].vals != nil {
			v.spare = append(v.spare, v.win[in].vals[:0])
			v.win[in] = rangeBuf[T]{}
		}
	}
}

// rangeBuf holds a column's values of source rows [lo, hi).
type rangeBuf[T any] struct {
	lo, hi uint32
	vals   []T
}

func (v *valReader[T]) init(n int, chunker func(i int) source.Chunker[T]) {
	v.r = make([]*source.ChunkCache[T], n)
	for i := range v.r {
		if c := chunker(i); c != nil {
			v.r[i] = &source.ChunkCache[T]{C: c}
		}
	}
}

// read returns the value of ref k of b, and false when its source lacks the column.
func (v *valReader[T]) read(b *batch, k int32) (T, bool, error) {
	in, row := b.refIn[k], b.refRow[k]
	c := v.r[in]
	if c == nil {
		return 0, false, nil
	}
	if hi := b.refHi[k]; hi > 0 {
		if v.win == nil {
			v.win = make([]rangeBuf[T], len(v.r))
		}
		w := &v.win[in]
		if lo := b.refLo[k]; w.lo != lo || w.hi != hi {
			if j := len(v.spare) - 1; j >= 0 && cap(w.vals) < int(hi-lo) {
				w.vals, v.spare = v.spare[j], v.spare[:j]
			}
			w.vals = grown(w.vals[:0], int(hi-lo))
			for r := int(lo); r < int(hi); {
				vs, err := c.Range(r, int(hi)-r)
				if err != nil {
					return 0, false, err
				}
				w.vals = append(w.vals, vs...)
				r += len(vs)
			}
			w.lo, w.hi = lo, hi
		}
		return w.vals[row-w.lo], true, nil
	}
	x, err := c.At(int(row))
	return x, err == nil, err
}

// nullsReader tells, per source, which rows of a long or double metric are null: those of
// the source's nulls part, and every row of a source that lacks the metric.
type nullsReader struct {
	bms    []*roaring.Bitmap // per source, nil when it has no null row
	absent []bool            // per source: it lacks the metric
}

func (n *nullsReader) init(c *core, name string) error {
	n.bms, n.absent = make([]*roaring.Bitmap, len(c.srcs)), make([]bool, len(c.srcs))
	for i, s := range c.srcs {
		if s.Schema().Metric(name) < 0 {
			n.absent[i] = true
			continue
		}
		bm, err := s.MetricNulls(name)
		if err != nil {
			return fmt.Errorf("merger: %s: metric %q: %w", c.names[i], name, err)
		}
		n.bms[i] = bm
	}
	return nil
}

// null reports whether ref k of b is null.
func (n *nullsReader) null(b *batch, k int32) bool {
	in := b.refIn[k]
	return n.absent[in] || (n.bms[in] != nil && n.bms[in].Contains(b.refRow[k]))
}

// readRef returns ref k's value, whether it is null, and, for a first/last metric (times not
// nil), the time stored with it. A null's value and time are not read: agg skips them.
func readRef[T columns.Number](vals *valReader[T], times *valReader[int64], nulls *nullsReader, b *batch, k int32) (T, int64, bool, error) {
	if nulls.null(b, k) {
		return 0, 0, true, nil
	}
	v, _, err := vals.read(b, k)
	if err != nil || times == nil {
		return v, 0, false, err
	}
	t, _, err := times.read(b, k)
	return v, t, false, err
}

// longTask is a long metric's numRows: the kernel, and the slots of pre-aggregated groups
// (see preagg.go).
type longTask struct {
	numTask[int64]
	slots     []slotAccs // per source: its pre-aggregated group loaded last
	spareAccs accMem     // the accumulators' memory of a retired source, for the next
	freeErr   error      // the first error of freeing accumulators' memory (see closeSlots)
	lastSlots *slotAccs  // the slots of the last single-slot row's group, in this batch
	pre       *preloader // nil: no group is combined ahead for the task
}

func (t *longTask) retire(b *batch) {
	t.retireSlots(b)
	t.lastSlots = nil
}

// slotRows appends the values of output rows r.. of b (whose refs start at k) while every ref
// of each is a slot of a plain pre-aggregated group whose accumulators the task holds, and
// the metric stores no times: each row's value is its slots' values combined as row does
// (CombineLong from the identity, in ref order). It stops at a row that row must take: a
// ref of another kind, of a group not loaded yet or of a group with a carry, or a row whose
// sum carries (a sum past the int64 range).
func (t *longTask) slotRows(b *batch, r int, k int32) (int, int32, error) {
	kind := t.agg.Kind
	if t.times != nil || kind.Timed() || t.slots == nil {
		return r, k, nil
	}
	id := kind.LongIdentity()
	p := t.pend
	defer func() { t.pend = p }()
	// What a ref needs of its source's slots, held here a source (direct-mapped: inputs
	// that interleave take each slot from another source's group).
	var held [8]heldSlots
	refIn, refRow, refLo, refHi, refEnd := b.refIn, b.refRow, b.refLo, b.refHi, b.refEnd
	for ; r < len(refEnd); r++ {
		end := refEnd[r]
		v, carry := id, int64(0)
		for j := k; j < end; j++ {
			in := refIn[j]
			h := &held[in&7]
			if h.in != in || h.hi == 0 || h.lo != refLo[j] || h.hi != refHi[j] {
				sa := &t.slots[in]
				if !sa.holds(b, j) || !sa.plain || len(sa.c) != 0 {
					return r, k, nil // row takes it (a carry too: rare)
				}
				*h = heldSlots{in: in, lo: sa.g.lo, hi: sa.g.hi, v: sa.v, dropped: sa.dropped, nextDrop: sa.nextDrop}
			}
			s := refRow[j]
			if int(s) < h.dropped || int(s) >= h.nextDrop { // else passed does nothing
				sa := &t.slots[in]
				if err := sa.passed(s); err != nil {
					return r, k, err
				}
				h.dropped, h.nextDrop = sa.dropped, sa.nextDrop
			}
			var c int64
			v, c = kind.CombineLong(v, h.v[s])
			carry += c
		}
		if carry != 0 {
			return r, k, nil
		}
		p = append(p, v)
		k = end
	}
	return r, k, nil
}

// heldSlots is what slotRows holds of a source's plain slots: its group's rows [lo, hi) (hi 0:
// none), the values, and the slots below which passed has something to do.
type heldSlots struct {
	in                int32
	lo, hi            uint32
	v                 []int64
	dropped, nextDrop int
}

func (t *longTask) row(b *batch, r int, start, end int32) error {
	if end-start == 1 && b.refHi[start] > 0 && len(b.aggs) > 0 {
		// One slot of a plain pre-aggregated group whose sum did not overflow: its value
		// (mostly of the group of the row before: no call to look it up).
		sa := t.lastSlots
		if sa == nil || !sa.holds(b, start) {
			var err error
			if sa, err = t.slotsOf(b, start); err != nil {
				return err
			}
			t.lastSlots = sa
		}
		if s := b.refRow[start]; sa != nil && sa.plain {
			if err := sa.passed(s); err != nil {
				return err
			}
			if sa.carry(s) == 0 {
				t.pend = append(t.pend, sa.v[s])
				return nil
			}
		}
	}
	if end-start == 1 && t.plain[b.refIn[start]] {
		// One value, of a source without nulls here: the row's value as it is, whatever
		// the kind (as copyRun takes it).
		if ok, err := t.single(b, start); ok || err != nil {
			return err
		}
	}
	kind := t.agg.Kind
	acc := agg.NewLongAcc(kind)
	for k := start; k < end; k++ {
		if b.refHi[k] > 0 && len(b.aggs) > 0 { // a slot of a pre-aggregated group?
			sa, err := t.slotsOf(b, k)
			if err != nil {
				return err
			}
			if sa != nil {
				if err := sa.passed(b.refRow[k]); err != nil {
					return err
				}
				acc.Merge(kind, sa.at(b.refRow[k]))
				continue
			}
		}
		// A ref in a re-sorted group whose values are loaded, of a source without nulls
		// here: straight from the group (a rollup's refs are mostly such).
		if in, hi := b.refIn[k], b.refHi[k]; hi > 0 && t.plain[in] {
			if w := &t.vals.win[in]; w.hi == hi && w.lo == b.refLo[k] {
				acc.Add(kind, w.vals[b.refRow[k]-w.lo], 0, false)
				continue
			}
		}
		v, tm, null, err := readRef(&t.vals, t.times, &t.nulls, b, k)
		if err != nil {
			return t.fail(b, k, err)
		}
		acc.Add(kind, v, tm, null)
	}
	v, err := acc.Value()
	if err != nil {
		return fmt.Errorf("merger: metric %q: the output row at time %d: %w", t.name, b.keys.time[r], err)
	}
	if !acc.Null(t.agg) && t.times == nil {
		t.pend = append(t.pend, v)
		return nil
	}
	if err := t.flush(); err != nil {
		return err
	}
	if acc.Null(t.agg) {
		return t.appended(t.w.AppendNull())
	}
	return t.appended(t.w.AppendTimed(v, acc.Time()))
}

// doubleTask is a double metric's numRows: the kernel, with doubleSum's exactness tails.
type doubleTask struct {
	numTask[float64]
	tails   []source.TailReader // doubleSum only: per source, nil where it has none
	acc     agg.DoubleAcc
	tail    []float64
	tailWin []tailRange // per source: the re-sorted group's tails read last
}

func (t *doubleTask) retire(*batch) {}

// slotRows takes no row: a double metric turns pre-aggregation off.
func (t *doubleTask) slotRows(_ *batch, r int, k int32) (int, int32, error) { return r, k, nil }

// row combines refs [start, end) into output row r and appends the result.
func (t *doubleTask) row(b *batch, _ int, start, end int32) error {
	if err := t.flush(); err != nil {
		return err
	}
	kind := t.agg.Kind
	t.acc.Reset(kind)
	one := kind == agg.Sum && t.oneValue(b, start, end)
	for k := start; k < end; k++ {
		v, tm, null, err := readRef(&t.vals, t.times, &t.nulls, b, k)
		if err != nil {
			return t.fail(b, k, err)
		}
		var tail []float64
		if !null {
			if tail, err = t.readTail(b, k); err != nil {
				return t.fail(b, k, err)
			}
		}
		if one && !null {
			// One value: stored as it came, with its tail (a stored pair is canonical).
			return t.appended(t.w.AppendSum(v, tail))
		}
		t.acc.Add(kind, v, tm, tail, null)
	}
	switch {
	case t.acc.Null(t.agg):
		return t.appended(t.w.AppendNull())
	case t.times != nil:
		return t.appended(t.w.AppendTimed(t.acc.V, t.acc.Time()))
	case kind == agg.Sum:
		t.tail = t.acc.Sum.Tail(t.tail[:0])
		return t.appended(t.w.AppendSum(t.acc.Sum.Value(), t.tail))
	}
	return t.appended(t.w.Append(t.acc.V))
}

// oneValue reports whether exactly one of refs [start, end) is not null.
func (t *doubleTask) oneValue(b *batch, start, end int32) bool {
	n := 0
	for k := start; k < end && n < 2; k++ {
		if !t.nulls.null(b, k) {
			n++
		}
	}
	return n == 1
}

// readTail returns the exactness tail of ref k's value (doubleSum), valid until the next call:
// for a ref in a re-sorted group, from the group's tails read whole and in order (read by row,
// the group's rows jump between chunks), else through the source's cursor.
func (t *doubleTask) readTail(b *batch, k int32) ([]float64, error) {
	in := b.refIn[k]
	if t.tails == nil || t.tails[in] == nil {
		return nil, nil
	}
	row := b.refRow[k]
	if hi := b.refHi[k]; hi > 0 {
		if t.tailWin == nil {
			t.tailWin = make([]tailRange, len(t.tails))
		}
		w := &t.tailWin[in]
		if lo := b.refLo[k]; w.lo != lo || w.hi != hi || !w.loaded {
			w.offs, w.terms = append(w.offs[:0], 0), w.terms[:0]
			for r := lo; r < hi; r++ {
				var err error
				if w.terms, err = t.tails[in].Tail(int(r), w.terms); err != nil {
					return nil, err
				}
				w.offs = append(w.offs, uint32(len(w.terms)))
			}
			w.lo, w.hi, w.loaded = lo, hi, true
		}
		i := row - w.lo
		return w.terms[w.offs[i]:w.offs[i+1]], nil
	}
	var err error
	t.tail, err = t.tails[in].Tail(int(row), t.tail[:0])
	return t.tail, err
}

// tailRange holds the tails of source rows [lo, hi): row lo+i's are terms[offs[i]:offs[i+1]].
type tailRange struct {
	lo, hi uint32
	loaded bool
	offs   []uint32
	terms  []float64
}
