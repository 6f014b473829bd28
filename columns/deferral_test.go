package columns

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/internal/segsurgery"
)

// readTimesIDs reads the __time column and every dictionary dimension's ids of seg front to
// back, a chunk at a time, as a merge does, through cursors taken with d (plain cursors when
// d is nil), and describes what it read; the first error stops it.
func readTimesIDs(seg *Segment, d *Deferral) (string, error) {
	return readTimesIDsWith(seg, d, false)
}

// readTimesIDsWith is readTimesIDs through Sequential cursors when seq.
func readTimesIDsWith(seg *Segment, d *Deferral, seq bool) (string, error) {
	return readTimesIDsPeek(seg, d, seq, false)
}

// readTimesIDsPeek is readTimesIDsWith where, when peek, each cursor first reads the chunks of
// its last row and of a row in the middle (as a merge's cursor looks at a time ahead), then
// goes back to row 0; what it peeked at is not described.
func readTimesIDsPeek(seg *Segment, d *Deferral, seq, peek bool) (string, error) {
	var b strings.Builder
	peeks := func(chunk func(r int) error) error {
		if !peek || seg.Rows() == 0 {
			return nil
		}
		for _, r := range []int{seg.Rows() - 1, seg.Rows() / 2} {
			if err := chunk(r); err != nil {
				return err
			}
		}
		return nil
	}
	tc := seg.Time().DeferredCursor(d)
	if seq {
		tc.Sequential()
	}
	defer tc.Release()
	if err := peeks(func(r int) error { _, _, err := tc.Chunk(r); return err }); err != nil {
		return b.String(), err
	}
	for r := 0; r < seg.Rows(); {
		first, vals, err := tc.Chunk(r)
		if err != nil {
			return b.String(), err
		}
		fmt.Fprintf(&b, "t%d %v\n", first, vals)
		r = first + len(vals)
	}
	for _, dim := range seg.Schema().Dimensions {
		if dim.Raw {
			continue
		}
		c, err := seg.Dim(dim.Name)
		if err != nil {
			return b.String(), err
		}
		cur := c.DeferredCursor(d)
		if seq {
			cur.Sequential()
		}
		if err := peeks(func(r int) error { _, _, _, err := cur.Chunk(r); return err }); err != nil {
			cur.Release()
			return b.String(), err
		}
		for r := 0; r < seg.Rows(); {
			first, ids, offs, err := cur.Chunk(r)
			if err != nil {
				cur.Release()
				return b.String(), err
			}
			fmt.Fprintf(&b, "%s%d %v %v\n", dim.Name, first, ids, offs)
			if offs != nil {
				r = first + len(offs) - 1
			} else {
				r = first + len(ids)
			}
		}
		cur.Release()
	}
	return b.String(), nil
}

// deferredOutcome reads seg as readTimesIDs does with a Deferral and judges it: what it read,
// and the first error of the reads and Judge.
func deferredOutcome(seg *Segment) (string, error) {
	return deferredOutcomePeek(seg, false)
}

// deferredOutcomePeek is deferredOutcome through cursors that peek ahead first when peek (see
// readTimesIDsPeek).
func deferredOutcomePeek(seg *Segment, peek bool) (string, error) {
	d := &Deferral{}
	got, err := readTimesIDsPeek(seg, d, false, peek)
	if jerr := d.Judge(); err == nil {
		err = jerr
	}
	return got, err
}

// TestDeferredChecksWholeRead: a merge's read of the times and ids through deferred cursors
// decodes each part once (the structural checks gathered from the cursors' chunks, the CRC of
// a mapped part computed from their frames), reads what plain cursors read, and its verdict
// counts for every later reader.
func TestDeferredChecksWholeRead(t *testing.T) {
	for name, good := range flipSegments(t) {
		plain, err := newSegmentBytes(good)
		require.NoError(t, err)
		want, err := readTimesIDs(plain, nil)
		require.NoError(t, err, name)

		seg, err := newSegmentBytes(good)
		require.NoError(t, err)
		d := &Deferral{}
		got, err := readTimesIDs(seg, d)
		require.NoError(t, err, name)
		require.Equal(t, want, got, name)
		deferredParts := 0
		for _, x := range d.checks {
			require.Equal(t, x.chunks, x.next, "%s: a deferred cursor saw every chunk in order", name)
			deferredParts++
		}
		derived := 0
		for _, dc := range seg.dims {
			if dc != nil && dc.derived {
				derived++
			}
		}
		require.Equal(t, 1+2+1-derived, deferredParts, "%s: the times and each stored ids part put off", name)
		for _, sc := range seg.structs {
			if sc == seg.time.ix.chk.sc {
				require.False(t, sc.passed(), "%s: nothing judged before Judge", name)
			}
		}
		require.NoError(t, d.Judge(), name)
		require.Equal(t, int64(deferredParts), seg.fusedCRCs.Load(), "%s: each part's CRC from the frames read", name)
		require.True(t, seg.time.ix.chk.sc.passed(), name)
		for _, dc := range seg.dims {
			if dc != nil {
				require.True(t, dc.ix.chk.sc.passed(), "%s: %s", name, dc.dim.Name)
			}
		}
		require.NoError(t, d.Judge(), "a second Judge has nothing left")

		// Read through ReadAt (no mapping): the CRC is checked first, as for any reader.
		ra, err := NewSegment(bytes.NewReader(good), int64(len(good)))
		require.NoError(t, err)
		got, err = deferredOutcome(ra)
		require.NoError(t, err, name)
		require.Equal(t, want, got, name)
		require.Zero(t, ra.fusedCRCs.Load())

		// Cursors that peek at chunks ahead, then read every chunk in order: judged from what
		// they gathered in order, the CRCs from the frames, as without the peeks.
		peeked, err := newSegmentBytes(good)
		require.NoError(t, err)
		d = &Deferral{}
		got, err = readTimesIDsPeek(peeked, d, false, true)
		require.NoError(t, err, name)
		require.Equal(t, want, got, name)
		for _, x := range d.checks {
			require.Equal(t, x.chunks, x.next, "%s: every chunk gathered in order, the peeks aside", name)
		}
		require.NoError(t, d.Judge(), name)
		require.Equal(t, int64(deferredParts), peeked.fusedCRCs.Load(), "%s: each part's CRC from the frames read", name)
		require.True(t, peeked.time.ix.chk.sc.passed(), name)

		// A cursor that read some rows only: Judge runs the whole check.
		part, err := newSegmentBytes(good)
		require.NoError(t, err)
		d = &Deferral{}
		_, _, err = part.Time().DeferredCursor(d).Chunk(part.Rows() - 1)
		require.NoError(t, err)
		require.NoError(t, d.Judge())
		require.True(t, part.time.ix.chk.sc.passed())
	}
}

