package merger

import (
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/internal/source"
)

// Pre-aggregation. A rollup whose granularity is coarser than its inputs' re-sorts each group
// of a truncated time (an hour of rows, say) by its dimensions, and every metric then reads
// its values in that order: a random read per row and metric, which costs a cache miss each
// when a group holds more rows than a cache does. With pre-aggregation the cursor instead
// numbers the group's distinct keys (a slot each, through a table indexed by the packed ids),
// sorts only the distinct keys, and emits one position per slot; each metric task reads the
// group's values in row order and combines them into one accumulator per slot (a table the
// size of the distinct keys), and an output row then merges the slots' accumulators of the
// inputs it combines. The order of combination is the same as row by row: a slot's rows in
// row order, slots of different inputs in input order.
//
// It is on when every output dimension is single-value with packed ids of at most
// maxSlotBits bits, and every metric is a long metric (other metrics read rows: doubles keep
// their exactness tails by row, sketches merge by row).

// maxSlotBits bounds the packed ids a slot table is indexed by (4 MiB of table).
const maxSlotBits = 20

// For tests: preAggOff turns pre-aggregation off, preAggGroups counts the groups
// pre-aggregated.
var (
	preAggOff    bool
	preAggGroups atomic.Int64
)

// preAgg is the merge's pre-aggregation: the consumers of each group (the long metric tasks)
// and the pool of the groups' slot arrays.
type preAgg struct {
	users int32
	pool  chan []int32
}

// get returns a slot array of n entries (values unspecified).
func (p *preAgg) get(n int) []int32 {
	select {
	case g := <-p.pool:
		if cap(g) >= n {
			return g[:n]
		}
	default:
	}
	return make([]int32, n, n+n/4)
}

// groupAgg is a pre-aggregated group: source rows [lo, hi) of input in, row lo+i in slot
// gid[i], slots slots. The cursor writes it before the batch that first refers to it is sent;
// each of the users reads it and calls release once done with it.
type groupAgg struct {
	in     int32
	lo, hi uint32
	gid    []int32
	slots  int
	users  atomic.Int32
	pre    *preAgg
}

// release ends one user's use; the last gives the slot array back to the pool.
func (g *groupAgg) release() {
	if g.users.Add(-1) == 0 {
		select {
		case g.pre.pool <- g.gid:
		default:
		}
		g.gid = nil
	}
}

// preAggregate pre-aggregates the group of window rows [start, end): it writes the emission
// positions q.. (one per distinct key, in key order, at window rows start..) and returns their
// number; 0, having done nothing, when the keys do not fit a slot table.
func (c *cursor) preAggregate(start, end, q int) int {
	if c.packBits == nil || c.idBits > maxSlotBits || preAggOff {
		return 0
	}
	preAggGroups.Add(1)
	w := &c.w
	n := end - start
	if len(c.slotTab) == 0 {
		c.slotTab = make([]int32, 1<<c.idBits)
		for i := range c.slotTab {
			c.slotTab[i] = -1
		}
	}
	keys := c.packKeys(start, end)
	g := &groupAgg{in: int32(c.in), lo: w.src[start], hi: w.src[end-1] + 1, gid: c.pre.get(n), pre: c.pre}
	g.users.Store(c.pre.users)
	count := sized(c.count, n) // per slot: its rows
	tab := c.slotTab
	slots := 0
	for i, k := range keys {
		s := tab[k]
		if s < 0 {
			s = int32(slots)
			tab[k] = s
			keys[slots] = k // the distinct keys, in place: slots <= i
			count[slots] = 0
			slots++
		}
		count[s]++
		g.gid[i] = s
	}
	dk := keys[:slots]
	for _, k := range dk {
		tab[k] = -1
	}
	slotBits := bits.Len(uint(slots - 1))
	for s, k := range dk {
		dk[s] = k<<slotBits | uint64(s)
	}
	c.kbuf2 = radixSort(dk, sized(c.kbuf2, slots), c.idBits+slotBits)
	c.kbuf, c.count = keys, count
	if len(c.slot) < w.n {
		c.slot, c.weight = sized(c.slot, w.n), sized(c.weight, w.n)
	}
	// The group's rows are read: its first rows become its slots in key order, their keys
	// unpacked from the sorted ones (earlier positions may point at rows up to start, so not
	// below it). The emission then reads the window in order, not at a representative row each.
	mask := uint64(1)<<slotBits - 1
	t := w.time[start]
	for p, k := range dk {
		s := int32(k & mask)
		row := start + p
		key := k >> slotBits
		for j := len(w.dims) - 1; j >= 0; j-- {
			b := c.packBits[j]
			w.dims[j].ids[row] = uint32(key & (1<<b - 1))
			key >>= b
		}
		w.time[row] = t
		c.perm[q+p] = int32(row)
		c.slot[row], c.weight[row] = s, count[s]
		c.glo[row], c.ghi[row] = g.lo, g.hi
		if c.rollup {
			c.same[q+p] = false
		}
	}
	g.slots = slots
	c.aggs = append(c.aggs, g)
	return slots
}

