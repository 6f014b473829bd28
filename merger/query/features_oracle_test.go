package query

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
)

// The features users reach for (issue 37): metric filters, calendar granularities, order-by
// and limit, checked against a naive oracle written apart from the engine: rows as plain Go
// values, literals compared through math/big, buckets through time.Time's UTC calendar.

var featDims = []columns.Dimension{{Name: "country"}, {Name: "tags", MultiValue: true}}

var featMetrics = []columns.Metric{
	{Name: "rows", Aggregator: agg.Count},
	{Name: "delay", Aggregator: agg.LongSum},
	{Name: "big", Aggregator: agg.LongMax},
	{Name: "small", Aggregator: agg.LongMin},
	{Name: "dist", Aggregator: agg.DoubleSum},
	{Name: "dmin", Aggregator: agg.DoubleMin},
}

// featLongs are long values near the edges: int64's limits and 2^53, where float64 loses
// integers.
var featLongs = []int64{math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1, 1 << 53, 1<<53 + 1, -(1 << 53) - 1, 0, -1, 10, 11}

// featTimes are instants at calendar edges (UTC): year, quarter and month ends, ISO weeks
// crossing a year (2020-12-31, a Thursday, is in the week from Monday 2020-12-28; 2021-01-03
// too), a leap day, and times before the epoch.
var featTimes = func() []int64 {
	var out []int64
	for _, s := range []string{
		"2020-12-31T23:59:59.999Z", "2021-01-01T00:00:00Z", "2020-12-28T00:00:00Z", "2020-12-27T23:59:59.999Z",
		"2021-01-03T23:59:59.999Z", "2021-01-04T00:00:00Z", "2020-03-31T23:59:59.999Z", "2020-04-01T00:00:00Z",
		"2020-06-30T12:00:00Z", "2020-07-01T00:00:00.001Z", "2020-09-30T23:59:59.999Z", "2020-10-01T00:00:00Z",
		"2020-02-29T12:00:00Z", "2020-03-01T00:00:00Z", "2019-12-30T00:00:00Z", "2019-12-29T23:59:59.999Z",
		"1969-12-31T23:59:59.999Z", "1969-12-29T00:00:00Z", "1969-12-28T23:59:59.999Z", "1968-02-29T01:00:00Z",
	} {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		out = append(out, t.UnixMilli())
	}
	return out
}()

