package merger

import (
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/axiomhq/hyperloglog"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/internal/source"
)

// The metric column tasks of a merge: each combines, for every output row, the values of the
// source rows it stands for (one without rollup) through the metric's kernel in columns/agg,
// in input order (sources in order, each in its row order), and appends the result.

// metricTask returns the task that writes metric m.
func (c *core) metricTask(w *columns.Writer, m columns.Metric) (colTask, error) {
	a := m.Agg()
	var times *valReader[int64] // first/last: the times stored with the values
	if a.Timed() {
		times = &valReader[int64]{}
		times.init(len(c.srcs), func(i int) source.LongChunker { return c.srcs[i].MetricTimes(m.Name) })
	}
	switch a.Type {
	case agg.Long:
		lw, err := w.Long(m.Name)
		if err != nil {
			return nil, err
		}
		t := &longTask{name: m.Name, agg: a, w: lw, names: c.names, times: times}
		t.vals.init(len(c.srcs), func(i int) source.LongChunker { return c.srcs[i].Long(m.Name) })
		if err := t.nulls.init(c, m.Name); err != nil {
			return nil, err
		}
		return t, nil
	case agg.Double:
		dw, err := w.Double(m.Name)
		if err != nil {
			return nil, err
		}
		t := &doubleTask{name: m.Name, kind: a.Kind, agg: a, w: dw, names: c.names, times: times}
		t.vals.init(len(c.srcs), func(i int) source.DoubleChunker { return c.srcs[i].Double(m.Name) })
		if err := t.nulls.init(c, m.Name); err != nil {
			return nil, err
		}
		if a.Exact() {
			t.tails = make([]source.TailReader, len(c.srcs))
			for i, s := range c.srcs {
				t.tails[i] = s.Tails(m.Name)
			}
		}
		return t, nil
	case agg.Sketch:
		sw, err := w.Sketch(m.Name)
		if err != nil {
			return nil, err
		}
		t := &sketchTask{name: m.Name, w: sw, r: make([]source.SketchReader, len(c.srcs)), names: c.names}
		for i, s := range c.srcs {
			t.r[i] = s.Sketch(m.Name)
		}
		return t, nil
	}
	return nil, fmt.Errorf("metric %q: aggregator %s of no known type: %w", m.Name, m.Aggregator, ErrInvalid)
}

