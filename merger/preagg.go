package merger

import (
	"errors"
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
// numbers the group's distinct keys in key order (a slot each, by its rank in a bitmap indexed
// by the packed ids), and emits one position per slot; each metric task reads the
// group's values in row order and combines them into one accumulator per slot (a table the
// size of the distinct keys), and an output row then merges the slots' accumulators of the
// inputs it combines. The order of combination is the same as row by row: a slot's rows in
// row order, slots of different inputs in input order.
//
// It is on when every output dimension is single-value with packed ids of at most
// maxSlotBits bits, and every metric is a long metric (other metrics read rows: doubles keep
// their exactness tails by row, sketches merge by row).

// maxSlotBits bounds the packed ids the bitmap of a group's keys is indexed by (128 KiB of
// bitmap, 64 KiB of ranks).
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
	users  int32
	pool   chan []int32
	pool16 chan []uint16 // streamed groups' narrow slot arrays (see narrowSlots)
	// openKeys opens a reader of input in's rows' packed keys, for the groups keyed again
	// (see rekey.go); nil: every group keeps its keys in memory.
	openKeys func(in int32) *keyReader
	// memGroupRows is maxMemGroupRows, or less (the merge's bounds); 0: maxMemGroupRows.
	memGroupRows int
	// release takes an input's mapped pages out of the resident set (releaseInputs): a
	// streamed group is read whole, by its cursor and then by each metric task, and without
	// it a group of 12 M rows (an hour of the peers' 300 M-row events) stays resident, 100
	// MiB of it. Nil: nothing to release.
	release func(in int32) error
	// loads combines streamed groups ahead for the long tasks (see preload.go).
	loads preloads
	// tables is what the long tasks' slot tables hold (see slottables.go).
	tables tableMem
}

// releaseEvery calls release for input in once rows passed *last by releaseRows.
func (p *preAgg) releaseEvery(in int32, rows int, last *int) error {
	if p.release == nil || rows-*last < releaseRows {
		return nil
	}
	*last = rows
	return p.release(in)
}

// get returns a slot array of n entries (values unspecified).
func (p *preAgg) get(n int) []int32 { return fromPool(p.pool, n) }

// get16 returns a narrow slot array of n entries (values unspecified).
func (p *preAgg) get16(n int) []uint16 { return fromPool(p.pool16, n) }

// fromPool returns an array of n entries from pool when one there is large enough, else a new
// one (values unspecified).
func fromPool[T any](pool chan []T, n int) []T {
	select {
	case g := <-pool:
		if cap(g) >= n {
			return g[:n]
		}
	default:
	}
	return make([]T, n, n+n/4)
}

// toPool keeps g in pool for a later group when there is room, else drops it.
func toPool[T any](pool chan []T, g []T) {
	select {
	case pool <- g:
	default:
	}
}

// narrowSlots is the most slots of a streamed group held in memory whose rows' slots are kept
// as uint16, not int32 (a variable for tests): a group's slots are held until every metric
// task has combined its rows, while its cursor streams the next group; narrow, five
// overlapping inputs of 30 M rows held 2.5 MiB less.
var narrowSlots = 1 << 16

// groupAgg is a pre-aggregated group: source rows [lo, hi) of input in, row lo+i in slot
// gid[i] (or gid16[i]), slots slots. The cursor writes it before the batch that first refers
// to it is sent. Each of the users combines its rows into accumulators (reading their slots
// with slotsAt) and says so with rowsRead, then calls release once done with the group.
type groupAgg struct {
	in     int32
	lo, hi uint32
	gid    []int32
	gid16  []uint16
	// rekey: the group keeps no slot of its rows (gid); its consumers read their keys again
	// (keyReader) and map a key to its slot through seen and rank: rank[k>>6] plus the bits of
	// seen[k>>6] below k.
	rekey bool
	seen  []uint64
	rank  []int32
	slots int
	pos   int // the cursor's emission position of slot 0, at window row row0 (slot s: pos+s, row0+s)
	row0  int
	// users are those not done with the group (release), readers those that have not
	// combined its rows yet (rowsRead); rowsGone is set once the rows' slots are given back.
	users, readers atomic.Int32
	rowsGone       atomic.Bool
	pre            *preAgg
	// loads: per long task, its accumulators combined ahead (see preloads.start); nil: none.
	// early: combined as soon as it was streamed (preloads.startEarly); claimed: combined by
	// the first task that needed it (preloads.claim). loads and claimed are guarded by the
	// preloads' mu.
	loads   []*preload
	early   bool
	claimed bool
}

