package columns

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/internal/segfmt"
)

// Verify checks the whole segment: the CRC-32C of every part, then every structural invariant
// by decoding everything: chunk bounds and encodings, times in order and within the interval,
// dictionaries strictly sorted and exactly filling their blocks, ids below the cardinality, the
// null id alone in its row and exactly on the null rows, every bitmap exactly the rows holding
// its id, raw null rows empty, and every sketch decodable. It also checks what the footer
// claims of the rows: every time truncated to the granularity; the interval equal to
// Granularity.Interval of the first and last times (the zero Interval without rows); and under
// rollup, rows strictly increasing by (time, dimensions) in the order the merger writes them
// (dimensions in schema order: ids, which follow value order with null first; multi-value id
// lists element by element, a proper prefix first; raw values bytewise, null first), so that no
// two rows share a key. The first problem is returned, wrapping ErrCorrupt and naming the
// column and part, or the rows.
func (s *Segment) Verify() error {
	if err := s.verifyChecksums(); err != nil {
		return err
	}
	if err := s.verifyTime(); err != nil {
		return err
	}
	for i, d := range s.f.schema.Dimensions {
		var err error
		if d.Raw {
			err = s.verifyRaw(s.raws[i])
		} else {
			err = s.verifyDim(s.dims[i])
		}
		if err != nil {
			return err
		}
	}
	if err := s.verifyRollup(); err != nil {
		return err
	}
	for i := range s.f.schema.Metrics {
		var err error
		switch {
		case s.longs[i] != nil:
			c := s.longs[i].Cursor()
			err = s.eachChunk(c.cr.ix, func(row int) error { _, _, err := c.Chunk(row); return err })
		case s.doubles[i] != nil:
			c := s.doubles[i].Cursor()
			err = s.eachChunk(c.cr.ix, func(row int) error { _, _, err := c.Chunk(row); return err })
			if tc := s.doubles[i].Tails(); tc != nil && err == nil {
				cur := tc.Cursor()
				var buf []float64
				for row := 0; row < s.f.rows && err == nil; row++ {
					buf, err = cur.Tail(row, buf[:0])
				}
			}
		default:
			c := s.sketches[i].Cursor()
			for row := 0; row < s.f.rows && err == nil; row++ {
				_, err = c.sketch(row)
			}
		}
		if err != nil {
			return err
		}
		if err := s.verifyMetricTimes(i); err != nil {
			return err
		}
		if err := s.verifyMetricNulls(i); err != nil {
			return err
		}
	}
	s.markStructPassed()
	return nil
}

// verifyMetricNulls checks a long or double metric's nulls part: a valid bitmap of rows below
// the row count (readNulls), not empty (a metric without null rows has no nulls part), and
// every null row stored as the writer stores it: value 0 (+0 for doubles), time 0 for a
// first/last metric, an empty tail for doubleSum.
func (s *Segment) verifyMetricNulls(i int) error {
	switch {
	case s.longs[i] != nil:
		return verifyNulls(s.longs[i])
	case s.doubles[i] != nil:
		return verifyNulls(s.doubles[i])
	}
	return nil
}

// verifyNulls is verifyMetricNulls for one metric's column.
func verifyNulls[T Number](c *Column[T]) error {
	if !c.hasNulls() {
		return nil
	}
	nulls, err := c.Nulls()
	if err != nil {
		return err
	}
	return nullsStoreZero(c, nulls)
}

// nullsStoreZero checks a metric's null rows: nulls not empty, and every null row stored as
// the writer stores it (see verifyMetricNulls).
func nullsStoreZero[T Number](c *Column[T], nulls *roaring.Bitmap) error {
	name := c.name
	if nulls.IsEmpty() {
		return partError(name, segfmt.PartNulls, corruptf("empty (a metric without null rows has no nulls part)"))
	}
	cur := c.Cursor()
	var tcur *Cursor[int64]
	if c.times != nil {
		tcur = c.times.Cursor()
	}
	var tl *TailCursor
	if c.tails != nil {
		tl = c.tails.Cursor()
	}
	var buf []float64
	for it := nulls.Iterator(); it.HasNext(); {
		row := int(it.Next())
		v, err := cur.At(row)
		if err != nil {
			return err
		}
		// 0, and for a double +0: the bits of float64(v) are all zero for both.
		if math.Float64bits(float64(v)) != 0 {
			return partError(name, segfmt.PartNulls, corruptf("null row %d stores a value other than 0", row))
		}
		if tcur != nil {
			t, err := tcur.At(row)
			if err != nil {
				return err
			}
			if t != 0 {
				return partError(name, segfmt.PartNulls, corruptf("null row %d stores the time %d, not 0", row, t))
			}
		}
		if tl != nil {
			if buf, err = tl.Tail(row, buf[:0]); err != nil {
				return err
			}
			if len(buf) != 0 {
				return partError(name, segfmt.PartNulls, corruptf("null row %d has a tail of %d terms", row, len(buf)))
			}
		}
	}
	return nil
}

