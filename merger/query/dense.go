package query

import (
	"fmt"

	"github.com/writeout/writeout/columns"
)

// DenseSlots bounds the dense group indexes of a query: a segment whose group-by dimensions
// are all single-value and dictionary-encoded (or absent: null) finds its groups in an array
// indexed by the combination of their ids when the product of the dimensions' cardinalities
// (its slots) is at most DenseSlots divided by the number of inputs; 4 bytes a slot, so at
// most 16 MiB in all. Past that it uses a map.
const DenseSlots = 1 << 22

// denseIndex finds a segment's groups by the combination of their dictionary ids, in
// mixed radix: slot = ((id0 * card1) + id1) * card2 + id2 ..., so slots sort as the ids do,
// which sort as the values do (sorted dictionaries, null first). The segment's rows come in
// time order (checked), so a bucket's groups are looked up only until the next bucket starts:
// the slots hold the current bucket's groups only, and are cleared group by group when the
// bucket changes or the window ends.
type denseIndex struct {
	cards  []uint32 // a group-by dimension's cardinality (1 for an absent one)
	group  []int32  // slot -> group+1 in the current bucket; 0: none yet
	bucket int64    // the current bucket
	first  int      // the current bucket's first group
	open   bool     // a bucket is current
}

// newDenseIndex returns the dense index of a runner over a segment, or nil when one does not
// apply or would have more than maxSlots slots.
func newDenseIndex(r *runner, maxSlots int) *denseIndex {
	if !r.ordered || !r.vec || len(r.gdims) == 0 {
		return nil
	}
	d := &denseIndex{cards: make([]uint32, len(r.gdims))}
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
	return d
}

// reset ends the current bucket: slots are the runner's groups' slots.
func (d *denseIndex) reset(slots []uint64) {
	for _, s := range slots[d.first:] {
		d.group[s] = 0
	}
	d.first, d.open = 0, false
}

// groups finds (or makes) the groups of the batch's rows, as batchAgg.mapGroups does.
func (d *denseIndex) groups(r *runner, b *batchAgg) error {
	gran, all := r.spec.Granularity, r.spec.All
	a := r.acc
	for i := range b.gid {
		t := b.t[i]
		bucket := int64(0)
		if !all {
			bucket = gran.Truncate(t)
		}
		if !d.open || bucket != d.bucket {
			for _, s := range r.slots[d.first:] {
				d.group[s] = 0
			}
			d.first, d.bucket, d.open = len(r.times), bucket, true
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
			r.times = append(r.times, bucket)
			r.slots = append(r.slots, slot)
			for k := range d.cards {
				r.keys = append(r.keys, b.ids[k][i])
			}
			a.grow()
		}
		b.gid[i] = g
		a.rows[g]++
		a.minTime[g] = min(a.minTime[g], t)
	}
	return nil
}
