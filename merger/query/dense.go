package query

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/writeout/writeout/columns"
)

// defaultDenseSlots bounds the dense group indexes of a query: a segment whose group-by dimensions
// are all single-value and dictionary-encoded (or absent: null) finds its groups in an array
// indexed by the combination of their ids when the product of the dimensions' cardinalities
// (its slots) is at most defaultDenseSlots divided by the number of inputs; 4 bytes a slot, so at
// most 16 MiB in all. Past that it uses a map.
const defaultDenseSlots = 1 << 22

// denseIndex finds a segment's groups by the combination of their dictionary ids, in
// mixed radix: slot = ((id0 * card1) + id1) * card2 + id2 ..., so slots sort as the ids do,
// which sort as the values do (sorted dictionaries, null first). The segment's rows come in
// time order (checked), so a bucket's groups are looked up only until the next bucket starts:
// the slots hold the current bucket's groups only, and are cleared group by group when the
// bucket changes or the window ends. With sorted, a bucket's groups are also put in slot
// order when it ends (runner.order): a bit a slot marks the bucket's groups, and reading the
// bits in order is the sort, or, when the bucket has few groups for its span of slots, a sort
// of their slots.
type denseIndex struct {
	cards  []uint32 // a group-by dimension's cardinality (1 for an absent one)
	group  []int32  // slot -> group+1 in the current bucket; 0: none yet
	bits   []uint64 // with sorted: the current bucket's slots
	lo, hi int      // with sorted: the words of bits that may be set
	keys   []uint64 // finish's scratch
	bucket int64    // the current bucket
	first  int      // the current bucket's first group
	open   bool     // a bucket is current
	sorted bool
}

// newDenseIndex returns the dense index of a runner over a segment, or nil when one does not
// apply or would have more than maxSlots slots; sorted as denseIndex says.
func newDenseIndex(r *runner, maxSlots int, sorted bool) *denseIndex {
	if !r.ordered || !r.vec || len(r.gdims) == 0 {
		return nil
	}
	d := &denseIndex{cards: make([]uint32, len(r.gdims)), sorted: sorted}
	slots := 1
	for k, g := range r.gdims {
		card := 1 // absent: every row null (id 0)
		if g.ids != nil {
			card = g.ds.Cardinality()
		}
		if card <= 0 || card > maxSlots || slots > maxSlots/card {
			return nil
		}
		d.cards[k] = uint32(card)
		slots *= card
	}
	d.group = make([]int32, slots)
	if sorted {
		d.bits = make([]uint64, (slots+63)/64)
		d.lo, d.hi = len(d.bits), -1
	}
	return d
}

// finish ends the current bucket: with sorted, its groups go to r.order in slot order.
func (d *denseIndex) finish(r *runner) {
	if !d.open {
		return
	}
	d.open = false
	groups := r.slots[d.first:]
	if !d.sorted {
		for _, s := range groups {
			d.group[s] = 0
		}
		d.first = len(r.times)
		return
	}
	if span := d.hi - d.lo + 1; span <= 8*len(groups) {
		for w := d.lo; w <= d.hi; w++ {
			for word := d.bits[w]; word != 0; word &= word - 1 {
				s := w<<6 | bits.TrailingZeros64(word)
				r.order = append(r.order, d.group[s]-1)
				d.group[s] = 0
			}
			d.bits[w] = 0
		}
	} else {
		keys := d.keys[:0]
		for i, s := range groups {
			keys = append(keys, s<<32|uint64(d.first+i)) // slots are below 2^32 (defaultDenseSlots)
			d.group[s] = 0
			d.bits[s>>6] = 0
		}
		slices.Sort(keys)
		for _, k := range keys {
			r.order = append(r.order, int32(uint32(k)))
		}
		d.keys = keys
	}
	d.lo, d.hi = len(d.bits), -1
	d.first = len(r.times)
}

// reset ends the window: the runner's groups (their slots) are about to be dropped.
func (d *denseIndex) reset(slots []uint64) {
	if d.open {
		for _, s := range slots[d.first:] {
			d.group[s] = 0
			if d.sorted {
				d.bits[s>>6] = 0
			}
		}
	}
	d.lo, d.hi = len(d.bits), -1
	d.first, d.open = 0, false
}

// groups finds (or makes) the groups of the batch's rows, as batchAgg.mapGroups does.
func (d *denseIndex) groups(r *runner, b *batchAgg) error {
	a := r.acc
	bk := &b.buckets
	made := len(r.times) // the groups made before the batch's
	for i := range b.gid {
		t := b.t[i]
		bucket := bk.of(t)
		if !d.open || bucket != d.bucket {
			d.finish(r)
			d.bucket, d.open = bucket, true
		}
		slot := uint64(0)
		for k, card := range d.cards {
			id := b.ids[k][i]
			if id >= card {
				return fmt.Errorf("dimension %q: id %d past the cardinality %d: %w", r.spec.GroupBy[k], id, card, columns.ErrCorrupt)
			}
			slot = slot*uint64(card) + uint64(id)
		}
		g := d.group[slot] - 1
		if g < 0 {
			g = int32(len(r.times))
			d.group[slot] = g + 1
			if d.sorted {
				w := int(slot >> 6)
				d.bits[w] |= 1 << (slot & 63)
				d.lo, d.hi = min(d.lo, w), max(d.hi, w)
			}
			r.times = append(r.times, bucket)
			r.slots = append(r.slots, slot)
			for k := range d.cards {
				r.keys = append(r.keys, b.ids[k][i])
			}
		}
		b.gid[i] = g
	}
	// The new groups' accumulators at once, then every row counted.
	a.growN(len(r.times) - made)
	for i, g := range b.gid {
		a.rows[g]++
		a.minTime[g] = min(a.minTime[g], b.t[i])
	}
	return nil
}