// verifyMetricTimes decodes the times stored with a first/last metric's values.
func (s *Segment) verifyMetricTimes(i int) error {
	var tc *Column[int64]
	switch {
	case s.longs[i] != nil:
		tc = s.longs[i].Times()
	case s.doubles[i] != nil:
		tc = s.doubles[i].Times()
	}
	if tc == nil {
		return nil
	}
	c := tc.Cursor()
	return s.eachChunk(c.cr.ix, func(row int) error { _, _, err := c.Chunk(row); return err })
}

// verifyChecksums is VerifyChecksumsContext without a deadline.
func (s *Segment) verifyChecksums() error { return s.VerifyChecksumsContext(context.Background()) }

// VerifyChecksumsContext checks the CRC-32C of every part against the footer: the cheap part of
// Verify (one pass over the file, no decoding), enough to catch a damaged file before its
// contents are copied elsewhere under new checksums. The first mismatch is returned, wrapping
// ErrCorrupt and naming the column and part. Every part it checks counts as checked for the
// read path, which then computes no CRC again; a part the read path checked already is not
// read again, and a part OpenOptions.TrustChecksums marked is. On a mapped segment, the pages of the parts
// it reads are released once checked, 4 MiB at a time (as ReleasePages does): checking a file
// leaves none of it resident, so a merge that checks its inputs first does not hold them all. It stops
// with an error wrapping ctx.Err() when ctx is done (checked every MiB).
func (s *Segment) VerifyChecksumsContext(ctx context.Context) error {
	return s.verifyParts(ctx, nil)
}

// VerifyUnreadChecksumsContext is VerifyChecksumsContext over the parts that a reader of the
// columns named in cols, which reads the bitmap indexes of those named in indexes only, does
// not read: every part of the other columns, and the other bitmap indexes of cols (a name the
// segment lacks is no error). A merge checks them early, beside its rows, and its pass over
// the parts it did not read then finds them checked. It may run while the segment is read.
func (s *Segment) VerifyUnreadChecksumsContext(ctx context.Context, cols, indexes []string) error {
	return s.verifyParts(ctx, func(p *segfmt.PartInfo) bool {
		if !slices.Contains(cols, p.Column) {
			return true
		}
		return p.Kind == segfmt.PartBitmaps && !slices.Contains(indexes, p.Column)
	})
}

// verifyParts checks the parts want takes (all: want nil), as VerifyChecksumsContext says.
func (s *Segment) verifyParts(ctx context.Context, want func(*segfmt.PartInfo) bool) error {
	// Parts read here are released in batches of releaseBatch bytes (see ReleasePages): a
	// release costs a TLB flush on every CPU the process ran on, so not one per part. The
	// kernel maps a fault's neighbours too (fault-around, 64 KiB by default): a batch reaches
	// back up to releaseBack into the run of parts read here before it.
	runStart := int64(-1) // offset of the first part of the run of parts read here, -1 outside one
	pending := int64(-1)  // start of the range read here and not released yet
	var end int64         // end of the last part read here
	release := func() error {
		lo := pending
		pending = -1
		if lo < 0 || s.dropFn == nil {
			return nil
		}
		return s.dropFn(lo, end-lo)
	}
	for i := range s.checks {
		pc := &s.checks[i]
		p := pc.part
		st, got := pc.load()
		if skip := want != nil && !want(p); skip || st != checkNone && st != checkTrusted {
			// A part the read path checked (or one not checked here) is left resident: a
			// reader may be on it.
			if err := release(); err != nil {
				return err
			}
			runStart = -1
			if !skip && st == checkBad {
				return partError(p.Column, p.Kind, crcError(got, p.CRC))
			}
			continue
		}
		st, got, err := pc.compute(ctx, true)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			return partError(p.Column, p.Kind, err)
		}
		if st == checkBad {
			return partError(p.Column, p.Kind, crcError(got, p.CRC))
		}
		if runStart < 0 {
			runStart = p.Offset
		}
		if pending < 0 {
			pending = max(runStart, p.Offset-releaseBack)
		}
		end = p.Offset + p.Length
		if end-pending >= releaseBatch {
			if err := release(); err != nil {
				return err
			}
		}
	}
	if err := release(); err != nil {
		return err
	}
	return nil
}

