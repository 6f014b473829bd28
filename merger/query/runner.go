package query

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/internal/source"
	"github.com/writeout/writeout/merger/query/filter"
)

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
	passed     int // rows before this one are aggregated or passed over (Spec.Progress)

	ordered  bool  // a segment: rows in non-decreasing time, checked as they are read
	lastTime int64 // the time of the last row aggregated (ordered)
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
	bm, err := filter.Eval(src, r.spec.Filter)
	if err != nil {
		return err
	}
	r.rowTimes = source.LongCache{C: src.Times()}
	r.edge = source.LongCache{C: src.Times()}
	times := &r.rowTimes
	bk := newBuckets(r.spec)
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
		bucket := bk.of(t)
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
	r.bat = &batchAgg{r: r, times: times, readers: readers, buckets: *newBuckets(r.spec)}
	r.visit = visit
	return nil
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
		if k == 0 {
			r.pass(r.n)
		}
		return nil
	}
	k := r.it.NextMany(r.buf)
	if k > 0 && int(r.buf[k-1]) >= r.n {
		return fmt.Errorf("filter bitmap row %d past the %d rows: %w", r.buf[k-1], r.n, columns.ErrCorrupt)
	}
	r.queue = r.buf[:k]
	if k == 0 {
		r.pass(r.n)
	}
	return nil
}

// pass notes that the rows before row are done, for Spec.Progress.
func (r *runner) pass(row int) {
	if p := r.spec.Progress; p != nil && row > r.passed {
		p.Add(int64(row - r.passed))
		r.passed = row
	}
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
		if k > 0 {
			r.pass(int(q[k-1]) + 1)
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