// valReader reads one long or double column of every source by batch ref: through a chunk
// cache, or, for a ref in a re-sorted group, from the group's values loaded whole and in order.
type valReader[T int64 | float64] struct {
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
func readRef[T int64 | float64](vals *valReader[T], times *valReader[int64], nulls *nullsReader, b *batch, k int32) (T, int64, bool, error) {
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

type longTask struct {
	slots []slotAccs // per source: its pre-aggregated group loaded last (see preagg.go)
	plain []bool     // see valReader.plain
	pend  []int64    // write's values waiting to be appended
	name  string
	agg   agg.Agg
	w     *columns.NumWriter[int64]
	vals  valReader[int64]
	times *valReader[int64] // first/last only
	nulls nullsReader
	names []string
}

func (t *longTask) fail(b *batch, k int32, err error) error {
	return fmt.Errorf("merger: %s: metric %q: %w", t.names[b.refIn[k]], t.name, err)
}

// singles appends to pend the values of output rows r.. of b (whose refs start at k) while
// each is a run of one (one ref, outside a re-sorted group) of a source whose values come as
// they are; it returns the row it stopped at and that row's first ref. Each source's chunk
// at hand is looked at inline; another chunk loads through the cache.
func (t *longTask) singles(b *batch, r int, k int32, pend *[]int64) (int, int32, error) {
	p := *pend
	defer func() { *pend = p }()
	for ; r < len(b.run) && b.run[r] == 1; r, k = r+1, k+1 {
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

func (t *longTask) write(b *batch) error {
	defer t.vals.retire(b)
	defer t.retireSlots(b)
	if t.times != nil {
		defer t.times.retire(b)
	}
	if t.plain == nil {
		t.plain = t.vals.plain(&t.nulls, t.times)
	}
	// Values that go to the writer as they are wait in pend, appended in bulk.
	pend := t.pend[:0]
	defer func() { t.pend = pend[:0] }()
	flush := func() error {
		if len(pend) == 0 {
			return nil
		}
		err := t.w.AppendValues(pend)
		pend = pend[:0]
		if err != nil {
			return fmt.Errorf("merger: metric %q: %w", t.name, err)
		}
		return nil
	}
	start := int32(0)
	kind := t.agg.Kind
	var lastSlots *slotAccs // the slots of the last single-slot row's group
	for r := 0; r < len(b.refEnd); r++ {
		if b.run[r] == 1 && t.times == nil && t.plain[b.refIn[start]] {
			// Rows of one source row each, outside re-sorted groups, as where inputs
			// interleave row by row: their values as they are, from each source's chunk at
			// hand, in one loop.
			var err error
			if r, start, err = t.singles(b, r, start, &pend); err != nil {
				return err
			}
			r-- // the row it stopped at goes on below
			continue
		}
		if n := b.run[r]; n > 1 && t.times == nil {
			if err := flush(); err != nil {
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
		if end-start == 1 && b.refHi[start] > 0 && len(b.aggs) > 0 {
			// One slot of a plain pre-aggregated group whose sum did not overflow: its value
			// (mostly of the group of the row before: no call to look it up).
			sa := lastSlots
			if sa == nil || !sa.holds(b, start) {
				var err error
				if sa, err = t.slotsOf(b, start); err != nil {
					return err
				}
				lastSlots = sa
			}
			if s := b.refRow[start]; sa != nil && sa.plain && sa.carry(s) == 0 {
				pend = append(pend, sa.v[s])
				start = end
				continue
			}
		}
		if in := b.refIn[start]; end-start == 1 && t.plain[in] {
			// One value, of a source without nulls here: the row's value as it is, whatever
			// the kind (as copyRun takes it), from the re-sorted group loaded or the chunk.
			if hi := b.refHi[start]; hi > 0 {
				if w := &t.vals.win[in]; w.hi == hi && w.lo == b.refLo[start] {
					pend = append(pend, w.vals[b.refRow[start]-w.lo])
					start = end
					continue
				}
			} else {
				v, err := t.vals.r[in].At(int(b.refRow[start]))
				if err != nil {
					return t.fail(b, start, err)
				}
				pend = append(pend, v)
				start = end
				continue
			}
		}
		acc := agg.NewLongAcc(kind)
		for k := start; k < end; k++ {
			if b.refHi[k] > 0 && len(b.aggs) > 0 { // a slot of a pre-aggregated group?
				sa, err := t.slotsOf(b, k)
				if err != nil {
					return err
				}
				if sa != nil {
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
		start = end
		if !acc.Null(t.agg) && t.times == nil {
			pend = append(pend, v)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if acc.Null(t.agg) {
			err = t.w.AppendNull()
		} else {
			err = t.w.AppendTimed(v, acc.Time())
		}
		if err != nil {
			return fmt.Errorf("merger: metric %q: %w", t.name, err)
		}
	}
	return flush()
}

type doubleTask struct {
	name    string
	kind    agg.Kind
	agg     agg.Agg
	nulls   nullsReader
	w       *columns.NumWriter[float64]
	vals    valReader[float64]
	times   *valReader[int64]   // first/last only
	tails   []source.TailReader // doubleSum only: per source, nil where it has none
	names   []string
	acc     agg.DoubleAcc
	tail    []float64
	tailWin []tailRange // per source: the re-sorted group's tails read last
}

func (t *doubleTask) fail(b *batch, k int32, err error) error {
	return fmt.Errorf("merger: %s: metric %q: %w", t.names[b.refIn[k]], t.name, err)
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

func (t *doubleTask) write(b *batch) error {
	defer t.vals.retire(b)
	if t.times != nil {
		defer t.times.retire(b)
	}
	start := int32(0)
	for r := 0; r < len(b.refEnd); r++ {
		// A run of single values copies as it is for a doubleSum whose source stores no
		// tails (one value is stored as it came); Min and Max go through math.Min and
		// math.Max, which change a NaN's bits: row by row.
		if n := b.run[r]; n > 1 && t.kind == agg.Sum && t.times == nil && (t.tails == nil || t.tails[b.refIn[start]] == nil) {
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
		if err := t.row(b, r, start, end); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// copyRun appends the values of n output rows that each take one source row's value: refs
// k.. of b, consecutive rows of one source (a run, see batch). It reports false, having appended
// nothing, when the source lacks the column or holds a null among them: those go row by row.
// Errors name metric, and a read error the source (names[input]).
func copyRun[T int64 | float64](b *batch, k int32, n int, vals *valReader[T], nulls *nullsReader, appendValues func([]T) error,
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

// row combines refs [start, end) into output row r and appends the result.
func (t *doubleTask) row(b *batch, r int, start, end int32) error {
	t.acc.Reset(t.kind)
	one := t.kind == agg.Sum && t.oneValue(b, start, end)
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
		t.acc.Add(t.kind, v, tm, tail, null)
	}
	switch {
	case t.acc.Null(t.agg):
		return t.appended(t.w.AppendNull())
	case t.times != nil:
		return t.appended(t.w.AppendTimed(t.acc.V, t.acc.Time()))
	case t.kind == agg.Sum:
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

func (t *doubleTask) appended(err error) error {
	if err != nil {
		return fmt.Errorf("merger: metric %q: %w", t.name, err)
	}
	return nil
}

type sketchTask struct {
	name    string
	w       *columns.SketchWriter
	r       []source.SketchReader
	names   []string
	scratch hyperloglog.Sketch
	win     []blobRange
}

// blobRange holds a sketch column's bytes of source rows [lo, hi).
type blobRange struct {
	lo, hi uint32
	offs   []uint32
	data   []byte
}

// read returns the serialized sketch of ref k of b (nil when its source lacks the metric),
// valid until the next read.
func (t *sketchTask) read(b *batch, k int32) ([]byte, error) {
	in, row := b.refIn[k], b.refRow[k]
	sr := t.r[in]
	if sr == nil {
		return nil, nil
	}
	if hi := b.refHi[k]; hi > 0 {
		if t.win == nil {
			t.win = make([]blobRange, len(t.r))
		}
		w := &t.win[in]
		if lo := b.refLo[k]; w.lo != lo || w.hi != hi {
			w.offs, w.data = append(w.offs[:0], 0), w.data[:0]
			for r := lo; r < hi; r++ {
				raw, err := sr.Bytes(int(r))
				if err != nil {
					return nil, fmt.Errorf("merger: %s: metric %q: %w", t.names[in], t.name, err)
				}
				w.data = append(w.data, raw...)
				w.offs = append(w.offs, uint32(len(w.data)))
			}
			w.lo, w.hi = lo, hi
		}
		i := row - w.lo
		return w.data[w.offs[i]:w.offs[i+1]], nil
	}
	raw, err := sr.Bytes(int(row))
	if err != nil {
		return nil, fmt.Errorf("merger: %s: metric %q: %w", t.names[in], t.name, err)
	}
	return raw, nil
}

func (t *sketchTask) write(b *batch) error {
	start := int32(0)
	for _, end := range b.refEnd {
		var err error
		if end-start == 1 {
			var raw []byte
			if raw, err = t.read(b, start); err != nil {
				return err
			}
			if raw == nil && t.r[b.refIn[start]] == nil {
				err = t.w.Append(nil)
			} else {
				// Copied as it is: it must decode (Verify decodes every sketch).
				if err := source.CheckSketch(raw, &t.scratch); err != nil {
					return fmt.Errorf("merger: %s: metric %q: row %d: %w: %w", t.names[b.refIn[start]], t.name, b.refRow[start], columns.ErrCorrupt, err)
				}
				err = t.w.AppendBytes(raw)
			}
		} else {
			var acc *hyperloglog.Sketch // nil: every source lacked the metric; written empty
			for k := start; k < end; k++ {
				if t.r[b.refIn[k]] == nil {
					continue
				}
				raw, err := t.read(b, k)
				if err != nil {
					return err
				}
				if err := agg.UnmarshalSketch(&t.scratch, raw); err != nil {
					return fmt.Errorf("merger: %s: metric %q: row %d: %w: %w", t.names[b.refIn[k]], t.name, b.refRow[k], columns.ErrCorrupt, err)
				}
				if acc == nil {
					acc = &hyperloglog.Sketch{}
				}
				if err := agg.MergeSketch(acc, &t.scratch); err != nil {
					return fmt.Errorf("merger: %s: metric %q: %w", t.names[b.refIn[k]], t.name, err)
				}
			}
			agg.Canonicalize(acc) // combined from several rows: the one form of its set
			err = t.w.Append(acc)
		}
		if err != nil {
			return fmt.Errorf("merger: metric %q: %w", t.name, err)
		}
		start = end
	}
	return nil
}
