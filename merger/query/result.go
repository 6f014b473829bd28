package query

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
)

// globalTable combines the groups of every source of one window by value.
type globalTable struct {
	nd     int // group-by dimensions
	index  map[string]int
	times  []int64
	groups []GroupValue // nd values a group
	acc    *accs
	key    []byte
	vals   []GroupValue // mergeInto's scratch
	// byIDs: the groups come from one segment whose dictionary ids sort them as the result
	// does (takeInto); ids holds their ids (nd a group) and, when the runner's dense index
	// sorted them, sorted their order.
	byIDs  bool
	ids    []uint32
	sorted []int32
	// perm: the groups in the Result's order (sort), nil once they are laid out in it
	// (arrange); spare is arrange's memory
	perm    []int32
	scratch []int32
	spare   *globalTable
	// laidOut: the groups are in the Result's order already (takeSorted): no sort, no arrange.
	laidOut bool
}

func newGlobalTable(metrics []columns.Metric, ngroup int) *globalTable {
	return &globalTable{nd: ngroup, index: map[string]int{}, acc: newAccs(metrics)}
}

// group returns group i's values.
func (g *globalTable) group(i int) []GroupValue { return g.groups[i*g.nd : (i+1)*g.nd] }

// idOrdered reports whether the runner's group keys sort as the result does: a segment's
// dictionary ids are in the values' byte order with null (id 0) first, and a dimension the
// segment lacks is null everywhere. Raw dimensions intern values in the order met: no.
func (r *runner) idOrdered() bool {
	if !r.ordered {
		return false
	}
	for _, g := range r.gdims {
		if g.raw != nil {
			return false
		}
	}
	return true
}

// takeInto hands the runner's groups to an empty g as they are: one input's groups are
// distinct already, and its ids sort them (idOrdered). The runner gets g's accumulators.
func (r *runner) takeInto(g *globalTable) error {
	nd := len(r.gdims)
	if d := r.dense; d != nil && d.sorted {
		d.finish(r)
		if len(r.order) == len(r.times) {
			return r.takeSorted(g)
		}
	}
	for i, id := range r.keys {
		k := i % nd
		v, err := r.gdims[k].value(id)
		if err != nil {
			return fmt.Errorf("query: dimension %q: %w", r.spec.GroupBy[k], err)
		}
		g.groups = append(g.groups, v)
	}
	g.times = append(g.times, r.times...)
	g.byIDs = true
	g.ids = append(g.ids[:0], r.keys...)
	if d := r.dense; d != nil && d.sorted { // finished above
		g.sorted = append(g.sorted[:0], r.order...)
	}
	g.acc, r.acc = r.acc, g.acc
	return nil
}

// takeSorted is takeInto for groups whose order the dense index found (r.order, every
// group): it hands them to g in that order, the Result's, so that g is laid out already
// (neither sorted nor arranged). The runner keeps its accumulators (to be reset).
func (r *runner) takeSorted(g *globalTable) error {
	nd := len(r.gdims)
	order := r.order
	g.groups = slices.Grow(g.groups[:0], len(order)*nd)
	for _, gi := range order {
		for k, id := range r.keys[int(gi)*nd : int(gi+1)*nd] {
			v, err := r.gdims[k].value(id)
			if err != nil {
				return fmt.Errorf("query: dimension %q: %w", r.spec.GroupBy[k], err)
			}
			g.groups = append(g.groups, v)
		}
	}
	g.times = gather(g.times, r.times, order, 1)
	g.ids = gather(g.ids, r.keys, order, nd)
	gatherAccs(g.acc, r.acc, order)
	g.byIDs, g.laidOut = true, true
	return nil
}

// reset drops every group, keeping the memory for the next window's.
func (g *globalTable) reset() {
	g.byIDs, g.laidOut = false, false
	g.ids, g.sorted, g.perm = g.ids[:0], g.sorted[:0], nil
	clear(g.index)
	clear(g.groups) // no value strings kept alive
	g.times, g.groups = g.times[:0], g.groups[:0]
	g.acc.reset()
}

// mergeInto combines the runner's groups with g's by value.
func (r *runner) mergeInto(g *globalTable) error {
	nd := len(r.gdims)
	for gi := range r.times {
		g.vals = g.vals[:0]
		for k, id := range r.keys[gi*nd : (gi+1)*nd] {
			v, err := r.gdims[k].value(id)
			if err != nil {
				return fmt.Errorf("query: dimension %q: %w", r.spec.GroupBy[k], err)
			}
			g.vals = append(g.vals, v)
		}
		g.key = binary.LittleEndian.AppendUint64(g.key[:0], uint64(r.times[gi]))
		for _, v := range g.vals {
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
			g.groups = append(g.groups, g.vals...)
			g.acc.grow()
		}
		if err := g.acc.mergeGroup(i, r.acc, gi); err != nil {
			return fmt.Errorf("query: %w", err)
		}
	}
	return nil
}

// partBuf is the memory of one part handed to RunEach's each: its rows, their group values
// and aggregated values. RunEach reuses it once each has returned.
type partBuf struct {
	rows   []Row
	groups []GroupValue
	values []AggValue
}

// sort puts g's groups in the Result's order: it lays them out in it (arrange).
func (g *globalTable) sort() {
	if g.laidOut {
		g.perm = nil
		return
	}
	g.perm = g.order()
	g.arrange()
}

