package query

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"

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

// Result holds a query's groups in a defined order: by time, then by group values
// (dimension by dimension, null first, then in byte order).
type Result struct {
	GroupBy []string
	Metrics []columns.Metric
	Rows    []Row
}

// Row is one group.
type Row struct {
	Time   int64
	Groups []GroupValue // parallel to Result.GroupBy
	Rows   int64        // stored rows counted in the group
	Values []AggValue   // parallel to Result.Metrics
}

// GroupValue is a group's value of one GroupBy dimension.
type GroupValue struct {
	Null  bool
	Value string
}

// String returns the value, or "null".
func (g GroupValue) String() string {
	if g.Null {
		return "null"
	}
	return g.Value
}

// AggValue is an aggregated metric: Long for count and long aggregators and for hyperUnique
// (the cardinality estimate), Double for double aggregators.
type AggValue struct {
	Type   columns.MetricType
	Long   int64
	Double float64
	// Null: every input of the group was null (a long or double metric other than count; see
	// columns/agg); Long and Double are then 0.
	Null bool
}

// String formats the value: an integer, or the shortest decimal that reads back as Double;
// "null" for a null.
func (v AggValue) String() string {
	if v.Null {
		return "null"
	}
	if v.Type == columns.MetricDouble {
		return strconv.FormatFloat(v.Double, 'g', -1, 64)
	}
	return strconv.FormatInt(v.Long, 10)
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
	spec.InputNames = pathNames(qs, spec.InputNames)
	srcs := make([]source.Source, len(qs))
	views := map[any]source.Source{} // a builder listed twice is read-locked once
	for i, q := range qs {
		if q, ok := q.(*columns.Segment); ok {
			if q == nil {
				return Result{}, fmt.Errorf("%w: %s is nil", ErrInvalid, spec.inputName(i))
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
			return Result{}, fmt.Errorf("%w: %s is a %T; Run reads *columns.Segment and *merger.Builder", ErrInvalid, spec.inputName(i), q)
		}
		if open == nil {
			return Result{}, fmt.Errorf("%w: %s is nil", ErrInvalid, spec.inputName(i))
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
		return Result{}, err
	}
	glob := newGlobalTable(metrics, len(spec.GroupBy))
	runners := make([]*runner, len(srcs))
	err = parallel.Run(len(srcs), runtime.GOMAXPROCS(0), func(i int) error {
		r := &runner{ctx: ctx, src: srcs[i], spec: &spec, metrics: metrics}
		if err := r.run(); err != nil {
			return fmt.Errorf("query: %s: %w", spec.inputName(i), err)
		}
		for _, rd := range r.readers {
			if f, ok := rd.sketch.(interface{ Flush() error }); ok {
				if err := f.Flush(); err != nil {
					return fmt.Errorf("query: %s: %w", spec.inputName(i), err)
				}
			}
		}
		runners[i] = r
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	// Groups combine in input order, whatever order the inputs finished in: first and last
	// break ties of equal times by input order.
	for _, r := range runners {
		if err := r.mergeInto(glob); err != nil {
			return Result{}, err
		}
	}
	if err := glob.overflow(spec.GroupBy); err != nil {
		return Result{}, err
	}
	return glob.result(spec.GroupBy, spec.All), nil
}

// runner aggregates one source.
type runner struct {
	ctx     context.Context
	src     source.Source
	spec    *Spec
	metrics []columns.Metric

	table   map[string]int32 // local key -> group
	keys    [][]uint32       // group -> local group ids
	times   []int64          // group -> time bucket
	acc     *accs
	gdims   []groupDim
	readers []metricReader
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
		v, null, err := g.ds.Value(id)
		return GroupValue{Null: null, Value: v}, err
	case g.raw != nil:
		return g.values[id], nil
	}
	return GroupValue{Null: true}, nil
}

func (r *runner) run() error {
	src := r.src
	r.table = map[string]int32{}
	r.acc = newAccs(r.metrics)
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
	times := source.LongCache{C: src.Times()}
	gran, all := r.spec.Granularity, r.spec.All
	key := make([]byte, 0, 8+4*len(r.gdims))
	lists := make([][]uint32, len(r.gdims))
	pos := make([]int, len(r.gdims))
	visit := func(row int) error {
		t, err := times.At(row)
		if err != nil {
			return fmt.Errorf("__time: %w", err)
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
			gi, ok := r.table[string(key)]
			if !ok {
				gi = int32(len(r.times))
				r.table[string(key)] = gi
				r.times = append(r.times, bucket)
				ks := make([]uint32, len(lists))
				for k := range lists {
					ks[k] = lists[k][pos[k]]
				}
				r.keys = append(r.keys, ks)
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
	n := src.Rows()
	// Rows go in batches: column by column when every group-by dimension has one value a row
	// (independent loads of one column overlap their cache misses), row by row otherwise.
	vec := true
	for _, g := range r.gdims {
		if g.ids != nil && g.ds.MultiValue() || g.raw != nil {
			vec = false
		}
	}
	r.readers = readers
	bat := &batchAgg{r: r, times: &times, readers: readers}
	do := func(rows []uint32) error {
		if vec {
			return bat.run(rows)
		}
		for _, row := range rows {
			if err := visit(int(row)); err != nil {
				return err
			}
		}
		return nil
	}
	buf := make([]uint32, 1024)
	if bm == nil {
		for lo := 0; lo < n; lo += len(buf) {
			if err := r.ctx.Err(); err != nil {
				return err
			}
			k := min(len(buf), n-lo)
			for i := range k {
				buf[i] = uint32(lo + i)
			}
			if err := do(buf[:k]); err != nil {
				return err
			}
		}
		return nil
	}
	it := bm.ManyIterator()
	for {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		k := it.NextMany(buf)
		if k == 0 {
			return nil
		}
		if int(buf[k-1]) >= n {
			return fmt.Errorf("filter bitmap row %d past the %d rows: %w", buf[k-1], n, columns.ErrCorrupt)
		}
		if err := do(buf[:k]); err != nil {
			return err
		}
	}
}

// batchAgg aggregates a batch of rows column by column; every group-by dimension has one
// value a row.
type batchAgg struct {
	r       *runner
	times   *source.LongCache
	readers []metricReader
	t       []int64
	gid     []int32
	ids     [][]uint32
	scratch batchScratch
	key     []byte
	// the group of the last bucket, when there is no group-by dimension
	lastBucket int64
	lastGroup  int32
}

func (b *batchAgg) run(rows []uint32) error {
	r := b.r
	n := len(rows)
	b.t = slices.Grow(b.t[:0], n)[:n]
	if err := b.times.Gather(rows, b.t); err != nil {
		return fmt.Errorf("__time: %w", err)
	}
	if len(b.ids) != len(r.gdims) {
		b.ids = make([][]uint32, len(r.gdims))
	}
	for k := range r.gdims {
		b.ids[k] = slices.Grow(b.ids[k][:0], n)[:n]
		g := &r.gdims[k]
		if g.ids == nil {
			clear(b.ids[k]) // the source lacks the dimension: null
			continue
		}
		for i, row := range rows {
			ids, err := g.ids.At(int(row))
			if err != nil {
				return fmt.Errorf("dimension %q: %w", r.spec.GroupBy[k], err)
			}
			b.ids[k][i] = ids[0]
		}
	}
	b.gid = slices.Grow(b.gid[:0], n)[:n]
	gran, all := r.spec.Granularity, r.spec.All
	a := r.acc
	for i := range rows {
		bucket := int64(0)
		if !all {
			bucket = gran.Truncate(b.t[i])
		}
		if len(r.gdims) == 0 && len(r.times) > 0 && bucket == b.lastBucket {
			b.gid[i] = b.lastGroup
		} else {
			b.key = binary.LittleEndian.AppendUint64(b.key[:0], uint64(bucket))
			for k := range r.gdims {
				b.key = binary.LittleEndian.AppendUint32(b.key, b.ids[k][i])
			}
			gi, ok := r.table[string(b.key)]
			if !ok {
				gi = int32(len(r.times))
				r.table[string(b.key)] = gi
				r.times = append(r.times, bucket)
				ks := make([]uint32, len(r.gdims))
				for k := range r.gdims {
					ks[k] = b.ids[k][i]
				}
				r.keys = append(r.keys, ks)
				a.grow()
			}
			b.gid[i], b.lastBucket, b.lastGroup = gi, bucket, gi
		}
		g := b.gid[i]
		a.rows[g]++
		a.minTime[g] = min(a.minTime[g], b.t[i])
	}
	for m := range r.metrics {
		if err := a.addBatch(m, &b.readers[m], rows, b.gid, b.t, &b.scratch); err != nil {
			return fmt.Errorf("metric %q: %w", r.metrics[m].Name, err)
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

// globalTable combines the groups of every source by value.
type globalTable struct {
	index  map[string]int
	times  []int64
	groups [][]GroupValue
	acc    *accs
	key    []byte
}

func newGlobalTable(metrics []columns.Metric, ngroup int) *globalTable {
	return &globalTable{index: map[string]int{}, acc: newAccs(metrics)}
}

func (r *runner) mergeInto(g *globalTable) error {
	for gi, ks := range r.keys {
		vals := make([]GroupValue, len(ks))
		for k, id := range ks {
			v, err := r.gdims[k].value(id)
			if err != nil {
				return fmt.Errorf("query: dimension %q: %w", r.spec.GroupBy[k], err)
			}
			vals[k] = v
		}
		g.key = binary.LittleEndian.AppendUint64(g.key[:0], uint64(r.times[gi]))
		for _, v := range vals {
			if v.Null {
				g.key = append(g.key, 0)
				continue
			}
			g.key = append(g.key, 1)
			g.key = binary.AppendUvarint(g.key, uint64(len(v.Value)))
			g.key = append(g.key, v.Value...)
		}
		i, ok := g.index[string(g.key)]
		if !ok {
			i = len(g.times)
			g.index[string(g.key)] = i
			g.times = append(g.times, r.times[gi])
			g.groups = append(g.groups, vals)
			g.acc.grow()
		}
		if err := g.acc.mergeGroup(i, r.acc, gi); err != nil {
			return fmt.Errorf("query: %w", err)
		}
	}
	return nil
}

func (g *globalTable) result(groupBy []string, all bool) Result {
	res := Result{GroupBy: slices.Clone(groupBy), Metrics: g.acc.metrics, Rows: make([]Row, len(g.times))}
	for i := range g.times {
		t := g.times[i]
		if all {
			t = g.acc.minTime[i]
		}
		res.Rows[i] = Row{Time: t, Groups: g.groups[i], Rows: g.acc.rows[i], Values: g.acc.values(i)}
	}
	slices.SortFunc(res.Rows, func(a, b Row) int {
		if c := cmp.Compare(a.Time, b.Time); c != 0 {
			return c
		}
		for k := range a.Groups {
			x, y := a.Groups[k], b.Groups[k]
			if x.Null != y.Null {
				if x.Null {
					return -1
				}
				return 1
			}
			if c := bytes.Compare([]byte(x.Value), []byte(y.Value)); c != 0 {
				return c
			}
		}
		return 0
	})
	return res
}