// eachChunk calls fn with the first row of every chunk.
func (s *Segment) eachChunk(ix *chunkIndex, fn func(row int) error) error {
	if s.src.closed { // the index may be a view of the mapping
		return fmt.Errorf("columns: %w", errClosed)
	}
	for i := 0; i < ix.chunks(); i++ {
		if err := fn(ix.first(i)); err != nil {
			return err
		}
	}
	return nil
}

// verifyTime checks the __time column (Verify checked its CRC): times in order, valid, within
// the interval and truncated to the granularity, and the interval the one the first and last
// times give.
func (s *Segment) verifyTime() error {
	c := s.time.Cursor()
	c.cr.forCheck()
	defer c.Release()
	return s.timeRows(c)
}

// timeRows is verifyTime through the cursor c over the __time column.
func (s *Segment) timeRows(c *Cursor[int64]) error {
	tr := s.newTimeRows()
	err := s.eachChunk(c.cr.ix, func(row int) error {
		start, vals, err := c.Chunk(row)
		if err != nil {
			return err
		}
		return tr.chunk(start, vals)
	})
	if err != nil {
		return err
	}
	return tr.judge()
}

// timeRowsState is what timeRows keeps from chunk to chunk of the __time column, read in row
// order: the first time and the one before the next chunk.
type timeRowsState struct {
	s           *Segment
	prev, first int64
}

func (s *Segment) newTimeRows() *timeRowsState { return &timeRowsState{s: s} }

// chunk checks the times vals of the chunk starting at row start, the chunk after the one
// chunk saw last (row 0 for the first).
func (t *timeRowsState) chunk(start int, vals []int64) error {
	iv, g := t.s.f.interval, t.s.f.schema.Granularity
	if len(vals) > 0 && timesGood(vals, start, t.prev, iv, g) {
		if start == 0 {
			t.first = vals[0]
		}
		t.prev = vals[len(vals)-1]
		return nil
	}
	for k, v := range vals {
		r := start + k
		if r > 0 && v < t.prev {
			return partError(TimeColumn, segfmt.PartValues, corruptf("row %d: time %d before the previous row's %d", r, v, t.prev))
		}
		if !g.validTime(v) {
			return partError(TimeColumn, segfmt.PartValues, corruptf("row %d: time %d outside the times a segment can hold, [%d, %d]", r, v, g.Truncate(MinTime), MaxTime))
		}
		if !iv.Contains(v) {
			return partError(TimeColumn, segfmt.PartValues, corruptf("row %d: time %d outside the interval [%d, %d)", r, v, iv.Start, iv.End))
		}
		if g.Truncate(v) != v {
			return partError(TimeColumn, segfmt.PartValues, corruptf("row %d: time %d not truncated to the granularity %s", r, v, g))
		}
		if r == 0 {
			t.first = v
		}
		t.prev = v
	}
	return nil
}

// judge checks, once chunk saw every time, the footer's interval against the first and last
// times.
func (t *timeRowsState) judge() error {
	s, iv, g := t.s, t.s.f.interval, t.s.f.schema.Granularity
	first, prev := t.first, t.prev
	if s.f.rows == 0 {
		if iv != (Interval{}) {
			return corruptf("columns: interval [%d, %d) of a segment without rows, want the zero interval", iv.Start, iv.End)
		}
		return nil
	}
	want, ok := g.Interval(first, prev)
	if !ok {
		return partError(TimeColumn, segfmt.PartValues, corruptf("row %d: time %d leaves no room for the interval's end", s.f.rows-1, prev))
	}
	if iv != want && !(s.f.version == 1 && iv == (Interval{first, prev + 1})) {
		// (Version 1 writers recorded [first, last+1) whatever the granularity: still accepted.)
		return corruptf("columns: interval [%d, %d) (%v), but rows 0 and %d (times %d and %d, granularity %s) give [%d, %d) (%v)",
			iv.Start, iv.End, iv, s.f.rows-1, first, prev, g, want.Start, want.End, want)
	}
	return nil
}

