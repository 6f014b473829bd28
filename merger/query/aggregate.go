package query

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/slicesx"
	"github.com/writeout/writeout/merger/internal/source"
)

// accs holds the aggregation state of groups, metric by metric, indexed by group: one
// accumulator of columns/agg per group (agg.LongAcc, agg.DoubleAcc, a sketch), which alone
// decides what combining values, and a null among them, means.
type accs struct {
	metrics []columns.Metric
	aggs    []agg.Agg
	types   []columns.MetricType // the metrics' value types (ValueType looks the aggregator up)
	// kinds and nullable: each aggregator's Type and Nullable, which valuesInto reads for
	// every metric (an agg.Agg, name and all, is several words to copy)
	kinds    []agg.Type
	nullable []bool
	rows     []int64
	minTime  []int64
	longs    [][]agg.LongAcc   // long metrics
	dbls     [][]agg.DoubleAcc // double metrics
	sks      [][]agg.Sketch
}

func newAccs(metrics []columns.Metric) *accs {
	n := len(metrics)
	a := &accs{metrics: metrics, aggs: make([]agg.Agg, n), types: make([]columns.MetricType, n), longs: make([][]agg.LongAcc, n),
		dbls: make([][]agg.DoubleAcc, n), sks: make([][]agg.Sketch, n)}
	a.kinds, a.nullable = make([]agg.Type, n), make([]bool, n)
	for m, met := range metrics {
		a.aggs[m], a.types[m] = met.Agg(), met.ValueType()
		a.kinds[m], a.nullable[m] = a.aggs[m].Type, a.aggs[m].Nullable()
	}
	return a
}

// grow adds a group.
func (a *accs) grow() {
	a.rows = append(a.rows, 0)
	a.minTime = append(a.minTime, math.MaxInt64)
	for m, x := range a.aggs {
		switch x.Type {
		case agg.SketchType:
			a.sks[m] = append(a.sks[m], nil)
		case agg.Long:
			a.longs[m] = append(a.longs[m], agg.NewLongAcc(x.Kind))
		case agg.Double:
			a.dbls[m] = append(a.dbls[m], agg.NewDoubleAcc(x.Kind))
		}
	}
}

// growN adds n groups, as n calls of grow do.
func (a *accs) growN(n int) {
	if n <= 0 {
		return
	}
	clear(slicesx.Extend(&a.rows, n))
	for i, ts := 0, slicesx.Extend(&a.minTime, n); i < len(ts); i++ {
		ts[i] = math.MaxInt64
	}
	for m, x := range a.aggs {
		switch x.Type {
		case agg.SketchType:
			clear(slicesx.Extend(&a.sks[m], n))
		case agg.Long:
			acc := agg.NewLongAcc(x.Kind)
			for i, s := 0, slicesx.Extend(&a.longs[m], n); i < len(s); i++ {
				s[i] = acc
			}
		case agg.Double:
			acc := agg.NewDoubleAcc(x.Kind)
			for i, s := 0, slicesx.Extend(&a.dbls[m], n); i < len(s); i++ {
				s[i] = acc
			}
		}
	}
}

// reset drops every group, keeping the memory for the next window's.
func (a *accs) reset() {
	a.rows, a.minTime = a.rows[:0], a.minTime[:0]
	for m := range a.aggs {
		clear(a.sks[m])
		a.sks[m] = a.sks[m][:0]
		a.longs[m] = a.longs[m][:0]
		clear(a.dbls[m])
		a.dbls[m] = a.dbls[m][:0]
	}
}

// mergeGroup adds group j of o, whose rows come after group i's in input order, into group i.
func (a *accs) mergeGroup(i int, o *accs, j int) error {
	a.rows[i] += o.rows[j]
	a.minTime[i] = min(a.minTime[i], o.minTime[j])
	for m, x := range a.aggs {
		switch x.Type {
		case agg.SketchType:
			if sk := o.sks[m][j]; sk != nil {
				if a.sks[m][i] == nil {
					a.sks[m][i] = sk.Clone()
				} else if err := a.sks[m][i].Merge(sk); err != nil {
					return fmt.Errorf("metric %q: %w", a.metrics[m].Name, err)
				}
			}
		case agg.Long:
			a.longs[m][i].Merge(x.Kind, &o.longs[m][j])
		case agg.Double:
			a.dbls[m][i].Merge(x.Kind, &o.dbls[m][j])
		}
	}
	return nil
}

