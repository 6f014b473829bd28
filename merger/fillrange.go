package merger

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/slicesx"
)

// The loading of a window of a source read in row order (cursor.fillRange): a column at a
// time, a chunk at a time.

// fillRange loads the next batch of whole groups of a source read in row order, column by
// column: times first (which say where the batch ends), then each dimension chunk by chunk.
// With pre-aggregation a window holds at most maxWindowRows rows: a group larger than that
// is streamed through the window (see streamGroup) and leaves its slots, one row per distinct
// key, in key order; streamed then reports that the window's emission order is set.
func (c *cursor) fillRange(ctx context.Context) (streamed bool, err error) {
	w := &c.w
	p0 := c.next
	limit := math.MaxInt
	if c.canStream() {
		limit = max(maxWindowRows, 1)
	}
	p, cut, err := c.fillTimes(ctx, limit, cursorBatch)
	if err != nil {
		return false, err
	}
	if cut {
		// The last group goes on past the limit. Groups before it load as usual (the next
		// fill starts at the group); a group that starts the window streams.
		gs := len(w.time) - 1
		for gs > 0 && w.time[gs-1] == w.time[gs] {
			gs--
		}
		if gs == 0 {
			return true, c.streamGroup(ctx, p0, p)
		}
		p, w.time = p0+gs, w.time[:gs]
	}
	if err := c.loadDims(p0, p); err != nil {
		return false, err
	}
	windowRowsPeak.note(int64(w.n))
	c.next = p
	return false, nil
}