// setUsers makes every one of n users a user and a reader of g.
func (g *groupAgg) setUsers(n int32) {
	g.users.Store(n)
	g.readers.Store(n)
}

// rowsRead says that n users have combined g's rows: once every one has, the rows' slots go
// back (the slot array to the pool, or the map of keys to slots), long before the group's
// slots are all out. In a rollup of five overlapping inputs each input's group is paged out
// while the others' are, so each held its rows' slots for as long as the merge took to emit
// the hour: five inputs of 30 M rows held 8 MiB of them.
func (g *groupAgg) rowsRead(n int32) {
	if g.readers.Add(-n) == 0 && g.dropRows() {
		rowsReadGroups.Add(1)
	}
}

// For tests: rowsReadGroups counts the groups whose rows' slots went back once every user had
// combined them (rowsRead), not with the group.
var rowsReadGroups atomic.Int64

// release ends one user's use; the last gives back the rows' slots if no rowsRead has (a
// user that failed does not say it read them).
func (g *groupAgg) release() {
	if g.users.Add(-1) == 0 {
		g.dropRows()
	}
}

// dropRows gives back what holds the slots of g's rows, once: it reports whether it did.
func (g *groupAgg) dropRows() bool {
	if !g.rowsGone.CompareAndSwap(false, true) {
		return false
	}
	if g.rekey {
		g.seen, g.rank = nil, nil
		return true
	}
	if g.gid16 != nil {
		toPool(g.pre.pool16, g.gid16)
		g.gid16 = nil
		return true
	}
	toPool(g.pre.pool, g.gid)
	g.gid = nil
	return true
}

// slotOf returns the slot of packed key k in a group whose keys are the bits of seen: its
// rank among them (rank[k>>6] plus the bits of its word below it).
func slotOf(seen []uint64, rank []int32, k uint64) int32 {
	return rank[k>>6] + int32(bits.OnesCount64(seen[k>>6]&(1<<(k&63)-1)))
}

// slotsReadRows is how many rows' slots a group's load takes at a time.
const slotsReadRows = 1 << 14

// slotBuf is where slotsAt puts the slots of a group's rows, and the keyReader it reads a
// group keyed again through (of the group's input; nil until one is read).
type slotBuf struct {
	kg []int32
	kr *keyReader
}

// slotsAt returns the slots of the group's rows [r, r+n) (source rows), made in sb (valid
// until its next use).
func (g *groupAgg) slotsAt(r, n int, sb *slotBuf) ([]int32, error) {
	k := r - int(g.lo)
	if g.gid16 != nil {
		sb.kg = sized(sb.kg, n)
		for i, s := range g.gid16[k : k+n] {
			sb.kg[i] = int32(s)
		}
		return sb.kg, nil
	}
	if !g.rekey {
		return g.gid[k : k+n], nil
	}
	if sb.kr == nil || sb.kr.in != g.in {
		sb.kr.release()
		sb.kr = g.pre.openKeys(g.in)
	}
	keys, err := sb.kr.keysAt(r, n)
	if err != nil {
		return nil, err
	}
	sb.kg = sized(sb.kg, n)
	seen, rank := g.seen, g.rank
	for i, key := range keys {
		sb.kg[i] = slotOf(seen, rank, key)
	}
	return sb.kg, nil
}