// TestDeferredChecksStructuralFaults: every structural fault of the flip segments' times, ids
// and nulls parts (their bytes changed, every CRC recomputed), read through deferred cursors
// and judged, gives the plain read path's outcome: where a plain read of the times and ids
// fails, the deferred read or Judge fails, wrapping ErrCorrupt and naming a column and part;
// where it succeeds, the deferred read reads the same and Judge passes. Afterwards, a plain
// read of the segment judged gives that verdict again.
func TestDeferredChecksStructuralFaults(t *testing.T) {
	kinds := map[segfmt.PartKind]bool{segfmt.PartValues: true, segfmt.PartIDs: true, segfmt.PartNulls: true, segfmt.PartBitmaps: true}
	for name, good := range flipSegments(t) {
		f, err := segsurgery.Parse(good)
		require.NoError(t, err)
		var faults, failed int
		for i, p := range f.Parts {
			if !kinds[p.Kind] || p.Kind == segfmt.PartValues && p.Column != 0 {
				continue
			}
			dec, err := f.Decode(i)
			require.NoError(t, err)
			n, step := dec.Len(), 1
			if n > 120 {
				step = n / 120
			}
			for pos := 0; pos < n; pos += step {
				x := []byte{0x01, 0x80, 0xff, 0x10, 0x04}[pos%5]
				b := f.Faulted(i, dec, pos, x)
				what := fmt.Sprintf("%s: column %d part %s: decoded byte %d ^ %#x", name, p.Column, p.Kind, pos, x)
				plain, err := newSegmentBytes(b)
				if err != nil {
					continue // Open refuses it: no cursor to take
				}
				faults++
				want, perr := readTimesIDs(plain, nil)
				seg, err := newSegmentBytes(b)
				require.NoError(t, err)
				got, derr := deferredOutcome(seg)
				pseg, err := newSegmentBytes(b)
				require.NoError(t, err)
				pgot, pderr := deferredOutcomePeek(pseg, true) // cursors that look ahead first
				if perr == nil {
					require.NoError(t, derr, what)
					require.Equal(t, want, got, what)
					require.NoError(t, pderr, what)
					require.Equal(t, want, pgot, what)
					continue
				}
				failed++
				require.Error(t, derr, "%s: the plain read fails with %v", what, perr)
				require.ErrorIs(t, derr, ErrCorrupt, what)
				require.ErrorContains(t, derr, "part ", what)
				require.Error(t, pderr, "%s: peeking: the plain read fails with %v", what, perr)
				require.ErrorIs(t, pderr, ErrCorrupt, what)
				require.ErrorContains(t, pderr, "part ", what)
				_, again := readTimesIDs(seg, nil)
				require.Error(t, again, "%s: the verdict stays", what)
				require.ErrorIs(t, again, ErrCorrupt, what)
			}
		}
		require.NotZero(t, failed, name)
		t.Logf("%s: %d faults, %d refused by the plain read path", name, faults, failed)
	}
}

// TestDeferredChecksBadCRC: every byte of the times and ids parts flipped (the CRC left as it
// was): the deferred read, which computes a mapped part's CRC from the frames it decodes,
// fails or Judge does, with the part's CRC error naming the file's column and part, whatever
// the flipped byte made a decoder do first.
func TestDeferredChecksBadCRC(t *testing.T) {
	for name, good := range flipSegments(t) {
		seg, err := newSegmentBytes(good)
		require.NoError(t, err)
		for _, p := range seg.f.parts {
			if p.Kind != segfmt.PartIDs && !(p.Kind == segfmt.PartValues && p.Column == TimeColumn) {
				continue
			}
			for off := p.Offset; off < p.Offset+p.Length; off++ {
				b := bytes.Clone(good)
				b[off] ^= 0x10
				what := fmt.Sprintf("%s: column %s part %s: byte %d", name, p.Column, p.Kind, off-p.Offset)
				for _, mapped := range []bool{true, false} {
					s, err := segmentOver(b, mapped)
					if err != nil {
						require.ErrorIs(t, err, ErrCorrupt, what)
						continue
					}
					_, err = deferredOutcome(s)
					require.Error(t, err, what)
					require.ErrorIs(t, err, ErrCorrupt, what)
					require.ErrorContains(t, err, "CRC", "%s (mapped %v)", what, mapped)
					require.ErrorContains(t, err, fmt.Sprintf("column %q part %s", p.Column, p.Kind), what)
				}
			}
		}
	}
}

// segmentOver opens a segment over b: as over a mapping (newSegmentBytes) when mapped, else
// through ReadAt.
func segmentOver(b []byte, mapped bool) (*Segment, error) {
	if mapped {
		return newSegmentBytes(b)
	}
	return NewSegment(bytes.NewReader(b), int64(len(b)))
}