// overflow returns, when the exact sum of a metric in a group does not fit an int64, an error
// wrapping agg.ErrOverflow that names the metric and the group (its bucket time and values):
// a query answers exactly or not at all.
func (g *globalTable) overflow(groupBy []string) error {
	a := g.acc
	for m, accs := range a.longs {
		for gi := range accs {
			if accs[gi].C == 0 { // no carry: the sum fits (what Value checks)
				continue
			}
			if _, err := accs[gi].Value(); err == nil {
				continue
			}
			var b strings.Builder
			fmt.Fprintf(&b, "time %d", g.times[gi])
			for k, v := range g.group(gi) {
				if v.Null {
					fmt.Fprintf(&b, ", %s null", groupBy[k])
				} else {
					fmt.Fprintf(&b, ", %s %q", groupBy[k], v.Value)
				}
			}
			return fmt.Errorf("query: metric %q: the group at %s: %w", a.metrics[m].Name, b.String(),
				agg.OverflowError(accs[gi].V, accs[gi].C))
		}
	}
	return nil
}

// valuesInto writes the aggregated values of groups lo..hi-1 into out, each group's
// len(a.metrics) values after one another. It goes a metric at a time (its accumulators read
// in order, its kind looked at once) and sets out's fields in place: an AggValue built aside
// and copied in is read back 16 bytes at a time just after it was stored 8 bytes at a time,
// and the load waits for the stores to drain, on every value (the query's hottest
// instruction, before).
func (a *accs) valuesInto(out []AggValue, lo, hi int) {
	nm := len(a.kinds)
	for m, kind := range a.kinds {
		typ, nullable := a.types[m], a.nullable[m]
		switch kind {
		case agg.SketchType:
			for j, sk := range a.sks[m][lo:hi] {
				o := &out[j*nm+m]
				o.Type, o.Long, o.Double, o.Null, o.Sketch = typ, 0, 0, false, sk
				if sk != nil {
					o.Long = int64(sk.Estimate())
				}
			}
		case agg.Long:
			// acc.Value() and acc.Null, inline: overflow was checked before
			// (globalTable.overflow), and Value gives 0 for it.
			longs := a.longs[m][lo:hi]
			for j := range longs {
				acc, o := &longs[j], &out[j*nm+m]
				o.Type, o.Long, o.Double, o.Null = typ, 0, 0, !acc.Set && nullable
				if acc.Set && acc.C == 0 {
					o.Long = acc.V
				}
			}
		case agg.Double:
			k := a.aggs[m].Kind
			dbls := a.dbls[m][lo:hi]
			for j := range dbls {
				acc, o := &dbls[j], &out[j*nm+m]
				o.Type, o.Long, o.Double, o.Null = typ, 0, acc.Value(k), !acc.Set && nullable
			}
		}
	}
}

// metricReader reads one result metric of one source.
type metricReader struct {
	absent bool              // the source lacks the metric: its rows are null
	long   *source.LongCache // long metric values
	double *source.DoubleCache
	times  *source.LongCache // first/last: the time stored with each value
	tails  source.TailReader // doubleSum: exactness tails, nil when the source has none
	nulls  *roaring.Bitmap   // long and double: the null rows, nil when none
	sketch source.SketchMerger
}

func newMetricReaders(src source.Source, metrics []columns.Metric) ([]metricReader, error) {
	schema := src.Schema()
	readers := make([]metricReader, len(metrics))
	for m, met := range metrics {
		rd := &readers[m]
		if schema.Metric(met.Name) < 0 {
			rd.absent = true
			continue
		}
		x := met.Agg()
		if x.Timed() {
			if c := src.MetricTimes(met.Name); c != nil {
				rd.times = &source.LongCache{C: c}
			}
		}
		switch x.Type {
		case agg.Long:
			if c := src.Long(met.Name); c != nil {
				rd.long = &source.LongCache{C: c}
			}
		case agg.Double:
			if c := src.Double(met.Name); c != nil {
				rd.double = &source.DoubleCache{C: c}
			}
			if x.Exact() {
				rd.tails = src.Tails(met.Name)
			}
		case agg.SketchType:
			rd.sketch = src.SketchMerger(met.Name)
		}
		if x.Type != agg.SketchType {
			bm, err := src.MetricNulls(met.Name)
			if err != nil {
				return nil, fmt.Errorf("metric %q: %w", met.Name, err)
			}
			rd.nulls = bm
		}
	}
	return readers, nil
}

// null reports whether row is null.
func (rd *metricReader) null(row uint32) bool { return rd.nulls != nil && rd.nulls.Contains(row) }

// nullFlags returns, for each of rows, whether it is null; nil when the source has no null row.
func (rd *metricReader) nullFlags(rows []uint32, sc *batchScratch) []bool {
	if rd.nulls == nil {
		return nil
	}
	sc.null = slices.Grow(sc.null[:0], len(rows))[:len(rows)]
	for i, r := range rows {
		sc.null[i] = rd.nulls.Contains(r)
	}
	return sc.null
}

// batchScratch is addBatch's reused memory.
type batchScratch struct {
	lvals []int64
	dvals []float64
	times []int64
	tail  []float64
	null  []bool
}