// timesGood reports whether the times of a chunk starting at row start, after a time prev
// (unless start is 0), pass timeRows' checks, quickly: in order, the first and last inside
// the interval and the times a segment can hold (so all of them are), each time truncated
// where it differs from the one before. When it reports false, timeRows checks the chunk row
// by row to say what is wrong.
func timesGood(vals []int64, start int, prev int64, iv Interval, g Granularity) bool {
	lo, hi := vals[0], vals[len(vals)-1]
	if !g.validTime(lo) || !g.validTime(hi) || !iv.Contains(lo) || !iv.Contains(hi) {
		return false
	}
	if start == 0 {
		prev = lo
		if g.Truncate(lo) != lo {
			return false
		}
	}
	if g == GranularityNone {
		for _, v := range vals {
			if v < prev {
				return false
			}
			prev = v
		}
		return true
	}
	for _, v := range vals {
		if v != prev {
			if v < prev || g.Truncate(v) != v {
				return false
			}
			prev = v
		}
	}
	return true
}

// verifyRollup checks, under rollup, that the rows are strictly increasing by their key, which
// proves both that they are sorted and that no key appears twice. The key is the time, then
// the dimensions in schema order, compared as the merger orders its output (merger/keys.go,
// cmpDims): a single-value dimension by id (ids follow value order, the null id 0 first), a
// multi-value one by its ids element by element with a proper prefix first (a null row holds
// the null id alone), a raw one bytewise with null first. It reads each column through a
// cursor, a chunk at a time, and keeps only the previous row's key.
func (s *Segment) verifyRollup() error {
	if !s.f.schema.Rollup || s.f.rows < 2 {
		return nil
	}
	dims := s.f.schema.Dimensions
	keys := make([]keyDim, len(dims))
	for i, d := range dims {
		if d.Raw {
			keys[i].raw = s.raws[i].Cursor()
		} else {
			keys[i].ids = s.dims[i].Cursor()
		}
	}
	tc := s.time.Cursor()
	var prevT int64
	for row := 0; row < s.f.rows; row++ {
		t, err := tc.At(row)
		if err != nil {
			return err
		}
		c, at := cmp.Compare(t, prevT), -1
		for i := range keys {
			kc, err := keys[i].next(row, row > 0 && c == 0)
			if err != nil {
				return err
			}
			if c == 0 && kc != 0 {
				c, at = kc, i
			}
		}
		if row > 0 && c <= 0 {
			if c == 0 {
				return corruptf("columns: rollup: rows %d and %d have the same time %d and dimensions (a rolled-up segment holds each key once)", row-1, row, t)
			}
			what := fmt.Sprintf("time %d before %d", t, prevT)
			if at >= 0 {
				what = fmt.Sprintf("time %d, dimension %q sorts before the previous row's", t, dims[at].Name)
			}
			return corruptf("columns: rollup: row %d sorts before row %d (%s): a rolled-up segment is sorted by time, then dimensions", row, row-1, what)
		}
		prevT = t
	}
	return nil
}

// keyDim reads one dimension of the rows' keys for verifyRollup, keeping the previous row's.
type keyDim struct {
	ids      *DimCursor // a dictionary dimension
	raw      *RawCursor // a raw dimension
	prevIDs  []uint32
	prevRaw  []byte
	prevNull bool
}

// next reads row's value, compares it with the previous row's when cmpPrev, and keeps it as
// the previous row's.
func (k *keyDim) next(row int, cmpPrev bool) (int, error) {
	c := 0
	if k.raw != nil {
		b, ok, err := k.raw.Bytes(row)
		if err != nil {
			return 0, err
		}
		null := !ok
		if cmpPrev {
			switch {
			case null != k.prevNull && null:
				c = -1
			case null != k.prevNull:
				c = 1
			default:
				c = bytes.Compare(b, k.prevRaw)
			}
		}
		k.prevRaw, k.prevNull = append(k.prevRaw[:0], b...), null
		return c, nil
	}
	ids, err := k.ids.IDs(row)
	if err != nil {
		return 0, err
	}
	if cmpPrev {
		c = slices.Compare(ids, k.prevIDs)
	}
	k.prevIDs = append(k.prevIDs[:0], ids...)
	return c, nil
}

func (s *Segment) verifyRaw(c *RawColumn) error {
	nulls, err := c.Nulls()
	if err != nil {
		return err
	}
	cur := c.Cursor()
	cur.nulls = nulls
	for row := 0; row < s.f.rows; row++ {
		b, err := cur.at(row)
		if err != nil {
			return err
		}
		if len(b) > 0 && nulls.Contains(uint32(row)) {
			return partError(c.dim.Name, segfmt.PartValues, corruptf("row %d: null row holds %d bytes", row, len(b)))
		}
	}
	return nil
}

