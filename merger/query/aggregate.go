package query

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/axiomhq/hyperloglog"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/internal/source"
)

// accs holds the aggregation state of groups, metric by metric, indexed by group. Every
// combination follows the kernels of columns/agg; the loops switch on the kernel's type and
// kind, never on aggregator names. Each kind keeps the least state a group needs: a value for
// sums, minima and maxima of longs and for minima and maxima of doubles, an exact sum for sums
// of doubles, a value with its time for first and last.
type accs struct {
	metrics []columns.Metric
	aggs    []agg.Agg
	rows    []int64
	minTime []int64
	longs   [][]int64         // long Sum, Min, Max
	carries []map[int32]int64 // long Sum: per group, its carries out of int64 (agg.AddLong), when not 0
	dbls    [][]float64       // double Min, Max
	sums    [][]agg.ExactSum  // double Sum
	ltimed  [][]agg.LongAcc   // long First, Last
	dtimed  [][]agg.DoubleAcc // double First, Last
	sks     [][]*hyperloglog.Sketch
}

func newAccs(metrics []columns.Metric) *accs {
	n := len(metrics)
	a := &accs{metrics: metrics, aggs: make([]agg.Agg, n), longs: make([][]int64, n), carries: make([]map[int32]int64, n), dbls: make([][]float64, n),
		sums: make([][]agg.ExactSum, n), ltimed: make([][]agg.LongAcc, n), dtimed: make([][]agg.DoubleAcc, n),
		sks: make([][]*hyperloglog.Sketch, n)}
	for m, met := range metrics {
		a.aggs[m] = met.Agg()
	}
	return a
}

// grow adds a group.
func (a *accs) grow() {
	a.rows = append(a.rows, 0)
	a.minTime = append(a.minTime, math.MaxInt64)
	for m, x := range a.aggs {
		switch {
		case x.Type == agg.Sketch:
			a.sks[m] = append(a.sks[m], nil)
		case x.Timed() && x.Type == agg.Long:
			a.ltimed[m] = append(a.ltimed[m], agg.NewLongAcc(x.Kind))
		case x.Timed():
			a.dtimed[m] = append(a.dtimed[m], agg.NewDoubleAcc(x.Kind))
		case x.Type == agg.Long:
			a.longs[m] = append(a.longs[m], x.Kind.LongIdentity())
		case x.Kind == agg.Sum:
			a.sums[m] = append(a.sums[m], agg.ExactSum{})
		default:
			a.dbls[m] = append(a.dbls[m], x.Kind.DoubleIdentity())
		}
	}
}

// mergeGroup adds group j of o, whose rows come after group i's in input order, into group i.
func (a *accs) mergeGroup(i int, o *accs, j int) error {
	a.rows[i] += o.rows[j]
	a.minTime[i] = min(a.minTime[i], o.minTime[j])
	for m, x := range a.aggs {
		switch {
		case x.Type == agg.Sketch:
			if sk := o.sks[m][j]; sk != nil {
				if a.sks[m][i] == nil {
					a.sks[m][i] = &hyperloglog.Sketch{}
				}
				if err := agg.MergeSketch(a.sks[m][i], sk); err != nil {
					return fmt.Errorf("metric %q: %w", a.metrics[m].Name, err)
				}
			}
		case x.Timed() && x.Type == agg.Long:
			a.ltimed[m][i].Merge(x.Kind, &o.ltimed[m][j])
		case x.Timed():
			a.dtimed[m][i].Merge(x.Kind, &o.dtimed[m][j])
		case x.Type == agg.Long:
			var c int64
			a.longs[m][i], c = x.Kind.CombineLong(a.longs[m][i], o.longs[m][j])
			a.addCarry(m, i, c+o.carries[m][int32(j)])
		case x.Kind == agg.Sum:
			a.sums[m][i].Merge(&o.sums[m][j])
		default:
			a.dbls[m][i] = x.Kind.CombineDouble(a.dbls[m][i], o.dbls[m][j])
		}
	}
	return nil
}

