package query

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/internal/parallel"
	"github.com/writeout/writeout/merger/internal/schema"
	"github.com/writeout/writeout/merger/internal/source"
	"github.com/writeout/writeout/merger/query/filter"
)

// ErrInvalid marks a bad query: an input that is not a segment or builder, an unknown
// granularity, a group-by dimension listed twice, a group-by or filter dimension in no input
// or that is a metric, a metric in no input.
var ErrInvalid = errors.New("query: invalid argument")

// ErrSchemaConflict marks inputs whose schemas conflict. It is merger.ErrSchemaConflict, the
// same value: queries and merges reject the same inputs.
var ErrSchemaConflict = schema.ErrConflict

// Queryable is what Run reads: a *columns.Segment or a *merger.Builder. Run accepts no other
// type (the interface names what both have in common; the rest goes through each one's own
// readers).
type Queryable interface {
	Schema() columns.Schema
	Rows() int
}

// Spec is a filtered aggregation: the rows Filter selects are grouped by time bucket and by
// the values of the GroupBy dimensions, and each group gets its row count and each metric
// aggregated with the metric's aggregator.
type Spec struct {
	// Filter selects rows; nil selects every row.
	Filter filter.Filter
	// Granularity buckets rows by time: a row's bucket is Granularity.Truncate(time). With All
	// every row falls in one bucket, whose Time is the earliest time among its rows.
	Granularity columns.Granularity
	All         bool
	// GroupBy names dimensions to group by. A multi-value dimension explodes as in Druid: a
	// row counts once in the group of each of its values (a row holding a value twice counts
	// twice in its group), several exploded dimensions give every combination, and a null
	// row (or an empty list) falls in the null group. A dimension a source lacks is null there.
	GroupBy []string
	// Metrics names the metrics to aggregate; nil means every metric of the sources' schemas
	// (first seen first). A source lacking a long or double metric reads as null there (an
	// empty sketch for hyperUnique), as its rows do once merged.
	Metrics []string
	// InputNames name the inputs in error messages; missing names are the path of a segment
	// opened from a file (Segment.Name), else "input N".
	InputNames []string
}

// ParseGranularity parses none, second, minute, hour, day or all (case-insensitively).
func ParseGranularity(s string) (g columns.Granularity, all bool, err error) {
	if strings.EqualFold(s, "all") {
		return columns.GranularityNone, true, nil
	}
	g, err = columns.ParseGranularity(s)
	return g, false, err
}

// Run runs spec on one segment or builder.
//
// Before reading a row, Run checks spec against the inputs' schemas: inputs whose schemas
// conflict (by Merge's rules) are an error wrapping ErrSchemaConflict; a group-by or filter
// dimension in no input or that is a metric, and a metric in no input, an error wrapping
// ErrInvalid. Each names the column, and the input where it is about one.
func Run(ctx context.Context, q Queryable, spec Spec) (Result, error) {
	return RunMany(ctx, []Queryable{q}, spec)
}

