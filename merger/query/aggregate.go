package query

import (
	"fmt"
	"slices"

	"github.com/axiomhq/hyperloglog"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/internal/source"
)

// accs holds the aggregation state of groups, metric by metric, indexed by group. Every
// combination goes through the kernels of columns/agg; the loops switch on the kernel's type
// and kind, never on aggregator names.
type accs struct {
	metrics []columns.Metric
	aggs    []agg.Agg
	rows    []int64
	minTime []int64
	longs   [][]agg.LongAcc
	doubles [][]agg.DoubleAcc
	sks     [][]*hyperloglog.Sketch
}

func newAccs(metrics []columns.Metric) *accs {
	n := len(metrics)
	a := &accs{metrics: metrics, aggs: make([]agg.Agg, n), longs: make([][]agg.LongAcc, n),
		doubles: make([][]agg.DoubleAcc, n), sks: make([][]*hyperloglog.Sketch, n)}
	for m, met := range metrics {
		a.aggs[m] = met.Agg()
	}
	return a
}

// grow adds a group.
func (a *accs) grow() {
	a.rows = append(a.rows, 0)
	a.minTime = append(a.minTime, int64(^uint64(0)>>1))
	for m, x := range a.aggs {
		switch x.Type {
		case agg.Long:
			a.longs[m] = append(a.longs[m], agg.NewLongAcc(x.Kind))
		case agg.Double:
			a.doubles[m] = append(a.doubles[m], agg.NewDoubleAcc(x.Kind))
		case agg.Sketch:
			a.sks[m] = append(a.sks[m], nil)
		}
	}
}

// mergeGroup adds group j of o, whose rows come after group i's in input order, into group i.
func (a *accs) mergeGroup(i int, o *accs, j int) error {
	a.rows[i] += o.rows[j]
	a.minTime[i] = min(a.minTime[i], o.minTime[j])
	for m, x := range a.aggs {
		switch x.Type {
		case agg.Long:
			a.longs[m][i].Merge(x.Kind, &o.longs[m][j])
		case agg.Double:
			a.doubles[m][i].Merge(x.Kind, &o.doubles[m][j])
		case agg.Sketch:
			if sk := o.sks[m][j]; sk != nil {
				if a.sks[m][i] == nil {
					a.sks[m][i] = &hyperloglog.Sketch{}
				}
				if err := agg.MergeSketch(a.sks[m][i], sk); err != nil {
					return fmt.Errorf("metric %q: %w", a.metrics[m].Name, err)
				}
			}
		}
	}
	return nil
}

func (a *accs) values(i int) []AggValue {
	out := make([]AggValue, len(a.metrics))
	for m, x := range a.aggs {
		v := AggValue{Type: a.metrics[m].ValueType()}
		switch x.Type {
		case agg.Long:
			v.Long = a.longs[m][i].V
		case agg.Double:
			v.Double = a.doubles[m][i].Value(x.Kind)
		case agg.Sketch:
			if sk := a.sks[m][i]; sk != nil {
				v.Long = int64(sk.Estimate())
			}
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
// times (a first/last value's time where the source lacks the metric).
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
				acc[gid[i]].V += v
			}
		case agg.Min, agg.Max:
			for i, v := range vals {
				p := &acc[gid[i]]
				p.V = k.CombineLong(p.V, v)
			}
		case agg.First, agg.Last:
			for i, v := range vals {
				acc[gid[i]].Add(k, v, times[i])
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
		acc := a.doubles[m]
		switch k := x.Kind; k {
		case agg.Sum:
			for i, v := range vals {
				acc[gid[i]].Sum.Add(v)
			}
			if rd.tails != nil {
				for i, row := range rows {
					tail, err := rd.tails.Tail(int(row), sc.tail[:0])
					if err != nil {
						return err
					}
					sc.tail = tail
					acc[gid[i]].Sum.AddAll(tail)
				}
			}
		case agg.Min, agg.Max:
			for i, v := range vals {
				p := &acc[gid[i]]
				p.V = k.CombineDouble(p.V, v)
			}
		case agg.First, agg.Last:
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
		a.longs[m][g].Add(x.Kind, v, t)
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
		a.doubles[m][g].Add(x.Kind, v, t, tail)
	case agg.Sketch:
		if rd.sketch == nil {
			return nil
		}
		return a.mergeSketchRow(m, rd, g, row)
	}
	return nil
}
