package query

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/invalid"
	"github.com/writeout/writeout/merger/internal/parallel"
	"github.com/writeout/writeout/merger/internal/schema"
	"github.com/writeout/writeout/merger/internal/source"
	"github.com/writeout/writeout/merger/query/filter"
)

// ErrInvalid marks a bad query: an input that is not a segment or builder, an unknown
// granularity, a group-by dimension listed twice, a group-by or filter dimension in no input
// or that is a metric, a metric in no input.
// It wraps medium.ErrInvalid.
var ErrInvalid = invalid.Sentinel("query: invalid argument")

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
	// Period, when not PeriodNone, buckets rows by UTC calendar period instead (a row's
	// bucket is Period.Truncate(time)); Granularity must then be none and All false.
	// SetGranularity sets Granularity, Period and All from a name.
	Period Period
	All    bool
	// GroupBy names dimensions to group by. A multi-value dimension explodes as in Druid: a
	// row counts once in the group of each of its values (a row holding a value twice counts
	// twice in its group), several exploded dimensions give every combination, and a null
	// row (or an empty list) falls in the null group. A dimension a source lacks is null there.
	GroupBy []string
	// Metrics names the metrics to aggregate; nil means every metric of the sources' schemas
	// (first seen first). A source lacking a long or double metric reads as null there (an
	// empty sketch for hyperUnique), as its rows do once merged.
	Metrics []string
	// OrderBy orders the groups by output columns (see OrderKey), stably: groups equal in
	// them keep the default order (by time bucket, then group values). nil keeps the default
	// order. An order other than a prefix of the default one holds every group (with Limit,
	// the best Limit groups) until the last input row is read.
	OrderBy []OrderKey
	// Limit, when above 0, keeps only the first Limit groups in the result's order. With the
	// default order the query stops reading once it has them (except with All, whose one
	// bucket needs every row).
	Limit int
	// InputNames name the inputs in error messages; missing names are the path of a segment
	// opened from a file (Segment.Name), else "input N".
	InputNames []string
	// Progress, when set, counts the input rows done: RunEach adds to it, from the goroutines
	// that read the inputs, the rows aggregated or passed over by the filter, in batches of
	// up to 1,024 rows an input, so that it reaches the inputs' total rows when every row is
	// read. A caller reads it as it likes (a progress bar's ticker).
	Progress *atomic.Int64
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

// defaultWindowRows is about how many input rows RunEach aggregates at a time when the granularity is
// not all: the time buckets of a window hold about this many rows (a window is one bucket at
// least), and only the groups of two windows are in memory. Small windows keep a window's
// tables in a core's cache.
const defaultWindowRows = 1 << 12

// windowRows is defaultWindowRows; tests lower it to make many windows of few rows.
var windowRows = defaultWindowRows

// denseSlots is defaultDenseSlots; tests lower it to find groups through maps.
var denseSlots = defaultDenseSlots

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
// buckets that hold about 4096 rows, and a window's groups are combined, handed to each
// and dropped before the next window is read: memory holds the groups of two windows (the
// next is aggregated, on a goroutine of its own, while each has the one before), however many
// groups the query has in all. With All there is one bucket, and a builder keeps its rows in
// the order they were added: then there is one window, and every group is in memory at once.
//
// With an OrderBy other than a prefix of the default order, the groups are held (with a Limit,
// the best Limit of them) and handed on, in parts, once the last row is read; with the default
// order a Limit ends the query once each has had that many groups.
func RunEach(ctx context.Context, qs []Queryable, spec Spec, each func(Result) error) error {
	return runEach(ctx, qs, spec, true, each)
}

// runEach is RunEach; with reuse false every part has memory of its own.
func runEach(ctx context.Context, qs []Queryable, spec Spec, reuse bool, each func(Result) error) (err error) {
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
	order, err := resolveOrder(&spec, metrics)
	if err != nil {
		return err
	}
	if len(order) > 0 || spec.Limit > 0 {
		o := newOrdered(order, spec.Limit, spec.All, reuse, each)
		each = o.take
		defer func() {
			if errors.Is(err, errLimit) {
				err = nil
			}
			if err == nil {
				err = o.finish()
			}
		}()
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
		// them, bucket by bucket.
		r.dense = newDenseIndex(r, denseSlots/len(runners), len(runners) == 1)
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
	bk := newBuckets(spec)
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
		end := bk.after(bk.truncate(first), span)
		rows, err := window(end)
		if err != nil {
			return err
		}
		// Windows of about 4096 rows: widen while they hold fewer, narrow while more.
		switch {
		case rows < windowRows/2 && span < 1<<40:
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