// preAggregate pre-aggregates the group of window rows [start, end): it writes the emission
// positions q.. (one per distinct key, in key order, at window rows start..) and returns their
// number; 0, having done nothing, when the keys do not fit the bitmap.
//
// A group's distinct keys are the bits set in a bitmap indexed by the packed ids (seen, 128
// KiB at maxSlotBits, where a table of slots was 4 MiB: it stays in the cache), with a bit a
// word of seen in a summary (seenSum) so that only the words set are visited; a key's slot is
// its rank among them (rank[word] plus the bits below it in its word), which numbers the slots
// in key order: no sort, and no branch a row on whether its key is new.
func (c *cursor) preAggregate(start, end, q int) int {
	if c.packBits == nil || c.idBits > maxSlotBits || preAggOff {
		return 0
	}
	preAggGroups.Add(1)
	w := &c.w
	n := end - start
	if words := 1 + (1<<c.idBits-1)>>6; len(c.seen) != words {
		c.seen, c.rank = make([]uint64, words), make([]int32, words)
		c.seenSum = make([]uint64, 1+(words-1)>>6)
	}
	seen, sum, rank := c.seen, c.seenSum, c.rank
	keys := c.packKeys(start, end)
	for _, k := range keys {
		seen[k>>6] |= 1 << (k & 63)
		sum[k>>12] |= 1 << (k >> 6 & 63)
	}
	slots := 0
	for si, x := range sum {
		for ; x != 0; x &= x - 1 {
			wi := si<<6 | bits.TrailingZeros64(x)
			rank[wi] = int32(slots)
			slots += bits.OnesCount64(seen[wi])
		}
	}
	g := &groupAgg{in: int32(c.in), lo: w.src[start], hi: w.src[end-1] + 1, gid: c.pre.get(n), slots: slots, pos: q, row0: start, pre: c.pre}
	g.setUsers(c.pre.users)
	count := sized(c.count, slots) // per slot: its rows
	clear(count)
	gid := g.gid
	for i, k := range keys {
		s := slotOf(seen, rank, uint64(k))
		gid[i] = s
		count[s]++
	}
	c.count = count
	if len(c.slot) < w.n {
		c.slot, c.weight = sized(c.slot, w.n), sized(c.weight, w.n)
	}
	// The group's rows are read: its first rows become its slots in key order, their keys
	// read off the bitmap (clearing it on the way) and unpacked a dimension at a time
	// (earlier positions may point at rows up to start, so not below it). The emission then
	// reads the window in order, not at a representative row each.
	dk := sized(c.kbuf, slots)
	c.kbuf = dk
	p := 0
	for si, x := range sum {
		for ; x != 0; x &= x - 1 {
			wi := si<<6 | bits.TrailingZeros64(x)
			for y := seen[wi]; y != 0; y &= y - 1 {
				dk[p] = uint64(wi<<6 | bits.TrailingZeros64(y))
				p++
			}
			seen[wi] = 0
		}
		sum[si] = 0
	}
	if c.packed { // the window's packed keys stay those of its rows (see cursor.cmpHeads)
		copy(c.wkeys[start:start+slots], dk)
	}
	shift := 0
	for j := len(w.dims) - 1; j >= 0; j-- {
		b := c.packBits[j]
		mask := uint64(1)<<b - 1
		ids := w.dims[j].ids[start : start+slots]
		for p, k := range dk {
			ids[p] = uint32(k >> shift & mask)
		}
		shift += int(b)
	}
	t := w.time[start]
	for row := start; row < start+slots; row++ {
		w.time[row] = t
		c.glo[row], c.ghi[row] = g.lo, g.hi
	}
	perm := c.perm[q : q+slots]
	for p := range perm {
		perm[p] = int32(start + p)
	}
	slot, weight := c.slot[start:start+slots], c.weight[start:start+slots]
	for p := range slot {
		slot[p], weight[p] = int32(p), count[p]
	}
	if c.rollup {
		clear(c.same[q : q+slots])
	}
	c.aggs = append(c.aggs, g)
	return slots
}

// slotSpan returns the pre-aggregated group whose slot is at emission position p and the
// number of its slots at positions p.. before e (window rows rowAt(p)..), or nil and 0.
func (c *cursor) slotSpan(p, e int) (*groupAgg, int) {
	if len(c.aggs) == 0 {
		return nil, 0
	}
	g := c.aggAt(c.rowAt(p))
	if g == nil {
		return nil, 0
	}
	return g, min(e, g.pos+g.slots) - p
}