// loadDims loads the dimensions of source rows [p0, p), whose times the window holds, and
// the rows' packed keys when the cursor pre-aggregates.
func (c *cursor) loadDims(p0, p int) error {
	w := &c.w
	n := p - p0
	w.n = n
	w.src = grown(w.src, n)[:n] // the window was empty
	for i := range w.src {
		w.src[i] = uint32(p0 + i)
	}
	// Packed keys for pre-aggregation (every dimension is single-value then), folded in a
	// chunk at a time while its ids are at hand.
	c.packed = c.pre != nil && c.packBits != nil && c.idBits <= maxSlotBits && !preAggOff
	if c.packed {
		c.wkeys = sized(c.wkeys, n) // the first dimension sets them
	}
	for j := range w.dims {
		var err error
		switch w.dims[j].kind {
		case kindSingle, kindMulti:
			err = c.fillIDs(j, p0, p)
		case kindRaw:
			err = c.fillRaw(j, p0, p)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fillTimes appends the truncated times of the rows from c.next on to the window, up to the
// end of the group that passes minRows rows, and returns the position after the last. It
// stops at limit rows when the group goes on past them: cut then says so (the window's last
// group is incomplete).
func (c *cursor) fillTimes(ctx context.Context, limit, minRows int) (p int, cut bool, err error) {
	w := &c.w
	p0 := c.next
	p = p0
	// The bucket of the last time truncated, [bucket, bucketEnd) (empty at first): a valid
	// time's bucket ends by MaxTime + a day, which fits an int64.
	width := c.gran.Millis()
	bucket, bucketEnd := int64(0), int64(0)
	// The loop keeps the cursor's fields and the window's times in locals, stored back after
	// it (an error ends the merge; unsorted reads lastT): as fields, each row loaded and
	// stored them.
	pLimit := p0 + min(limit, c.n-p0)
	lastT, fresh, tlo, thi := c.lastT, c.fresh, c.tlo, c.thi
	if !fresh && width > 1 {
		bucket, bucketEnd = lastT, lastT+width // lastT is truncated: the last row's bucket
	}
	times := w.time
	for p < c.n {
		first, vals, err := c.times.C.Chunk(p)
		if err != nil {
			return 0, false, fmt.Errorf("merger: %s: __time: %w", c.name, err)
		}
		if k := p - first; k < 0 || k >= len(vals) {
			return 0, false, fmt.Errorf("merger: %s: __time: chunk at %d does not hold row %d: %w", c.name, first, p, columns.ErrCorrupt)
		}
		full := false
		// A window holds at most pLimit-p0 rows (unless minRows is more).
		times = grownTo(times, len(vals)-(p-first), max(pLimit-p0, minRows))
		rest := vals[p-first:]
		if width == 1 {
			// Times not truncated (no granularity): the rows before the window's minRows-th
			// can end it only by an error, so a run of them in order and within [tlo, thi]
			// goes over at once; the loop below takes the rest (and says what is wrong).
			k := min(len(rest), minRows-(p-p0), pLimit-p)
			if k > 0 && timesInOrder(rest[:k], lastT, fresh, tlo, thi) {
				times = append(times, rest[:k]...)
				lastT, fresh = rest[k-1], false
				bucket, bucketEnd = lastT, lastT+1
				if (p-p0)>>16 != (p+k-p0)>>16 {
					if err := ctx.Err(); err != nil {
						return 0, false, fmt.Errorf("merger: %w", err)
					}
				}
				p += k
				rest = rest[k:]
			}
		}
		if width > 1 && bucketEnd > bucket {
			// Rows of a truncated time mostly follow one another in the last row's bucket:
			// when every one of a run of them is in it (and within [tlo, thi]), the run goes
			// over at once, as the loop below would take it row by row.
			k := min(len(rest), pLimit-p)
			if k > 0 && allWithin(rest[:k], max(bucket, tlo), min(bucketEnd-1, thi)) {
				times = appendRepeat(times, bucket, k)
				if (p-p0)>>16 != (p+k-p0)>>16 {
					if err := ctx.Err(); err != nil {
						return 0, false, fmt.Errorf("merger: %w", err)
					}
				}
				p += k
				rest = rest[k:]
			}
		}
		for _, t := range rest {
			if t < tlo || t > thi {
				return 0, false, c.badTime(p, t)
			}
			if t >= bucket && t < bucketEnd {
				// Sorted times are mostly in the last row's bucket: its start is lastT, the
				// batch goes on and the order holds.
				if p >= pLimit {
					cut = true // the group goes on past the limit
					break
				}
				t = bucket
			} else {
				if width > 1 {
					t = c.gran.Truncate(t)
				}
				if p-p0 >= minRows && t != lastT && !fresh {
					full = true // stop at a group boundary only
					break
				}
				if !fresh && t < lastT {
					c.lastT = lastT
					return 0, false, c.unsorted(p, t)
				}
				fresh = false
				lastT = t
				bucket, bucketEnd = t, t+width
			}
			times = append(times, t)
			p++
			if (p-p0)&0xffff == 0 {
				if err := ctx.Err(); err != nil {
					return 0, false, fmt.Errorf("merger: %w", err)
				}
			}
		}
		if full || cut {
			break
		}
	}
	c.lastT, c.fresh, w.time = lastT, fresh, times
	return p, cut, nil
}

// allWithin reports whether every t of ts is within [lo, hi]: its least and its greatest,
// without a branch a row.
func allWithin(ts []int64, lo, hi int64) bool {
	a, b := ts[0], ts[0]
	for _, t := range ts[1:] {
		a, b = min(a, t), max(b, t)
	}
	return a >= lo && b <= hi
}

// appendRepeat appends n copies of t to ts.
func appendRepeat(ts []int64, t int64, n int) []int64 {
	ts = slices.Grow(ts, n)
	k := len(ts)
	ts = ts[:k+n]
	for i := range ts[k:] {
		ts[k+i] = t
	}
	return ts
}

// timesInOrder reports whether the times ts are in order, the first not before last (unless
// fresh), and all within [tlo, thi].
func timesInOrder(ts []int64, last int64, fresh bool, tlo, thi int64) bool {
	if ts[0] < tlo || ts[len(ts)-1] > thi || !fresh && ts[0] < last {
		return false
	}
	for i := 1; i < len(ts); i++ {
		if ts[i] < ts[i-1] { // in order, the ends within the bounds hold the rest
			return false
		}
	}
	return true
}

// fillIDs appends the merged ids of dictionary dimension j of source rows [p0, p) to the
// window, chunk by chunk, folding them into the packed keys when the window is packed.
func (c *cursor) fillIDs(j, p0, p int) error {
	d := &c.w.dims[j]
	n := p - p0
	if d.kind == kindSingle {
		d.ids = grown(d.ids, n)
	}
	ic := c.ids[j]
	if ic == nil { // the source lacks the dimension: null
		for range n {
			d.ids = append(d.ids, 0)
			if d.kind == kindMulti {
				d.offs = append(d.offs, uint32(len(d.ids)))
			}
		}
		if c.packed {
			foldKeys(c.wkeys, d.ids, c.packBits[j], j == 0)
		}
		return nil
	}
	m := c.maps[j]
	for r := p0; r < p; {
		first, ids, offs, err := ic.C.Chunk(r)
		if err != nil {
			return fmt.Errorf("merger: %s: dimension %q: %w", c.name, c.dimName(j), err)
		}
		rows := len(ids)
		if offs != nil {
			rows = len(offs) - 1
		}
		if k := r - first; k < 0 || k >= rows {
			return fmt.Errorf("merger: %s: dimension %q: chunk at %d does not hold row %d: %w", c.name, c.dimName(j), first, r, columns.ErrCorrupt)
		}
		end := min(p, first+rows)
		if offs == nil {
			err = c.mapIDs(j, d, m, ids[r-first:end-first])
		} else {
			err = c.mapLists(j, d, m, r, ids, offs[r-first:end-first+1])
		}
		if err != nil {
			return err
		}
		if c.packed {
			foldKeys(c.wkeys[r-p0:end-p0], d.ids[r-p0:end-p0], c.packBits[j], j == 0)
		}
		r = end
	}
	return nil
}

// mapIDs appends the merged ids of src, one id a row, through m to d (dimension j).
func (c *cursor) mapIDs(j int, d *dimKeys, m []uint32, src []uint32) error {
	if d.kind == kindMulti {
		for _, id := range src {
			if int(id) >= len(m) {
				return c.badID(j, id, len(m))
			}
			d.ids = append(d.ids, m[id])
			d.offs = append(d.offs, uint32(len(d.ids)))
		}
		return nil
	}
	// The check of each id is the map's bounds check (one compare, and no other pass over
	// the ids).
	dst := slicesx.Extend(&d.ids, len(src))[:len(src)]
	for i, id := range src {
		if int(id) >= len(m) {
			return c.badID(j, id, len(m)) // the first, as the reading order meets it
		}
		dst[i] = m[id]
	}
	return nil
}

// mapLists appends the merged ids of source rows r.. through m to d (dimension j): row r+k's
// ids are ids[offs[k]:offs[k+1]].
func (c *cursor) mapLists(j int, d *dimKeys, m []uint32, r int, ids, offs []uint32) error {
	for k := range len(offs) - 1 {
		row := ids[offs[k]:offs[k+1]]
		if d.kind == kindSingle && len(row) != 1 {
			return fmt.Errorf("merger: internal error: %s: row %d holds %d ids in a single-value dimension", c.name, r+k, len(row))
		}
		for _, id := range row {
			if int(id) >= len(m) {
				return c.badID(j, id, len(m))
			}
			d.ids = append(d.ids, m[id])
		}
		if d.kind == kindMulti {
			d.offs = append(d.offs, uint32(len(d.ids)))
		}
	}
	return nil
}

// fillRaw appends the bytes of raw dimension j of source rows [p0, p) to the window.
func (c *cursor) fillRaw(j, p0, p int) error {
	d := &c.w.dims[j]
	rr := c.raws[j]
	for r := p0; r < p; r++ {
		null := true
		if rr != nil {
			b, ok, err := rr.Bytes(r)
			if err != nil {
				return fmt.Errorf("merger: %s: dimension %q: %w", c.name, c.dimName(j), err)
			}
			null = !ok
			d.data = appendBytes(d.data, b)
		}
		d.null = append(d.null, null)
		d.offs = append(d.offs, uint32(len(d.data)))
	}
	return nil
}