// addCarry adds c to the carries of group g's sum of metric m.
func (a *accs) addCarry(m, g int, c int64) {
	if c == 0 {
		return
	}
	if a.carries[m] == nil {
		a.carries[m] = map[int32]int64{}
	}
	if a.carries[m][int32(g)] += c; a.carries[m][int32(g)] == 0 {
		delete(a.carries[m], int32(g))
	}
}

// overflow returns, when the exact sum of a metric in a group does not fit an int64, an error
// wrapping agg.ErrOverflow that names the metric and the group (its bucket time and values):
// a query answers exactly or not at all.
func (g *globalTable) overflow(groupBy []string) error {
	a := g.acc
	for m, cs := range a.carries {
		if len(cs) == 0 {
			continue
		}
		gi := int32(math.MaxInt32)
		for i := range cs {
			gi = min(gi, i)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "time %d", g.times[gi])
		for k, v := range g.groups[gi] {
			if v.Null {
				fmt.Fprintf(&b, ", %s null", groupBy[k])
			} else {
				fmt.Fprintf(&b, ", %s %q", groupBy[k], v.Value)
			}
		}
		return fmt.Errorf("query: metric %q: the group at %s: %w", a.metrics[m].Name, b.String(),
			agg.OverflowError(a.longs[m][gi], cs[gi]))
	}
	return nil
}

func (a *accs) values(i int) []AggValue {
	out := make([]AggValue, len(a.metrics))
	for m, x := range a.aggs {
		v := AggValue{Type: a.metrics[m].ValueType()}
		switch {
		case x.Type == agg.Sketch:
			if sk := a.sks[m][i]; sk != nil {
				v.Long = int64(sk.Estimate())
			}
		case x.Timed() && x.Type == agg.Long:
			v.Long = a.ltimed[m][i].V
		case x.Timed():
			v.Double = a.dtimed[m][i].V
		case x.Type == agg.Long:
			v.Long = a.longs[m][i]
		case x.Kind == agg.Sum:
			v.Double = a.sums[m][i].Value()
		default:
			v.Double = a.dbls[m][i]
		}
		out[m] = v
	}
	return out
}

// metricReader reads one result metric of one source.
type metricReader struct {
	zero   bool              // the source lacks the metric: its rows read as zero
	long   *source.LongCache // long metric values
	double *source.DoubleCache
	times  *source.LongCache // first/last: the time stored with each value
	tails  source.TailReader // doubleSum: exactness tails, nil when the source has none
	sketch source.SketchMerger
}

func newMetricReaders(src source.Source, metrics []columns.Metric) []metricReader {
	schema := src.Schema()
	readers := make([]metricReader, len(metrics))
	for m, met := range metrics {
		rd := &readers[m]
		if schema.Metric(met.Name) < 0 {
			rd.zero = true
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
		case agg.Sketch:
			rd.sketch = src.SketchMerger(met.Name)
		}
	}
	return readers
}

// batchScratch is addBatch's reused memory.
type batchScratch struct {
	lvals []int64
	dvals []float64
	times []int64
	tail  []float64
}