// appendSlots appends the n slots of g at cur's emission positions p.. as output rows, one ref
// each (the batch's rows of g are then named in b.aggs: seq is the batch's number, see
// cursor.aggSeq); it returns the source rows they stand for.
func (b *batch) appendSlots(cur *cursor, g *groupAgg, p, n int, seq int64) int64 {
	b.runsSet = false
	if cur.aggSeq != seq || cur.aggLast != g {
		b.aggs = append(b.aggs, g)
		cur.aggSeq, cur.aggLast = seq, g
	}
	row := g.row0 + p - g.pos
	b.keys.appendRange(&cur.w, row, row+n)
	in := int32(cur.in)
	var rows int64
	for s := p - g.pos; s < p-g.pos+n; s++ {
		b.refIn = append(b.refIn, in)
		b.refRow = append(b.refRow, uint32(s))
		b.refLo = append(b.refLo, g.lo)
		b.refHi = append(b.refHi, g.hi)
		b.refEnd = append(b.refEnd, int32(len(b.refIn)))
		rows += int64(cur.weight[g.row0+s])
	}
	return rows
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
// the values v and their sums' carries c (a quarter of the memory: the table is read at random;
// c is empty until a sum overflows, as sums mostly do not).
type slotAccs struct {
	g     *groupAgg
	plain bool
	accs  []agg.LongAcc
	v, c  []int64
	mem   accMem // what accs, v and c are of
	// dropped: the tables' slots below it are released (see passed), and nextDrop is the
	// slot from which passed releases the next.
	dropped, nextDrop int
	// bound, for a plain sum, is at least every |v[s]| while below sumBound (see addPlain).
	bound uint64
	tmp   agg.LongAcc
	buf   slotBuf
}

// at returns slot s's accumulator (for plain, valid until the next call).
func (sa *slotAccs) at(s uint32) *agg.LongAcc {
	if !sa.plain {
		return &sa.accs[s]
	}
	sa.tmp = agg.LongAcc{V: sa.v[s], C: sa.carry(s), Set: true}
	return &sa.tmp
}

// carry returns plain slot s's carry.
func (sa *slotAccs) carry(s uint32) int64 {
	if len(sa.c) == 0 {
		return 0
	}
	return sa.c[s]
}

// loadSlots combines the values of g's rows into one accumulator per slot, reading the
// group's values (and times, for first/last) in row order through src.
func (t *longTask) loadSlots(sa *slotAccs, g *groupAgg, src slotSrc) error {
	if err := t.startSlots(sa, g); err != nil {
		return err
	}
	released := int(g.lo)
	for r := int(g.lo); r < int(g.hi); {
		if err := g.pre.releaseEvery(g.in, r, &released); err != nil {
			return err
		}
		gid, err := g.slotsAt(r, min(slotsReadRows, int(g.hi)-r), &sa.buf)
		if err != nil {
			return t.failIn(g.in, err)
		}
		if err := t.addSlots(sa, r, gid, src); err != nil {
			return err
		}
		r += len(gid)
	}
	// A task combines few groups itself (most are combined ahead): its reader of the keys
	// goes, rather than hold its buffers for the next.
	sa.buf.kr.release()
	sa.buf.kr = nil
	g.rowsRead(1)
	return nil
}

// startSlots makes sa g's slot accumulators, each empty. It and addSlots read nothing of t
// that changes once the merge runs: a preload calls them on a goroutine of its own.
func (t *longTask) startSlots(sa *slotAccs, g *groupAgg) error {
	if sa.g != nil {
		sa.g.release()
		sa.g = nil
	}
	kind := t.agg.Kind
	sa.mem.tables = &g.pre.tables
	if sa.plain = t.plainIn(g.in); sa.plain {
		v, err := accsFor(&sa.mem, &sa.mem.v, g.slots)
		if err != nil {
			return err
		}
		if id := kind.LongIdentity(); id == 0 {
			clear(v) // a sum's: memclr, not a store a slot
		} else {
			for i := range v {
				v[i] = id
			}
		}
		sa.v, sa.c, sa.bound = v, nil, 0
	} else {
		accs, err := accsFor(&sa.mem, &sa.mem.accs, g.slots)
		if err != nil {
			return err
		}
		id := agg.NewLongAcc(kind)
		for i := range accs {
			accs[i] = id
		}
		sa.accs = accs
	}
	sa.g, sa.dropped, sa.nextDrop = g, 0, dropStep
	return nil
}

// plainIn is t.plain[in], which the task sets as it writes its first batch.
func (t *longTask) plainIn(in int32) bool {
	return t.times == nil && t.vals.r[in] != nil && !t.nulls.absent[in] && t.nulls.bms[in] == nil && t.asIs[in]
}

// addSlots combines the values of the rows r.. of sa's group, as many as gid holds their slots
// of, into sa's accumulators, reading them through src.
func (t *longTask) addSlots(sa *slotAccs, r int, gid []int32, src slotSrc) error {
	in := sa.g.in
	c := src.vals
	if c == nil || t.nulls.absent[in] { // every row null: no slot is set
		return nil
	}
	for k := 0; k < len(gid); {
		vs, err := c.Range(r+k, len(gid)-k)
		if err != nil {
			return t.failIn(in, err)
		}
		if sa.plain {
			m, ok := c.Bound()
			err = t.addPlain(sa, vs, gid[k:k+len(vs)], m, ok)
		} else {
			err = t.addAccs(sa, r+k, vs, gid[k:k+len(vs)], src.times)
		}
		if err != nil {
			return err
		}
		k += len(vs)
	}
	return nil
}

// addAccs combines vs, the values of rows r.., into the accumulators of slots gid (the times
// of first/last read through tc).
func (t *longTask) addAccs(sa *slotAccs, r int, vs []int64, gid []int32, tc *source.ChunkCache[int64]) error {
	kind, accs, in := t.agg.Kind, sa.accs, sa.g.in
	bm := t.nulls.bms[in]
	switch {
	case tc != nil: // none: 0, as readRef reads them
		for k := 0; k < len(vs); {
			ts, err := tc.Range(r+k, len(vs)-k)
			if err != nil {
				return t.failIn(in, err)
			}
			for j, tm := range ts {
				null := bm != nil && bm.Contains(uint32(r+k+j))
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
	return nil
}

// sumBound bounds slotAccs.bound: at or past it a sum might leave the int64 range, and its
// adds are checked for a carry.
const sumBound = 1 << 62

// addBound returns bound plus n values of magnitude at most 2^bits.Len64(mag) (mag: a bound
// on their magnitudes, or the OR of |x| for x >= 0, |x| - 1 for x < 0), and whether it stays
// below sumBound.
func addBound(bound uint64, n int, mag uint64) (uint64, bool) {
	l := bits.Len64(mag)
	if l+bits.Len(uint(n)) >= 62 {
		return 0, false
	}
	bound += uint64(n) << l
	return bound, bound < sumBound
}

// addPlain combines vs into the plain accumulators of slots gid: the rows all have a value,
// and the metric stores no times. When bounded, mag bounds the values' magnitudes (their
// chunk's, see source.ChunkCache.Bound).
func (t *longTask) addPlain(sa *slotAccs, vs []int64, gid []int32, mag uint64, bounded bool) error {
	v := sa.v
	switch t.agg.Kind {
	case agg.Min:
		for j, x := range vs {
			s := gid[j]
			v[s] = min(v[s], x)
		}
	case agg.Max:
		for j, x := range vs {
			s := gid[j]
			v[s] = max(v[s], x)
		}
	case agg.Sum, agg.First, agg.Last, agg.Union: // the sum, as CombineLong takes them
		gid = gid[:len(vs)]
		if sa.bound < sumBound {
			// Unchecked adds while no sum can leave the int64 range: 9% of a 300 M-row
			// rollup's time went to checking every add for a carry.
			if !bounded {
				mag = 0
				for _, x := range vs {
					mag |= uint64(x ^ x>>63) // |x| - 1 for x < 0
				}
			}
			if b, ok := addBound(sa.bound, len(vs), mag); ok {
				for j, x := range vs {
					v[gid[j]] += x
				}
				sa.bound = b
				return nil
			}
			sa.bound = sumBound
		}
		for j, x := range vs {
			s := gid[j]
			var k int64
			if v[s], k = agg.AddLong(v[s], x); k != 0 {
				if len(sa.c) == 0 { // the group's first carry
					c, err := accsFor(&sa.mem, &sa.mem.c, sa.g.slots)
					if err != nil {
						return err
					}
					clear(c)
					sa.c = c
				}
				sa.c[s] += k
			}
		}
	}
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
			if g.rekey && t.pre != nil {
				// The task's tables of its last group go to the claim (or back).
				if sa.g != nil {
					sa.g.release()
				}
				if !t.pre.ps.claim(g, t.pre.ti, sa.mem) {
					t.pre.giveBack(sa.mem)
				}
				*sa = slotAccs{buf: sa.buf}
			}
			if l, err := t.pre.take(g); l != nil || err != nil {
				if err != nil {
					return nil, err
				}
				if sa.g != nil {
					sa.g.release()
				}
				t.pre.giveBack(sa.mem)
				buf := sa.buf // the task's reader of the source's keys stays the task's
				*sa = l.sa
				sa.buf = buf
				return sa, nil
			}
			if sa.g == nil && sa.mem.bytes() == 0 {
				sa.mem, t.spareAccs = t.spareAccs, accMem{}
			}
			src := slotSrc{vals: t.vals.r[in]}
			if t.times != nil {
				src.times = t.times.r[in]
			}
			if err := t.loadSlots(sa, g, src); err != nil {
				return nil, err
			}
			return sa, nil
		}
	}
	return nil, nil
}

// holds reports whether sa holds the slots of ref k's group.
func (sa *slotAccs) holds(b *batch, k int32) bool {
	g := sa.g
	return g != nil && g.in == b.refIn[k] && g.lo == b.refLo[k] && g.hi == b.refHi[k]
}

// retireSlots releases the groups of the sources b retires and passes the largest of their
// accumulators' memory to the next source's (as valReader.retire does): inputs that follow one
// another in time then hold one group's slots, not one each.
func (t *longTask) retireSlots(b *batch) {
	for _, in := range b.retired {
		if t.slots == nil {
			return
		}
		sa := &t.slots[in]
		if sa.g != nil {
			sa.g.release()
		}
		m := sa.mem
		if sp := &t.spareAccs; m.bytes() > sp.bytes() {
			m, *sp = *sp, m
		}
		t.freeErr = errors.Join(t.freeErr, m.free())
		sa.buf.kr.release()
		*sa = slotAccs{}
	}
}