// RunMany runs spec on several segments and builders and combines their groups, as if their
// rows were one table. Sums of doubles are exact and rounded once, so the result does not
// depend on how rows are spread over the inputs.
func RunMany(ctx context.Context, qs []Queryable, spec Spec) (Result, error) {
	var res Result
	err := runEach(ctx, qs, spec, false, func(part Result) error { // parts of memory of their own
		if res.Rows == nil {
			res = part
			return nil
		}
		res.Rows = append(res.Rows, part.Rows...)
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// WindowRows is about how many input rows RunEach aggregates at a time when the granularity is
// not all: the time buckets of a window hold about this many rows (a window is one bucket at
// least), and only the groups of two windows are in memory. Small windows keep a window's
// tables in a core's cache.
const WindowRows = 1 << 12

// windowRows is WindowRows; tests lower it to make many windows of few rows.
var windowRows = WindowRows

// denseSlots is DenseSlots; tests lower it to find groups through maps.
var denseSlots = DenseSlots

// RunEach runs spec as RunMany does and hands the groups to each as they are complete, in the
// Result's order, part by part: every part has GroupBy and Metrics, and parts follow one
// another in time. each is called at least once (with no rows when no row matches), always
// on the goroutine that called RunEach; an error from each ends the query and is returned.
//
// A part's memory (its Rows, and their Groups and Values) is reused for a later part once
// each has returned: each must not keep it (Result.Clone copies a part). A part holds at most
// 1,024 groups, so that its memory stays in the cache: a window's groups may come in several.
//
// Segments keep their rows in non-decreasing time (checked as they are read: a row out of
// order is an error wrapping columns.ErrCorrupt), so they are read in windows of whole time
// buckets that hold about WindowRows rows, and a window's groups are combined, handed to each
// and dropped before the next window is read: memory holds the groups of two windows (the
// next is aggregated, on a goroutine of its own, while each has the one before), however many
// groups the query has in all. With All there is one bucket, and a builder keeps its rows in
// the order they were added: then there is one window, and every group is in memory at once.
func RunEach(ctx context.Context, qs []Queryable, spec Spec, each func(Result) error) error {
	return runEach(ctx, qs, spec, true, each)
}

// runEach is RunEach; with reuse false every part has memory of its own.
func runEach(ctx context.Context, qs []Queryable, spec Spec, reuse bool, each func(Result) error) error {
	spec.InputNames = pathNames(qs, spec.InputNames)
	srcs := make([]source.Source, len(qs))
	views := map[any]source.Source{} // a builder listed twice is read-locked once
	for i, q := range qs {
		if q, ok := q.(*columns.Segment); ok {
			if q == nil {
				return fmt.Errorf("%w: %s is nil", ErrInvalid, spec.inputName(i))
			}
			srcs[i] = source.OfSegment(q)
			continue
		}
		var (
			open func() (source.Source, func())
			ok   bool
		)
		if source.BuilderView != nil {
			open, ok = source.BuilderView(q)
		}
		if !ok {
			return fmt.Errorf("%w: %s is a %T; Run reads *columns.Segment and *merger.Builder", ErrInvalid, spec.inputName(i), q)
		}
		if open == nil {
			return fmt.Errorf("%w: %s is nil", ErrInvalid, spec.inputName(i))
		}
		if v, ok := views[q]; ok { // q is a *merger.Builder: a pointer, so a valid key
			srcs[i] = v
			continue
		}
		v, release := open()
		defer release()
		views[q] = v
		srcs[i] = v
	}
	schemas := make([]columns.Schema, len(srcs))
	for i, s := range srcs {
		schemas[i] = s.Schema()
	}
	metrics, err := check(schemas, &spec)
	if err != nil {
		return err
	}
	runners := make([]*runner, len(srcs))
	procs := runtime.GOMAXPROCS(0)
	err = parallel.Run(len(srcs), procs, func(i int) error {
		r := &runner{ctx: ctx, src: srcs[i], spec: &spec, metrics: metrics}
		if err := r.setup(); err != nil {
			return fmt.Errorf("query: %s: %w", spec.inputName(i), err)
		}
		runners[i] = r
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range runners {
		// One input's groups go to the result as they are (takeInto): its dense index sorts
		// them, by bucket, unless the result's order is by each group's first time (All).
		r.dense = newDenseIndex(r, denseSlots/len(runners), len(runners) == 1 && !spec.All)
	}
	p := newPipeline(metrics, spec.GroupBy, spec.All, reuse, oneWindow(runners, &spec))
	return p.run(func() error { return produce(ctx, runners, &spec, p) }, each)
}

// oneWindow reports whether the query is one window: with All there is one bucket, and a
// builder keeps its rows in the order they were added (with a builder among the inputs, whose
// rows are in memory already, there are no windows).
func oneWindow(runners []*runner, spec *Spec) bool {
	if spec.All {
		return true
	}
	for _, r := range runners {
		if !r.ordered {
			return true
		}
	}
	return false
}

// produce aggregates the runners' rows window by window and hands each window's groups to p.
func produce(ctx context.Context, runners []*runner, spec *Spec, p *pipeline) error {
	procs := runtime.GOMAXPROCS(0)
	emitted := false
	// window aggregates every input's rows before end, combines their groups and hands them on.
	window := func(end int64) (rows int, err error) {
		if err := ctx.Err(); err != nil { // rows are read 1024 at a time, a window may hold fewer
			return 0, err
		}
		err = parallel.Run(len(runners), procs, func(i int) error {
			r := runners[i]
			if err := r.aggregateUntil(end); err != nil {
				return fmt.Errorf("query: %s: %w", spec.inputName(i), err)
			}
			for _, rd := range r.readers {
				if f, ok := rd.sketch.(interface{ Flush() error }); ok {
					if err := f.Flush(); err != nil {
						return fmt.Errorf("query: %s: %w", spec.inputName(i), err)
					}
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		glob, err := p.table()
		if err != nil {
			return 0, err
		}
		// Groups combine in input order, whatever order the inputs finished in: first and
		// last break ties of equal times by input order.
		for _, r := range runners {
			rows += r.windowRows
			var err error
			if len(runners) == 1 && r.idOrdered() {
				err = r.takeInto(glob)
			} else {
				err = r.mergeInto(glob)
			}
			if err != nil {
				return 0, err
			}
			r.resetGroups()
		}
		if err := glob.overflow(spec.GroupBy); err != nil {
			return 0, err
		}
		if len(glob.times) == 0 && emitted {
			p.skip(glob)
			return rows, nil
		}
		emitted = true
		return rows, p.emit(glob)
	}
	if oneWindow(runners, spec) {
		_, err := window(math.MaxInt64)
		return err
	}
	width := spec.Granularity.Millis()
	span := int64(1) // buckets a window
	for {
		first, ok := int64(math.MaxInt64), false
		for i, r := range runners {
			t, more, err := r.peek()
			if err != nil {
				return fmt.Errorf("query: %s: %w", spec.inputName(i), err)
			}
			if more {
				first, ok = min(first, t), true
			}
		}
		if !ok {
			break
		}
		start := spec.Granularity.Truncate(first)
		end := int64(math.MaxInt64)
		if w := span * width; start <= math.MaxInt64-w {
			end = start + w
		}
		rows, err := window(end)
		if err != nil {
			return err
		}
		// Windows of about WindowRows rows: widen while they hold fewer, narrow while more.
		switch {
		case rows < windowRows/2 && span*width < 1<<60: // never past int64 with start added
			span *= 2
		case rows > 2*windowRows && span > 1:
			span /= 2
		}
	}
	if !emitted {
		glob, err := p.table()
		if err != nil {
			return err
		}
		return p.emit(glob)
	}
	return nil
}

// runner aggregates one source.
type runner struct {
	ctx     context.Context
	src     source.Source
	spec    *Spec
	metrics []columns.Metric

	table   map[string]int32 // local key -> group (keys of more than four dimensions)
	small   map[smallKey]int32
	dense   *denseIndex // instead of the maps, when it applies (see denseIndex)
	keys    []uint32    // the groups' local ids, len(gdims) a group
	slots   []uint64    // with dense: the groups' slots
	order   []int32     // with dense and sorted: the groups of the buckets ended, in slot order
	times   []int64     // group -> time bucket
	acc     *accs
	gdims   []groupDim
	readers []metricReader

	// The rows, read in order window by window (setup, peek, aggregateUntil).
	n          int
	bm         *roaring.Bitmap // the filter's rows; nil: every row
	it         roaring.ManyIntIterable
	next       int      // bm == nil: the next row to queue
	queue      []uint32 // rows read and not yet aggregated
	buf        []uint32
	rowTimes   source.LongCache // the aggregation's reader of times
	edge       source.LongCache // peek's and aggregateUntil's, so that rowTimes reads in order
	bat        *batchAgg
	visit      func(row int) error
	vec        bool
	windowRows int // rows aggregated into the current groups

	ordered  bool  // a segment: rows in non-decreasing time, checked as they are read
	lastTime int64 // the time of the last row aggregated (ordered)
}

// groupDim reads one group-by dimension of the source: local ids are the source's ids of a
// dictionary dimension, or interned raw values; missing means null everywhere.
type groupDim struct {
	ds     source.DimSource
	ids    *source.IDCache
	raw    source.RawReader
	intern map[string]uint32
	values []GroupValue // raw: local id -> value
	null   [1]uint32
	// dictionary values read so far, by id (a window's groups ask for the same few often)
	known []GroupValue
	have  []bool
}

func (g *groupDim) rowIDs(row int) ([]uint32, error) {
	switch {
	case g.ids != nil:
		return g.ids.At(row)
	case g.raw != nil:
		b, ok, err := g.raw.Bytes(row)
		if err != nil {
			return nil, err
		}
		if !ok {
			g.null[0] = 0
			return g.null[:], nil
		}
		id, found := g.intern[string(b)]
		if !found {
			id = uint32(len(g.values))
			v := string(b)
			g.intern[v] = id
			g.values = append(g.values, GroupValue{Value: v})
		}
		g.null[0] = id
		return g.null[:], nil
	}
	g.null[0] = 0
	return g.null[:], nil
}

func (g *groupDim) value(id uint32) (GroupValue, error) {
	switch {
	case g.ds != nil:
		if int(id) < len(g.have) && g.have[id] {
			return g.known[id], nil
		}
		v, null, err := g.ds.Value(id)
		if err != nil {
			return GroupValue{}, err
		}
		gv := GroupValue{Null: null, Value: v}
		if int(id) >= len(g.have) { // id is a valid id of the dictionary: Value read it
			g.have = slices.Grow(g.have, int(id)+1-len(g.have))[:id+1]
			g.known = slices.Grow(g.known, int(id)+1-len(g.known))[:id+1]
		}
		g.known[id], g.have[id] = gv, true
		return gv, nil
	case g.raw != nil:
		return g.values[id], nil
	}
	return GroupValue{Null: true}, nil
}

// setup makes the runner's readers and evaluates the filter.
func (r *runner) setup() error {
	src := r.src
	r.resetGroups()
	for _, name := range r.spec.GroupBy {
		g := groupDim{}
		ds, err := src.Dim(name)
		if err != nil {
			return err
		}
		if ds != nil {
			g.ds = ds
			g.ids = &source.IDCache{C: ds.Cursor()}
		} else if rr := src.Raw(name); rr != nil {
			g.raw = rr
			g.intern = map[string]uint32{}
			g.values = []GroupValue{{Null: true}} // local id 0 is null
		}
		r.gdims = append(r.gdims, g)
	}
	readers, err := newMetricReaders(src, r.metrics)
	if err != nil {
		return err
	}
	bm, err := evalFilter(src, r.spec.Filter)
	if err != nil {
		return err
	}
	r.rowTimes = source.LongCache{C: src.Times()}
	r.edge = source.LongCache{C: src.Times()}
	times := &r.rowTimes
	gran, all := r.spec.Granularity, r.spec.All
	key := make([]byte, 0, 8+4*len(r.gdims))
	lists := make([][]uint32, len(r.gdims))
	pos := make([]int, len(r.gdims))
	visit := func(row int) error {
		t, err := times.At(row)
		if err != nil {
			return fmt.Errorf("__time: %w", err)
		}
		if err := r.inOrder(row, t); err != nil {
			return err
		}
		bucket := int64(0)
		if !all {
			bucket = gran.Truncate(t)
		}
		for k := range r.gdims {
			ids, err := r.gdims[k].rowIDs(row)
			if err != nil {
				return fmt.Errorf("dimension %q: %w", r.spec.GroupBy[k], err)
			}
			lists[k] = ids
			pos[k] = 0
		}
		for {
			key = binary.LittleEndian.AppendUint64(key[:0], uint64(bucket))
			for k := range lists {
				key = binary.LittleEndian.AppendUint32(key, lists[k][pos[k]])
			}
			gi, isNew := r.groupOf(key)
			if isNew {
				r.times = append(r.times, bucket)
				for k := range lists {
					r.keys = append(r.keys, lists[k][pos[k]])
				}
				r.acc.grow()
			}
			if err := r.aggregate(int(gi), row, t, readers); err != nil {
				return err
			}
			// Next combination of the exploded values.
			k := len(lists) - 1
			for ; k >= 0; k-- {
				pos[k]++
				if pos[k] < len(lists[k]) {
					break
				}
				pos[k] = 0
			}
			if k < 0 {
				return nil
			}
		}
	}
	r.n = src.Rows()
	r.ordered = source.SegmentOf(src) != nil
	r.lastTime = math.MinInt64
	r.bm = bm
	if bm != nil {
		r.it = bm.ManyIterator()
	}
	r.buf = make([]uint32, 1024)
	// Rows go in batches: column by column when every group-by dimension has one value a row
	// (independent loads of one column overlap their cache misses), row by row otherwise.
	r.vec = true
	for _, g := range r.gdims {
		if g.ids != nil && g.ds.MultiValue() || g.raw != nil {
			r.vec = false
		}
	}
	r.readers = readers
	r.bat = &batchAgg{r: r, times: times, readers: readers}
	r.visit = visit
	return nil
}

// smallKey is a group key (bucket, then a uint32 id per group-by dimension) of up to four
// dimensions, zero-padded: a map of these hashes and compares faster than one of strings.
type smallKey [8 + 4*4]byte

// groupOf returns the group of key (the caller adds a new one's times, ids and accumulators).
func (r *runner) groupOf(key []byte) (gi int32, isNew bool) {
	if len(key) <= len(smallKey{}) {
		var k smallKey
		copy(k[:], key)
		if gi, ok := r.small[k]; ok {
			return gi, false
		}
		gi = int32(len(r.times))
		r.small[k] = gi
		return gi, true
	}
	if gi, ok := r.table[string(key)]; ok {
		return gi, false
	}
	gi = int32(len(r.times))
	r.table[string(key)] = gi
	return gi, true
}

// resetGroups drops the groups aggregated so far (merged into a window's table).
func (r *runner) resetGroups() {
	if r.table == nil {
		r.table, r.small = map[string]int32{}, map[smallKey]int32{}
	} else {
		clear(r.table)
		clear(r.small)
	}
	if r.dense != nil {
		r.dense.reset(r.slots)
	}
	r.keys, r.slots, r.order, r.times = r.keys[:0], r.slots[:0], r.order[:0], r.times[:0]
	if r.acc == nil {
		r.acc = newAccs(r.metrics)
	} else {
		r.acc.reset()
	}
	r.windowRows = 0
}

// fill queues the next rows when none is queued; the queue stays empty at the end.
func (r *runner) fill() error {
	if len(r.queue) > 0 {
		return nil
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if r.bm == nil {
		k := min(len(r.buf), r.n-r.next)
		for i := range k {
			r.buf[i] = uint32(r.next + i)
		}
		r.next += k
		r.queue = r.buf[:k]
		return nil
	}
	k := r.it.NextMany(r.buf)
	if k > 0 && int(r.buf[k-1]) >= r.n {
		return fmt.Errorf("filter bitmap row %d past the %d rows: %w", r.buf[k-1], r.n, columns.ErrCorrupt)
	}
	r.queue = r.buf[:k]
	return nil
}

// peek returns the time of the next row to aggregate; more is false at the end.
func (r *runner) peek() (t int64, more bool, err error) {
	if err := r.fill(); err != nil {
		return 0, false, err
	}
	if len(r.queue) == 0 {
		return 0, false, nil
	}
	t, err = r.edge.At(int(r.queue[0]))
	if err != nil {
		return 0, false, fmt.Errorf("__time: %w", err)
	}
	return t, true, nil
}

// aggregateUntil aggregates the rows whose time is before end (all of them for math.MaxInt64)
// into the groups. Rows come in non-decreasing time: the first row at or past end stays queued.
func (r *runner) aggregateUntil(end int64) error {
	for {
		if err := r.fill(); err != nil {
			return err
		}
		q := r.queue
		if len(q) == 0 {
			return nil
		}
		k := len(q)
		if end != math.MaxInt64 {
			last, err := r.edge.At(int(q[k-1]))
			if err != nil {
				return fmt.Errorf("__time: %w", err)
			}
			if last >= end {
				var ferr error
				k = sort.Search(len(q), func(i int) bool {
					t, err := r.edge.At(int(q[i]))
					if err != nil && ferr == nil {
						ferr = err
					}
					return err != nil || t >= end
				})
				if ferr != nil {
					return fmt.Errorf("__time: %w", ferr)
				}
			}
		}
		if err := r.do(q[:k]); err != nil {
			return err
		}
		r.windowRows += k
		r.queue = q[k:]
		if k < len(q) {
			return nil
		}
	}
}

// inOrder checks that a segment's row comes in time order: the windows of RunEach rely on it.
func (r *runner) inOrder(row int, t int64) error {
	if !r.ordered {
		return nil
	}
	if t < r.lastTime {
		return fmt.Errorf("__time: row %d: time %d before the previous row's %d: %w", row, t, r.lastTime, columns.ErrCorrupt)
	}
	r.lastTime = t
	return nil
}

func (r *runner) do(rows []uint32) error {
	if r.vec {
		return r.bat.run(rows)
	}
	for _, row := range rows {
		if err := r.visit(int(row)); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) aggregate(g, row int, t int64, readers []metricReader) error {
	a := r.acc
	a.rows[g]++
	if t < a.minTime[g] {
		a.minTime[g] = t
	}
	for m := range r.metrics {
		if err := a.addRow(m, &readers[m], g, row, t); err != nil {
			return fmt.Errorf("metric %q: %w", r.metrics[m].Name, err)
		}
	}
	return nil
}
