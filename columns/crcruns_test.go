package columns

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/segfmt"
)

func TestCRCCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, r.IntN(5000))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		k := 0
		if len(b) > 0 {
			k = r.IntN(len(b) + 1)
		}
		x, y := crc32.Checksum(b[:k], castagnoli), crc32.Checksum(b[k:], castagnoli)
		require.Equal(t, crc32.Checksum(b, castagnoli), crcCombine(x, y, int64(len(b)-k)), "split %d of %d", k, len(b))
	}
}

// runsSegment returns the bytes of a segment whose metrics span many chunks (50 of 4 rows).
func runsSegment(t *testing.T) []byte {
	return writeRows(t, flipSchema(), flipRows(200, 0), writerOptions{ChunkRows: 4, Compression: CompressionNone})
}

// readLongRange reads rows [lo, hi) of the long column name of seg through cur and returns
// their sum.
func readLongRange(cur *Cursor[int64], lo, hi int) (int64, error) {
	var sum int64
	for r := lo; r < hi; r++ {
		v, err := cur.At(r)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// TestPartRunsJudge: cursors taken with a Deferral read a metric's part in runs (ranges of
// rows, some overlapping, some apart, one going back), on a mapped segment: the part's CRC is
// not checked before the reads, and Judge puts it together from the runs and the bytes they
// did not cover, records it for every later reader, and finds it good. With the runs past
// maxCRCRuns, Judge reads the part whole instead.
func TestPartRunsJudge(t *testing.T) {
	good := runsSegment(t)
	plain := mustSegmentBytes(t, good)
	col, err := plain.Long("added")
	require.NoError(t, err)
	rows := plain.Rows()
	want := make([]int64, rows+1) // want[r]: the sum of rows [0, r)
	cur := col.Cursor()
	for r := range rows {
		v, err := cur.At(r)
		require.NoError(t, err)
		want[r+1] = want[r] + v
	}
	rng := rand.New(rand.NewPCG(seedFor(t, 0), 9))
	for trial := range 300 {
		if trial == 250 {
			saved := maxCRCRuns
			maxCRCRuns = 2
			t.Cleanup(func() { maxCRCRuns = saved })
		}
		seg := mustSegmentBytes(t, good)
		c, err := seg.Long("added")
		require.NoError(t, err)
		d := &Deferral{}
		readers := 1 + rng.IntN(4)
		for range readers {
			cur := c.DeferredCursor(d)
			for range 1 + rng.IntN(3) {
				lo := rng.IntN(rows)
				hi := lo + rng.IntN(rows-lo+1)
				sum, err := readLongRange(cur, lo, hi)
				require.NoError(t, err)
				require.Equal(t, want[hi]-want[lo], sum, "trial %d: rows [%d, %d)", trial, lo, hi)
			}
		}
		pc := c.ix.chk
		st, _ := pc.load()
		require.Equal(t, checkNone, st, "trial %d: no CRC computed before Judge", trial)
		require.NoError(t, d.Judge(), "trial %d", trial)
		st, got := pc.load()
		require.Equal(t, checkGood, st, "trial %d", trial)
		require.Equal(t, pc.part.CRC, got, "trial %d", trial)
		require.Equal(t, int64(1), seg.crcPasses.Load(), "trial %d: one CRC computed", trial)
		if trial < 250 {
			require.Equal(t, int64(1), seg.runCRCs.Load(), "trial %d: put together from the runs", trial)
		}
		_, err = c.Cursor().At(rows - 1)
		require.NoError(t, err)
		require.Equal(t, int64(1), seg.crcPasses.Load(), "trial %d: the verdict counts for a later reader", trial)
	}
}

// TestPartRunsBadCRC: every byte of the metrics' values and times parts flipped (the CRC left
// as it was): a deferred read of every metric row fails, or Judge does, with the part's CRC
// error naming the column and the part, whatever the flipped byte made a decoder do first; a
// plain reader after Judge gets the same error. Through ReadAt (no mapping) the CRC is checked
// first, as for any reader.
func TestPartRunsBadCRC(t *testing.T) {
	good := runsSegment(t)
	seg := mustSegmentBytes(t, good)
	parts := 0
	defer func() { require.Equal(t, 7, parts, "the values of 5 metrics, the times of 2") }()
	for _, p := range seg.f.parts {
		if p.Kind != segfmt.PartValues && p.Kind != segfmt.PartTimes || p.Column == TimeColumn {
			continue
		}
		_, lerr := seg.Long(p.Column)
		_, derr := seg.Double(p.Column)
		if lerr != nil && derr != nil {
			continue // a raw dimension's values, a sketch's
		}
		parts++
		for off := p.Offset; off < p.Offset+p.Length; off++ {
			b := bytes.Clone(good)
			b[off] ^= 0x10
			what := fmt.Sprintf("column %s part %s: byte %d", p.Column, p.Kind, off-p.Offset)
			for _, mapped := range []bool{true, false} {
				s, err := segmentOver(b, mapped)
				if err != nil {
					require.ErrorIs(t, err, ErrCorrupt, what)
					continue
				}
				d := &Deferral{}
				err = readMetricDeferred(s, p.Column, p.Kind, d)
				if jerr := d.Judge(); err == nil {
					err = jerr
				}
				require.Error(t, err, what)
				require.ErrorIs(t, err, ErrCorrupt, what)
				require.ErrorContains(t, err, "CRC", "%s (mapped %v)", what, mapped)
				require.ErrorContains(t, err, fmt.Sprintf("column %q part %s", p.Column, p.Kind), what)
				require.Error(t, readMetricDeferred(s, p.Column, p.Kind, nil), "%s: a plain reader after Judge", what)
			}
		}
	}
}

// readMetricDeferred reads every row of metric name's part kind (its values or its times) of
// s through a cursor taken with d.
func readMetricDeferred(s *Segment, name string, kind segfmt.PartKind, d *Deferral) error {
	read := func(first func(int) error) error {
		for r := range s.Rows() {
			if err := first(r); err != nil {
				return err
			}
		}
		return nil
	}
	if c, err := s.Double(name); err == nil {
		if kind == segfmt.PartTimes {
			cur := c.Times().DeferredCursor(d)
			return read(func(r int) error { _, err := cur.At(r); return err })
		}
		cur := c.DeferredCursor(d)
		return read(func(r int) error { _, err := cur.At(r); return err })
	}
	c, err := s.Long(name)
	if err != nil {
		return err
	}
	if kind == segfmt.PartTimes {
		c = c.Times()
	}
	cur := c.DeferredCursor(d)
	return read(func(r int) error { _, err := cur.At(r); return err })
}