func (s *Segment) verifyDim(c *DimColumn) error {
	name := c.dim.Name
	// The dictionary: every block exactly filled, values strictly increasing.
	d := c.dict
	var prev []byte
	var it blockIter
	for b := 0; b < d.nblocks; b++ {
		raw, err := d.block(b, nil)
		if err != nil {
			return partError(name, segfmt.PartDictionary, err)
		}
		it.rest, it.i = raw, 0
		for k := 0; k < d.blockLen(b); k++ {
			if err := it.next(); err != nil {
				return partError(name, segfmt.PartDictionary, fmt.Errorf("block %d value %d: %w", b, k, err))
			}
			if (b > 0 || k > 0) && strings.Compare(string(prev), string(it.val)) >= 0 {
				return partError(name, segfmt.PartDictionary, corruptf("value %d (%.40q) does not sort after %.40q", b*dictBlock+k, it.val, prev))
			}
			prev = append(prev[:0], it.val...)
		}
		if len(it.rest) != 0 {
			return partError(name, segfmt.PartDictionary, corruptf("block %d: %d trailing bytes", b, len(it.rest)))
		}
	}
	// The rows' ids (the cursor checks widths, cardinality and nulls inside multi-value rows).
	rows := s.f.rows
	multi := c.dim.MultiValue
	var all, offs []uint32
	if multi {
		offs = make([]uint32, 0, rows+1)
	}
	var pairs uint64
	var seen []uint32
	cur := c.Cursor()
	for row := 0; row < rows; row++ {
		ids, err := cur.IDs(row)
		if err != nil {
			return err
		}
		if multi {
			offs = append(offs, uint32(len(all)))
			seen = append(seen[:0], ids...)
			pairs += distinctSorted(seen)
		} else {
			pairs++
		}
		all = append(all, ids...)
	}
	if multi {
		offs = append(offs, uint32(len(all)))
	}
	rowIDs := func(row uint32) []uint32 {
		if multi {
			return all[offs[row]:offs[row+1]]
		}
		return all[row : row+1]
	}
	// The null rows.
	nulls, err := c.Nulls()
	if err != nil {
		return err
	}
	var nullRows uint64
	for row := 0; row < rows; row++ {
		isNull := c.IsNull(rowIDs(uint32(row))[0])
		if isNull {
			nullRows++
		}
		if isNull != nulls.Contains(uint32(row)) {
			return partError(name, segfmt.PartNulls, corruptf("row %d: null is %v, the null bitmap says %v", row, isNull, !isNull))
		}
	}
	if nulls.GetCardinality() != nullRows {
		return partError(name, segfmt.PartNulls, corruptf("%d null rows, the null bitmap holds %d", nullRows, nulls.GetCardinality()))
	}
	if c.bms == nil {
		return nil
	}
	// The bitmap index: every member holds the id, and there are as many members as distinct
	// (row, id) pairs, so no pair is missing.
	var members uint64
	var lastEnd int64
	for id := 0; id < c.bms.count; id++ {
		start, end, err := c.bms.span(id)
		if err != nil {
			return partError(name, segfmt.PartBitmaps, err)
		}
		if start != lastEnd {
			return partError(name, segfmt.PartBitmaps, corruptf("bitmap %d starts at %d, the one before ends at %d", id, start, lastEnd))
		}
		lastEnd = end
		bm, err := c.Bitmap(uint32(id))
		if err != nil {
			return err
		}
		members += bm.GetCardinality()
		itr := bm.Iterator()
		for itr.HasNext() {
			row := itr.Next()
			if !containsID(rowIDs(row), uint32(id)) {
				return partError(name, segfmt.PartBitmaps, corruptf("bitmap %d holds row %d, which does not hold id %d", id, row, id))
			}
		}
	}
	if lastEnd != c.bms.tableOff {
		return partError(name, segfmt.PartBitmaps, corruptf("bitmaps end at %d, the table starts at %d", lastEnd, c.bms.tableOff))
	}
	if members != pairs {
		return partError(name, segfmt.PartBitmaps, corruptf("bitmaps hold %d rows in all, the rows hold %d distinct values", members, pairs))
	}
	return nil
}

func containsID(ids []uint32, id uint32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// distinctSorted sorts ids in place and counts the distinct ones.
func distinctSorted(ids []uint32) uint64 {
	if len(ids) <= 1 {
		return uint64(len(ids))
	}
	slices.Sort(ids)
	n := uint64(1)
	for i := 1; i < len(ids); i++ {
		if ids[i] != ids[i-1] {
			n++
		}
	}
	return n
}