// arrange lays g's groups out in perm's order and drops perm. It runs on the producer's
// goroutine (pipeline.emit), so that the consumer's result reads and writes every array in
// order: laid out through perm there, its random accesses to a window's groups were most of
// the consumer's work, which is the pipeline's slower side.
func (g *globalTable) arrange() {
	perm := g.perm
	g.perm = nil
	inOrder := true
	for j, i := range perm {
		if int(i) != j {
			inOrder = false
			break
		}
	}
	if inOrder {
		return
	}
	if g.spare == nil {
		g.spare = &globalTable{acc: newAccs(g.acc.metrics)}
	}
	o, nd := g.spare, g.nd
	o.times = gather(o.times, g.times, perm, 1)
	o.groups = gather(o.groups, g.groups, perm, nd)
	clear(g.groups) // no value strings kept alive
	a, b := g.acc, o.acc
	gatherAccs(b, a, perm)
	g.times, o.times = o.times, g.times
	g.groups, o.groups = o.groups, g.groups
	g.acc, o.acc = b, a
	if g.ids != nil {
		o.ids = gather(o.ids, g.ids, perm, nd)
		g.ids, o.ids = o.ids, g.ids
	}
}

// gatherAccs sets dst's groups to src's groups perm (in order), and drops src's sketches.
func gatherAccs(dst, src *accs, perm []int32) {
	dst.rows = gather(dst.rows, src.rows, perm, 1)
	dst.minTime = gather(dst.minTime, src.minTime, perm, 1)
	for m := range src.aggs {
		dst.longs[m] = gather(dst.longs[m], src.longs[m], perm, 1)
		dst.dbls[m] = gather(dst.dbls[m], src.dbls[m], perm, 1)
		dst.sks[m] = gather(dst.sks[m], src.sks[m], perm, 1)
		clear(src.sks[m])
	}
}

// gather returns dst's memory holding, for each j, the k elements of group perm[j] of src (k
// a group).
func gather[T any](dst, src []T, perm []int32, k int) []T {
	if len(src) == 0 {
		return dst[:0]
	}
	dst = slices.Grow(dst[:0], len(perm)*k)[:len(perm)*k]
	if k == 1 {
		for j, i := range perm {
			dst[j] = src[i]
		}
		return dst
	}
	for j, i := range perm {
		copy(dst[j*k:(j+1)*k], src[int(i)*k:int(i+1)*k])
	}
	return dst
}

// result lays g's sorted groups [lo, hi) out in buf's memory.
func (g *globalTable) result(groupBy []string, all bool, buf *partBuf, lo, hi int) Result {
	n, nd, nm := hi-lo, g.nd, len(g.acc.metrics)
	res := Result{GroupBy: slices.Clone(groupBy), Metrics: g.acc.metrics}
	timeOf := func(i int) int64 {
		if all {
			return g.acc.minTime[i]
		}
		return g.times[i]
	}
	// The groups are laid out in the Result's order (arrange): rows are written in order.
	buf.rows = slices.Grow(buf.rows[:0], n)[:n]
	buf.groups = slices.Grow(buf.groups[:0], n*nd)[:n*nd]
	buf.values = slices.Grow(buf.values[:0], n*nm)[:n*nm]
	copy(buf.groups, g.groups[lo*nd:hi*nd])
	g.acc.valuesInto(buf.values, lo, hi)
	for j := range n {
		i := lo + j
		buf.rows[j] = Row{Time: timeOf(i), Groups: buf.groups[j*nd : (j+1)*nd : (j+1)*nd], Rows: g.acc.rows[i],
			Values: buf.values[j*nm : (j+1)*nm : (j+1)*nm]}
	}
	res.Rows = buf.rows
	return res
}

// order returns g's groups in the Result's order: by time bucket, then by values (null
// first, then byte order), which a segment's dictionary ids follow (byIDs).
func (g *globalTable) order() []int32 {
	n, nd := len(g.times), g.nd
	if g.byIDs && len(g.sorted) == n { // one segment's, sorted by its dense index
		return g.sorted
	}
	perm := slices.Grow(g.scratch[:0], n)[:n]
	g.scratch = perm
	for i := range perm {
		perm[i] = int32(i)
	}
	timeOf := func(i int32) int64 { return g.times[i] } // with all, every bucket is 0
	if g.byIDs {
		slices.SortFunc(perm, func(a, b int32) int {
			if c := cmp.Compare(timeOf(a), timeOf(b)); c != 0 {
				return c
			}
			return slices.Compare(g.ids[int(a)*nd:int(a+1)*nd], g.ids[int(b)*nd:int(b+1)*nd])
		})
		return perm
	}
	slices.SortFunc(perm, func(a, b int32) int {
		if c := cmp.Compare(timeOf(a), timeOf(b)); c != 0 {
			return c
		}
		for k := range nd {
			x, y := g.groups[int(a)*nd+k], g.groups[int(b)*nd+k]
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
	return perm
}

// Result holds a query's groups in a defined order: by time bucket, then by group values
// (dimension by dimension, null first, then in byte order), whatever the granularity (with
// all, one bucket: by group values); or in Spec.OrderBy's order.
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

// AggValue is an aggregated metric: Long for count and long aggregators, Double for double
// aggregators; for a sketch aggregator the group's Sketch (nil when no row had one: empty)
// and, in Long, its estimate rounded down (agg.Sketch.Estimate: hyperUnique's distinct count).
type AggValue struct {
	Type   columns.MetricType
	Long   int64
	Double float64
	Sketch agg.Sketch
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