// addBatch aggregates metric m of rows (increasing) into their groups gid; t holds the rows'
// times. Every value goes through its group's accumulator (agg, in its batch form AddLongs
// and AddDoubles), null or not.
func (a *accs) addBatch(m int, rd *metricReader, rows []uint32, gid []int32, t []int64, sc *batchScratch) error {
	x := a.aggs[m]
	k := x.Kind
	n := len(rows)
	if rd.absent {
		return nil // only nulls, which every accumulator skips
	}
	times := t
	if x.Timed() && rd.times != nil {
		sc.times = slices.Grow(sc.times[:0], n)[:n]
		if err := rd.times.Gather(rows, sc.times); err != nil {
			return err
		}
		times = sc.times
	}
	switch x.Type {
	case agg.Long:
		if rd.long == nil {
			return nil
		}
		vals := slices.Grow(sc.lvals[:0], n)[:n]
		sc.lvals = vals
		if err := rd.long.Gather(rows, vals); err != nil {
			return err
		}
		agg.AddLongs(k, a.longs[m], gid, vals, times, rd.nullFlags(rows, sc))
	case agg.Double:
		if rd.double == nil {
			return nil
		}
		vals := slices.Grow(sc.dvals[:0], n)[:n]
		sc.dvals = vals
		if err := rd.double.Gather(rows, vals); err != nil {
			return err
		}
		if rd.tails == nil {
			agg.AddDoubles(k, a.dbls[m], gid, vals, times, rd.nullFlags(rows, sc))
			return nil
		}
		acc := a.dbls[m]
		for i, v := range vals {
			var err error
			if sc.tail, err = rd.tails.Tail(int(rows[i]), sc.tail[:0]); err != nil {
				return err
			}
			acc[gid[i]].Add(k, v, times[i], sc.tail, rd.null(rows[i]))
		}
	case agg.SketchType:
		if rd.sketch == nil {
			return nil
		}
		for i, row := range rows {
			if err := a.mergeSketchRow(m, rd, int(gid[i]), int(row)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a *accs) mergeSketchRow(m int, rd *metricReader, g, row int) error {
	return rd.sketch.MergeRow(row, &a.sks[m][g])
}

// addRow aggregates metric m of one row, whose time is t, into group g.
func (a *accs) addRow(m int, rd *metricReader, g, row int, t int64) error {
	x := a.aggs[m]
	if rd.absent {
		return nil // a null, which every accumulator skips
	}
	if x.Timed() && rd.times != nil {
		var err error
		if t, err = rd.times.At(row); err != nil {
			return err
		}
	}
	null := rd.null(uint32(row))
	switch x.Type {
	case agg.Long:
		if rd.long == nil {
			return nil
		}
		v, err := rd.long.At(row)
		if err != nil {
			return err
		}
		a.longs[m][g].Add(x.Kind, v, t, null)
	case agg.Double:
		if rd.double == nil {
			return nil
		}
		v, err := rd.double.At(row)
		if err != nil {
			return err
		}
		var tail []float64
		if rd.tails != nil {
			if tail, err = rd.tails.Tail(row, nil); err != nil {
				return err
			}
		}
		a.dbls[m][g].Add(x.Kind, v, t, tail, null)
	case agg.SketchType:
		if rd.sketch == nil {
			return nil
		}
		return a.mergeSketchRow(m, rd, g, row)
	}
	return nil
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
	buckets buckets // the rows' time buckets (runner.setup)
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
	if r.ordered {
		for i, t := range b.t {
			if err := r.inOrder(int(rows[i]), t); err != nil {
				return err
			}
		}
	}
	b.gid = slices.Grow(b.gid[:0], n)[:n]
	if r.dense != nil {
		if err := r.dense.groups(r, b); err != nil {
			return err
		}
	} else {
		b.mapGroups()
	}
	a := r.acc
	for m := range r.metrics {
		if err := a.addBatch(m, &b.readers[m], rows, b.gid, b.t, &b.scratch); err != nil {
			return fmt.Errorf("metric %q: %w", r.metrics[m].Name, err)
		}
	}
	return nil
}

// mapGroups finds (or makes) the groups of the batch's rows through the runner's maps.
func (b *batchAgg) mapGroups() {
	r := b.r
	bk := &b.buckets
	a := r.acc
	for i := range b.gid {
		bucket := bk.of(b.t[i])
		if len(r.gdims) == 0 && len(r.times) > 0 && bucket == b.lastBucket {
			b.gid[i] = b.lastGroup
		} else {
			b.key = binary.LittleEndian.AppendUint64(b.key[:0], uint64(bucket))
			for k := range r.gdims {
				b.key = binary.LittleEndian.AppendUint32(b.key, b.ids[k][i])
			}
			gi, isNew := r.groupOf(b.key)
			if isNew {
				r.times = append(r.times, bucket)
				for k := range r.gdims {
					r.keys = append(r.keys, b.ids[k][i])
				}
				a.grow()
			}
			b.gid[i], b.lastBucket, b.lastGroup = gi, bucket, gi
		}
		g := b.gid[i]
		a.rows[g]++
		a.minTime[g] = min(a.minTime[g], b.t[i])
	}
}