// addBatch aggregates metric m of rows (increasing) into their groups gid; t holds the rows'
// times (a first/last value's time where the source lacks the metric). Each kind's loop is
// written out, the kernels' meaning (agg.Kind.CombineLong, CombineDouble) without a switch per
// value.
func (a *accs) addBatch(m int, rd *metricReader, rows []uint32, gid []int32, t []int64, sc *batchScratch) error {
	x := a.aggs[m]
	n := len(rows)
	var times []int64
	if x.Timed() {
		times = t
		if rd.times != nil {
			sc.times = slices.Grow(sc.times[:0], n)[:n]
			if err := rd.times.Gather(rows, sc.times); err != nil {
				return err
			}
			times = sc.times
		}
	}
	switch x.Type {
	case agg.Long:
		vals := slices.Grow(sc.lvals[:0], n)[:n]
		sc.lvals = vals
		switch {
		case rd.long != nil:
			if err := rd.long.Gather(rows, vals); err != nil {
				return err
			}
		case rd.zero:
			clear(vals)
		default:
			return nil
		}
		acc := a.longs[m]
		switch k := x.Kind; k {
		case agg.Sum:
			for i, v := range vals {
				g := gid[i]
				s, c := agg.AddLong(acc[g], v)
				acc[g] = s
				if c != 0 {
					a.addCarry(m, int(g), c)
				}
			}
		case agg.Min:
			for i, v := range vals {
				acc[gid[i]] = min(acc[gid[i]], v)
			}
		case agg.Max:
			for i, v := range vals {
				acc[gid[i]] = max(acc[gid[i]], v)
			}
		case agg.First, agg.Last:
			tacc := a.ltimed[m]
			for i, v := range vals {
				tacc[gid[i]].Add(k, v, times[i])
			}
		case agg.Union:
		}
	case agg.Double:
		vals := slices.Grow(sc.dvals[:0], n)[:n]
		sc.dvals = vals
		switch {
		case rd.double != nil:
			if err := rd.double.Gather(rows, vals); err != nil {
				return err
			}
		case rd.zero:
			clear(vals)
		default:
			return nil
		}
		switch k := x.Kind; k {
		case agg.Sum:
			acc := a.sums[m]
			for i, v := range vals {
				acc[gid[i]].Add(v)
			}
			if rd.tails != nil {
				for i, row := range rows {
					tail, err := rd.tails.Tail(int(row), sc.tail[:0])
					if err != nil {
						return err
					}
					sc.tail = tail
					acc[gid[i]].AddAll(tail)
				}
			}
		case agg.Min:
			acc := a.dbls[m]
			for i, v := range vals {
				acc[gid[i]] = math.Min(acc[gid[i]], v)
			}
		case agg.Max:
			acc := a.dbls[m]
			for i, v := range vals {
				acc[gid[i]] = math.Max(acc[gid[i]], v)
			}
		case agg.First, agg.Last:
			acc := a.dtimed[m]
			for i, v := range vals {
				acc[gid[i]].Add(k, v, times[i], nil)
			}
		case agg.Union:
		}
	case agg.Sketch:
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
	sk := a.sks[m][g]
	if sk == nil {
		sk = &hyperloglog.Sketch{}
		a.sks[m][g] = sk
	}
	return rd.sketch.MergeRow(row, sk)
}

// addRow aggregates metric m of one row, whose time is t, into group g.
func (a *accs) addRow(m int, rd *metricReader, g, row int, t int64) error {
	x := a.aggs[m]
	if x.Timed() && rd.times != nil {
		var err error
		if t, err = rd.times.At(row); err != nil {
			return err
		}
	}
	switch x.Type {
	case agg.Long:
		var v int64
		switch {
		case rd.long != nil:
			var err error
			if v, err = rd.long.At(row); err != nil {
				return err
			}
		case !rd.zero:
			return nil
		}
		if x.Timed() {
			a.ltimed[m][g].Add(x.Kind, v, t)
		} else {
			var c int64
			a.longs[m][g], c = x.Kind.CombineLong(a.longs[m][g], v)
			a.addCarry(m, g, c)
		}
	case agg.Double:
		var v float64
		switch {
		case rd.double != nil:
			var err error
			if v, err = rd.double.At(row); err != nil {
				return err
			}
		case !rd.zero:
			return nil
		}
		var tail []float64
		if rd.tails != nil {
			var err error
			if tail, err = rd.tails.Tail(row, nil); err != nil {
				return err
			}
		}
		switch {
		case x.Timed():
			a.dtimed[m][g].Add(x.Kind, v, t, nil)
		case x.Kind == agg.Sum:
			a.sums[m][g].Add(v)
			a.sums[m][g].AddAll(tail)
		default:
			a.dbls[m][g] = x.Kind.CombineDouble(a.dbls[m][g], v)
		}
	case agg.Sketch:
		if rd.sketch == nil {
			return nil
		}
		return a.mergeSketchRow(m, rd, g, row)
	}
	return nil
}