// featCase returns nInputs segments' rows: every input has the dimensions and some of the
// metrics (a metric an input lacks is null there), nulls in every metric but count,
// negative numbers, longs near int64's limits.
func featCase(rng *rand.Rand, nInputs, maxRows int) ([]columns.Schema, [][]columns.Row) {
	vals := []string{"", "fr", "de", "us", "日本"}
	lo := time.Date(2019, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	hi := time.Date(2021, 2, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	var schemas []columns.Schema
	var rows [][]columns.Row
	for in := range nInputs {
		s := columns.Schema{Dimensions: featDims}
		for i, m := range featMetrics {
			if in == 0 || i < 2 || rng.IntN(4) > 0 {
				s.Metrics = append(s.Metrics, m)
			}
		}
		n := rng.IntN(maxRows + 1)
		rs := make([]columns.Row, n)
		for i := range rs {
			r := columns.Row{Dims: make([][]string, 2), Metrics: make([]columns.Value, len(s.Metrics))}
			if rng.IntN(3) == 0 {
				r.Time = featTimes[rng.IntN(len(featTimes))]
			} else {
				r.Time = lo + rng.Int64N(hi-lo)
			}
			if rng.IntN(5) > 0 {
				r.Dims[0] = []string{vals[rng.IntN(len(vals))]}
			}
			for k := rng.IntN(3); k > 0; k-- {
				r.Dims[1] = append(r.Dims[1], vals[rng.IntN(len(vals))])
			}
			for m, met := range s.Metrics {
				v := &r.Metrics[m]
				if met.Aggregator != agg.Count && rng.IntN(6) == 0 {
					v.Null = true
					continue
				}
				switch met.Name {
				case "rows":
					v.Long = 1
				case "delay":
					v.Long = rng.Int64N(2001) - 1000
				case "big", "small":
					v.Long = featLongs[rng.IntN(len(featLongs))]
					if rng.IntN(2) == 0 {
						v.Long = rng.Int64N(41) - 20
					}
				case "dist", "dmin":
					switch rng.IntN(4) {
					case 0:
						v.Double = []float64{100, 500, -0.5, 99.5, 500.25, 0}[rng.IntN(6)]
					case 1:
						v.Double = rng.NormFloat64() * 1e6
					default:
						v.Double = float64(rng.IntN(2000)-500) / 4
					}
				}
			}
			rs[i] = r
		}
		slices.SortStableFunc(rs, func(a, b columns.Row) int { return cmp.Compare(a.Time, b.Time) })
		schemas, rows = append(schemas, s), append(rows, rs)
	}
	return schemas, rows
}

// ftree is a filter the oracle evaluates and writes out as text for Parse.
type ftree struct {
	op   string // cmp (cop), between, notbetween, numin, numnotin, eq, in, null, and, or, not
	cop  string
	col  string
	nums []string
	strs []string
	subs []ftree
}

func (f ftree) expr() string {
	switch f.op {
	case "cmp":
		return f.col + " " + f.cop + " " + f.nums[0]
	case "between", "notbetween":
		not := ""
		if f.op == "notbetween" {
			not = "not "
		}
		return f.col + " " + not + "between " + f.nums[0] + " and " + f.nums[1]
	case "numin", "numnotin":
		not := ""
		if f.op == "numnotin" {
			not = "not "
		}
		return f.col + " " + not + "in (" + strings.Join(f.nums, ", ") + ")"
	case "eq":
		return f.col + " = '" + f.strs[0] + "'"
	case "in":
		q := make([]string, len(f.strs))
		for i, s := range f.strs {
			q[i] = "'" + s + "'"
		}
		return f.col + " in (" + strings.Join(q, ", ") + ")"
	case "null":
		return f.col + " is null"
	case "not":
		return "not (" + f.subs[0].expr() + ")"
	case "and", "or":
		parts := make([]string, len(f.subs))
		for i, g := range f.subs {
			parts[i] = "(" + g.expr() + ")"
		}
		return strings.Join(parts, " "+f.op+" ")
	}
	panic(f.op)
}

// matches evaluates f on row r of schema s: comparisons never hold for a null; a long
// compares exactly with the literal (big.Rat), a double with the literal rounded to float64.
func (f ftree) matches(s columns.Schema, r columns.Row) bool {
	switch f.op {
	case "and":
		for _, g := range f.subs {
			if !g.matches(s, r) {
				return false
			}
		}
		return true
	case "or":
		for _, g := range f.subs {
			if g.matches(s, r) {
				return true
			}
		}
		return false
	case "not":
		return !f.subs[0].matches(s, r)
	case "eq", "in":
		k := s.Dimension(f.col)
		for _, v := range r.Dims[k] {
			if slices.Contains(f.strs, v) {
				return true
			}
		}
		return false
	case "null":
		if k := s.Dimension(f.col); k >= 0 {
			return len(r.Dims[k]) == 0
		}
		k := s.Metric(f.col)
		return k < 0 || r.Metrics[k].Null
	}
	k := s.Metric(f.col)
	if k < 0 || r.Metrics[k].Null {
		return false
	}
	v := r.Metrics[k]
	// c compares the value with literal i: -1, 0, +1.
	c := func(i int) int {
		if s.Metrics[k].Agg().Type == agg.Long {
			lit, ok := new(big.Rat).SetString(f.nums[i])
			if !ok {
				panic(f.nums[i])
			}
			return new(big.Rat).SetInt64(v.Long).Cmp(lit)
		}
		lit, err := strconv.ParseFloat(f.nums[i], 64)
		if err != nil {
			panic(err)
		}
		return cmp.Compare(v.Double, lit)
	}
	switch f.op {
	case "cmp":
		x := c(0)
		switch f.cop {
		case "<":
			return x < 0
		case "<=":
			return x <= 0
		case ">":
			return x > 0
		case ">=":
			return x >= 0
		case "=", "==":
			return x == 0
		case "!=", "<>":
			return x != 0
		}
	case "between":
		return c(0) >= 0 && c(1) <= 0
	case "notbetween":
		return !(c(0) >= 0 && c(1) <= 0)
	case "numin", "numnotin":
		in := false
		for i := range f.nums {
			in = in || c(i) == 0
		}
		return in == (f.op == "numin")
	}
	panic(f.op)
}

// featLiterals returns number literals for a metric: values in the data (so that = holds),
// halves around them, and edges, written many ways.
func featLiteral(rng *rand.Rand, long bool) string {
	if long {
		v := featLongs[rng.IntN(len(featLongs))]
		if rng.IntN(2) == 0 {
			v = rng.Int64N(41) - 20
		}
		switch rng.IntN(6) {
		case 0:
			return fmt.Sprintf("%d.5", v)
		case 1:
			return []string{"9007199254740993", "9223372036854775807.5", "-9223372036854775808.5", "1e19", "-1e19", "1e1", "-2.5e1", "10.5", "-0", ".5"}[rng.IntN(10)]
		default:
			return strconv.FormatInt(v, 10)
		}
	}
	return []string{"100", "500", "99.5", "-0.5", "1e2", "5.0025e2", ".5", "-125.25", "0", "1e300", "-3e5"}[rng.IntN(11)]
}

func featTree(rng *rand.Rand, depth int) ftree {
	longs := []string{"rows", "delay", "big", "small"}
	dbls := []string{"dist", "dmin"}
	k := rng.IntN(10)
	if depth > 2 {
		k = rng.IntN(6)
	}
	switch k {
	case 9: // dimension predicates that leave few rows: the metric's values are read there only
		return ftree{op: "and", subs: []ftree{
			{op: "eq", col: "country", strs: []string{"日本"}}, {op: "in", col: "tags", strs: []string{"日本"}},
			{op: "cmp", cop: []string{">", "<=", "!="}[rng.IntN(3)], col: longs[rng.IntN(4)], nums: []string{featLiteral(rng, true)}},
		}}
	case 0, 1:
		col, long := dbls[rng.IntN(2)], false
		if rng.IntN(3) > 0 {
			col, long = longs[rng.IntN(4)], true
		}
		ops := []string{"<", "<=", ">", ">=", "=", "!=", "==", "<>"}
		return ftree{op: "cmp", cop: ops[rng.IntN(len(ops))], col: col, nums: []string{featLiteral(rng, long)}}
	case 2:
		col, long := dbls[rng.IntN(2)], false
		if rng.IntN(2) > 0 {
			col, long = longs[rng.IntN(4)], true
		}
		op := []string{"between", "notbetween", "numin", "numnotin"}[rng.IntN(4)]
		f := ftree{op: op, col: col, nums: []string{featLiteral(rng, long), featLiteral(rng, long)}}
		if rng.IntN(3) == 0 && strings.HasPrefix(op, "num") {
			f.nums = append(f.nums, featLiteral(rng, long))
		}
		return f
	case 3:
		return ftree{op: "null", col: []string{"country", "tags", "delay", "big", "dist", "small"}[rng.IntN(6)]}
	case 4:
		return ftree{op: "eq", col: "country", strs: []string{[]string{"fr", "de", ""}[rng.IntN(3)]}}
	case 5:
		return ftree{op: "in", col: "tags", strs: []string{"fr", "us"}}
	case 6:
		return ftree{op: "not", subs: []ftree{featTree(rng, depth+1)}}
	default:
		op := []string{"and", "or"}[rng.IntN(2)]
		return ftree{op: op, subs: []ftree{featTree(rng, depth+1), featTree(rng, depth+1)}}
	}
}

// oracleBucket returns the start of ms's bucket through time.Time (UTC).
func oracleBucket(gran string, ms int64) int64 {
	t := time.UnixMilli(ms).UTC()
	y, m, d := t.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	switch gran {
	case "none":
		return ms
	case "second":
		return t.Truncate(time.Second).UnixMilli()
	case "hour":
		return t.Truncate(time.Hour).UnixMilli()
	case "day":
		return day.UnixMilli()
	case "week": // ISO: Monday
		back := (int(day.Weekday()) + 6) % 7
		return day.AddDate(0, 0, -back).UnixMilli()
	case "month":
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	case "quarter":
		return time.Date(y, (m-1)/3*3+1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	case "year":
		return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	case "all":
		return 0
	}
	panic(gran)
}

type featQuery struct {
	gran    string
	flt     *ftree
	groupBy []string
	orderBy []OrderKey
	limit   int
}

func (q featQuery) String() string {
	flt := ""
	if q.flt != nil {
		flt = q.flt.expr()
	}
	return fmt.Sprintf("granularity %s filter %q group-by %v order-by %v limit %d", q.gran, flt, q.groupBy, q.orderBy, q.limit)
}

// featOracle answers q naively on the rows.
func featOracle(schemas []columns.Schema, rows [][]columns.Row, q featQuery) Result {
	type group struct {
		row  Row
		sums []*big.Float
		set  []bool
	}
	groups := map[string]*group{}
	var order []string
	spec := Spec{GroupBy: q.groupBy}
	for i, s := range schemas {
		for _, r := range rows[i] {
			if q.flt != nil && !q.flt.matches(s, r) {
				continue
			}
			bucket := oracleBucket(q.gran, r.Time)
			for _, c := range oracleCombos(spec, s, r) {
				key := fmt.Sprint(bucket, c)
				g := groups[key]
				if g == nil {
					g = &group{row: Row{Time: bucket, Groups: c, Values: make([]AggValue, len(featMetrics))},
						sums: make([]*big.Float, len(featMetrics)), set: make([]bool, len(featMetrics))}
					if q.gran == "all" {
						g.row.Time = math.MaxInt64
					}
					for m := range featMetrics {
						g.sums[m] = new(big.Float).SetPrec(4000)
						g.row.Values[m].Type = featMetrics[m].ValueType()
					}
					groups[key] = g
					order = append(order, key)
				}
				if q.gran == "all" {
					g.row.Time = min(g.row.Time, r.Time)
				}
				g.row.Rows++
				for m, met := range featMetrics {
					k := s.Metric(met.Name)
					if k < 0 || r.Metrics[k].Null {
						continue
					}
					v, a := r.Metrics[k], &g.row.Values[m]
					first := !g.set[m]
					g.set[m] = true
					switch met.Aggregator {
					case agg.Count, agg.LongSum:
						a.Long += v.Long
					case agg.LongMax:
						if first || v.Long > a.Long {
							a.Long = v.Long
						}
					case agg.LongMin:
						if first || v.Long < a.Long {
							a.Long = v.Long
						}
					case agg.DoubleSum:
						g.sums[m].Add(g.sums[m], new(big.Float).SetFloat64(v.Double))
					case agg.DoubleMin:
						if first || v.Double < a.Double {
							a.Double = v.Double
						}
					}
				}
			}
		}
	}
	res := Result{GroupBy: q.groupBy, Metrics: featMetrics}
	for _, key := range order {
		g := groups[key]
		for m, met := range featMetrics {
			if met.Aggregator == agg.DoubleSum {
				g.row.Values[m].Double, _ = g.sums[m].Float64()
			}
			if !g.set[m] && met.Aggregator != agg.Count {
				g.row.Values[m] = AggValue{Type: met.ValueType(), Null: true}
			}
		}
		res.Rows = append(res.Rows, g.row)
	}
	// Default order: bucket (one with all), then group values, null first.
	bucketOf := func(r Row) int64 {
		if q.gran == "all" {
			return 0
		}
		return r.Time
	}
	slices.SortFunc(res.Rows, func(a, b Row) int {
		if c := cmp.Compare(bucketOf(a), bucketOf(b)); c != 0 {
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
			if c := strings.Compare(x.Value, y.Value); c != 0 {
				return c
			}
		}
		return 0
	})
	// Then the order-by, stable, nulls first ascending.
	slices.SortStableFunc(res.Rows, func(a, b Row) int {
		for _, key := range q.orderBy {
			var c int
			switch {
			case key.Column == "__time":
				c = cmp.Compare(a.Time, b.Time)
			case key.Column == "__rows":
				c = cmp.Compare(a.Rows, b.Rows)
			case slices.Contains(q.groupBy, key.Column):
				k := slices.Index(q.groupBy, key.Column)
				x, y := a.Groups[k], b.Groups[k]
				switch {
				case x.Null && y.Null:
				case x.Null:
					c = -1
				case y.Null:
					c = 1
				default:
					c = strings.Compare(x.Value, y.Value)
				}
			default:
				m := slices.IndexFunc(featMetrics, func(m columns.Metric) bool { return m.Name == key.Column })
				x, y := a.Values[m], b.Values[m]
				switch {
				case x.Null && y.Null:
				case x.Null:
					c = -1
				case y.Null:
					c = 1
				case x.Type == columns.MetricDouble:
					c = cmp.Compare(x.Double, y.Double)
				default:
					c = cmp.Compare(x.Long, y.Long)
				}
			}
			if key.Desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	if q.limit > 0 && len(res.Rows) > q.limit {
		res.Rows = res.Rows[:q.limit]
	}
	return res
}