// aggAt returns the pre-aggregated group holding window row i, or nil.
func (c *cursor) aggAt(i int) *groupAgg {
	if len(c.aggs) == 0 || len(c.ghi) == 0 || c.ghi[i] == 0 {
		return nil
	}
	lo := c.glo[i]
	for _, g := range c.aggs {
		if g.lo == lo {
			return g
		}
	}
	return nil
}

// slotAccs is a long metric task's accumulators of one input's pre-aggregated group: accs,
// or, when every row of the group has a value and the metric stores no times (plain), only
// the values v and their sums' carries c (a quarter of the memory: the table is read at random).
type slotAccs struct {
	g     *groupAgg
	plain bool
	accs  []agg.LongAcc
	v, c  []int64
	tmp   agg.LongAcc
}

// at returns slot s's accumulator (for plain, valid until the next call).
func (sa *slotAccs) at(s uint32) *agg.LongAcc {
	if !sa.plain {
		return &sa.accs[s]
	}
	sa.tmp = agg.LongAcc{V: sa.v[s], C: sa.c[s], Set: true}
	return &sa.tmp
}

// load combines the values of g's rows into one accumulator per slot, reading the group's
// values (and times, for first/last) in row order.
func (t *longTask) loadSlots(sa *slotAccs, g *groupAgg) error {
	if sa.g != nil {
		sa.g.release()
		sa.g = nil
	}
	kind := t.agg.Kind
	in := g.in
	if sa.plain = t.plain[in]; sa.plain {
		return t.loadPlain(sa, g)
	}
	if cap(sa.accs) < g.slots {
		sa.accs = make([]agg.LongAcc, g.slots, g.slots+g.slots/4)
	}
	accs := sa.accs[:g.slots]
	id := agg.NewLongAcc(kind)
	for i := range accs {
		accs[i] = id
	}
	sa.accs = accs
	c := t.vals.r[in]
	if c == nil || t.nulls.absent[in] { // every row null: no slot is set
		sa.g = g
		return nil
	}
	bm := t.nulls.bms[in]
	var tc *source.ChunkCache[int64] // first/last: the times (none: 0, as readRef reads them)
	if t.times != nil {
		tc = t.times.r[in]
	}
	for r := int(g.lo); r < int(g.hi); {
		vs, err := c.Range(r, int(g.hi)-r)
		if err != nil {
			return t.failIn(in, err)
		}
		gid := g.gid[r-int(g.lo) : r-int(g.lo)+len(vs)]
		switch {
		case tc != nil:
			for k := 0; k < len(vs); {
				ts, err := tc.Range(r+k, len(vs)-k)
				if err != nil {
					return t.failIn(in, err)
				}
				for j, tm := range ts {
					row := r + k + j
					null := bm != nil && bm.Contains(uint32(row))
					accs[gid[k+j]].Add(kind, vs[k+j], tm, null)
				}
				k += len(ts)
			}
		case bm != nil:
			for j, v := range vs {
				accs[gid[j]].Add(kind, v, 0, bm.Contains(uint32(r+j)))
			}
		default:
			for j, v := range vs {
				accs[gid[j]].Add(kind, v, 0, false)
			}
		}
		r += len(vs)
	}
	sa.g = g
	return nil
}

// loadPlain is loadSlots for a source whose rows all have a value, of a metric without times.
func (t *longTask) loadPlain(sa *slotAccs, g *groupAgg) error {
	kind := t.agg.Kind
	sa.v, sa.c = sized(sa.v, g.slots), sized(sa.c, g.slots)
	v, carries := sa.v, sa.c
	id := kind.LongIdentity()
	for i := range v {
		v[i] = id
	}
	clear(carries)
	c := t.vals.r[g.in]
	for r := int(g.lo); r < int(g.hi); {
		vs, err := c.Range(r, int(g.hi)-r)
		if err != nil {
			return t.failIn(g.in, err)
		}
		gid := g.gid[r-int(g.lo) : r-int(g.lo)+len(vs)]
		for j, x := range vs {
			s := gid[j]
			var k int64
			v[s], k = kind.CombineLong(v[s], x)
			if k != 0 {
				carries[s] += k
			}
		}
		r += len(vs)
	}
	sa.g = g
	return nil
}

func (t *longTask) failIn(in int32, err error) error {
	return fmt.Errorf("merger: %s: metric %q: %w", t.names[in], t.name, err)
}

// slotsOf returns the slot accumulators of ref k's group when it is pre-aggregated, loading
// them when the group is new, else nil.
func (t *longTask) slotsOf(b *batch, k int32) (*slotAccs, error) {
	in, lo, hi := b.refIn[k], b.refLo[k], b.refHi[k]
	if t.slots == nil {
		t.slots = make([]slotAccs, len(t.vals.r))
	}
	sa := &t.slots[in]
	if g := sa.g; g != nil && g.lo == lo && g.hi == hi {
		return sa, nil
	}
	for _, g := range b.aggs {
		if g.in == in && g.lo == lo && g.hi == hi {
			if err := t.loadSlots(sa, g); err != nil {
				return nil, err
			}
			return sa, nil
		}
	}
	return nil, nil
}

// retireSlots releases the groups of the sources b retires.
func (t *longTask) retireSlots(b *batch) {
	for _, in := range b.retired {
		if t.slots != nil && t.slots[in].g != nil {
			t.slots[in].g.release()
			t.slots[in].g = nil
		}
	}
}
