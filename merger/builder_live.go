package merger

import (
	"github.com/RoaringBitmap/roaring/v2"
)

// The Builder's live bitmaps (BuilderOptions.LiveBitmaps): each dimension value's rows, kept as
// rows arrive.

// liveWindow gathers the rows of a frequent id that share their high 16 bits (the rows of one
// roaring container) as a bitset: a bit set per row instead of roaring's per-value insert.
type liveWindow struct {
	key    uint32 // row >> 16 of the rows held
	lo, hi int    // the words in use are [lo, hi]; lo > hi when empty
	words  [1024]uint64
}

// flush adds the window's rows to bm and empties it.
func (w *liveWindow) flush(bm *roaring.Bitmap) {
	if w.lo > w.hi {
		return
	}
	c := roaring.New()
	c.FromDense(w.words[:], false) // shares words: AddOffset64 copies them
	bm.Or(roaring.AddOffset64(c, int64(w.key)<<16))
	clear(w.words[w.lo : w.hi+1])
	w.lo, w.hi = len(w.words), -1
}

// addLive records that row holds local id.
func (d *bdim) addLive(id, row uint32) {
	if id < bigIDs && d.wins[id] != nil {
		w := d.wins[id]
		if row>>16 != w.key {
			w.flush(d.live[id])
			w.key = row >> 16
		}
		k := int(row&0xffff) >> 6
		w.words[k] |= 1 << (row & 63)
		w.lo, w.hi = min(w.lo, k), max(w.hi, k)
		return
	}
	k := d.npend[id]
	slot := d.slot(id)
	slot[k] = row
	k++
	if int(k) == len(slot) {
		bm := d.live[id]
		if bm == nil {
			bm = roaring.New()
			d.live[id] = bm
		}
		if id < bigIDs && slot[0]>>16 == slot[k-1]>>16 {
			// bigBatch rows within one container's rows: frequent enough for a window.
			w := &liveWindow{key: slot[0] >> 16, lo: len(liveWindow{}.words), hi: -1}
			for _, r := range slot {
				k := int(r&0xffff) >> 6
				w.words[k] |= 1 << (r & 63)
				w.lo, w.hi = min(w.lo, k), max(w.hi, k)
			}
			d.wins[id] = w
		} else {
			bm.AddMany(slot)
		}
		k = 0
	}
	d.npend[id] = k
}

// slot returns id's pending rows' slot.
func (d *bdim) slot(id uint32) []uint32 {
	if id < bigIDs {
		o := int(id) * bigBatch
		return d.big[o : o+bigBatch : o+bigBatch]
	}
	id -= bigIDs
	o := int(id%pendIDs) * pendBatch
	return d.pend[id/pendIDs][o : o+pendBatch : o+pendBatch]
}

// newLive adds an empty live bitmap for the next id (created when it first gets rows).
func (d *bdim) newLive() {
	switch n := len(d.live); {
	case n == 0:
		d.big = make([]uint32, bigIDs*bigBatch)
		d.wins = make([]*liveWindow, bigIDs)
	case n >= bigIDs && (n-bigIDs)%pendIDs == 0:
		d.pend = append(d.pend, make([]uint32, pendIDs*pendBatch))
	}
	d.live = append(d.live, nil)
	d.npend = append(d.npend, 0)
}

// liveBitmap returns the live bitmap of local id, up to date. Readers hold the builder's read
// lock: once flushed, a bitmap does not change until the next Add.
func (d *bdim) liveBitmap(id uint32) *roaring.Bitmap {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	bm := d.live[id]
	if bm == nil {
		bm = roaring.New()
		d.live[id] = bm
	}
	if k := d.npend[id]; k > 0 {
		bm.AddMany(d.slot(id)[:k])
		d.npend[id] = 0
	}
	if id < bigIDs && d.wins[id] != nil {
		d.wins[id].flush(bm)
	}
	return bm
}
