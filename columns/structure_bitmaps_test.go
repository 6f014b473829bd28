package columns

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/internal/segsurgery"
)

// TestStoredCount: the count read from a stored bitmap's header is its number of rows, in
// every form a bitmap index part stores (roaring with and without run containers, Elias-Fano,
// the empty version 4 form); a truncated header is corrupt.
func TestStoredCount(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	var enc roaringEncoder
	f := func(rows []uint32) {
		t.Helper()
		for _, compact := range []bool{false, true} {
			b, v4 := enc.appendBitmapRows(nil, rows, compact)
			n, err := storedCount(b, v4)
			require.NoError(t, err)
			require.Equal(t, uint64(len(rows)), n, "compact %v, %d rows", compact, len(rows))
		}
		bm := roaring.BitmapOf(rows...)
		bm.RunOptimize()
		b, err := bm.ToBytes()
		require.NoError(t, err)
		n, err := storedCount(b, false)
		require.NoError(t, err)
		require.Equal(t, uint64(len(rows)), n)
		if len(b) > 8 {
			_, err = storedCount(b[:7], false)
			require.ErrorIs(t, err, ErrCorrupt)
		}
	}
	f(nil)
	f([]uint32{0})
	f([]uint32{5, 70_000, 1 << 20})
	for range 50 {
		span := uint32(1 + rng.IntN(300_000))
		set := map[uint32]bool{}
		for range rng.IntN(20_000) {
			set[rng.Uint32N(span)] = true
		}
		if rng.IntN(3) == 0 { // a run
			for v := uint32(0); v < 5000; v++ {
				set[span+v] = true
			}
		}
		rows := make([]uint32, 0, len(set))
		for v := range set {
			rows = append(rows, v)
		}
		bm := roaring.BitmapOf(rows...)
		f(bm.ToArray())
	}
}

// bitmapsSchema has one dictionary dimension of ten values, with a bitmap index.
func bitmapsSchema() Schema {
	return Schema{
		Dimensions: []Dimension{{Name: "d"}},
		Metrics:    []Metric{{Name: "count", Aggregator: "count"}},
	}
}

func bitmapsRows() []Row {
	rows := make([]Row, 200)
	for i := range rows {
		rows[i] = Row{Time: 1_700_000_000_000 + int64(i)*1000, Dims: [][]string{{fmt.Sprintf("v%d", (i*7)%10)}}, Metrics: []Value{{Long: 1}}}
	}
	return rows
}

// faultsOf returns, for every byte of the decoded content of the part of kind k of column 1
// (ten positions' worth at most of each xor), the faulted file.
func faultsOf(t *testing.T, good []byte, k segfmt.PartKind) [][]byte {
	f, err := segsurgery.Parse(good)
	require.NoError(t, err)
	var out [][]byte
	for i, p := range f.Parts {
		if p.Column != 1 || p.Kind != k {
			continue
		}
		dec, err := f.Decode(i)
		require.NoError(t, err)
		for pos := 0; pos < dec.Len(); pos++ {
			for _, x := range []byte{0x01, 0x02, 0x10} {
				out = append(out, f.Faulted(i, dec, pos, x))
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}

// readIDs reads every id of dimension d through a cursor.
func readIDs(seg *Segment) ([]uint32, error) {
	d, err := seg.Dim("d")
	if err != nil {
		return nil, err
	}
	cur := d.Cursor()
	defer cur.Release()
	var out []uint32
	for r := 0; r < seg.Rows(); {
		first, ids, _, err := cur.Chunk(r)
		if err != nil {
			return nil, err
		}
		out = append(out, ids[r-first:]...)
		r = first + len(ids)
	}
	return out, nil
}

// TestIDChangedInPlace: an id changed in place in the ids part (every checksum valid) changes
// two ids' row counts, which the bitmaps' headers give: the first read of the ids fails
// without decoding a bitmap.
func TestIDChangedInPlace(t *testing.T) {
	good := writeRows(t, bitmapsSchema(), bitmapsRows(), writerOptions{ChunkRows: 64, Compression: CompressionNone})
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	want, err := readIDs(seg)
	require.NoError(t, err)
	counts := regexp.MustCompile(`bitmap \d+ holds \d+ rows, \d+ rows hold id`)
	counted := 0
	for _, b := range faultsOf(t, good, segfmt.PartIDs) {
		s, err := newSegmentBytes(b)
		if err != nil {
			continue
		}
		got, err := readIDs(s)
		if err == nil {
			require.Equal(t, want, got, "the ids read as other ids")
			continue
		}
		require.ErrorIs(t, err, ErrCorrupt)
		if counts.MatchString(err.Error()) {
			counted++
		}
	}
	t.Logf("faults found by the counts: %d", counted)
	require.Positive(t, counted)
}

// TestBitmapCheckedWhenRead: a bitmap whose rows change but not its count (every checksum
// valid) leaves the ids reading as they are, and fails when read: checked alone while at most
// bitmapChecksAlone bitmaps of the column were, else with all of them. The verdict is
// remembered for every later bitmap read of the column.
func TestBitmapCheckedWhenRead(t *testing.T) {
	good := writeRows(t, bitmapsSchema(), bitmapsRows(), writerOptions{ChunkRows: 64, Compression: CompressionNone})
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	want, err := readIDs(seg)
	require.NoError(t, err)
	found := 0
	for _, b := range faultsOf(t, good, segfmt.PartBitmaps) {
		s, err := newSegmentBytes(b)
		if err != nil || s.Verify() == nil {
			continue
		}
		s, err = newSegmentBytes(b)
		require.NoError(t, err)
		got, err := readIDs(s)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt) // the count changed
			continue
		}
		require.Equal(t, want, got)
		// The count kept: the faulted bitmap is the one that fails alone.
		d, err := s.Dim("d")
		require.NoError(t, err)
		bad, moved := -1, false
		for id := range d.Cardinality() {
			s1, err := newSegmentBytes(b)
			require.NoError(t, err)
			d1, err := s1.Dim("d")
			require.NoError(t, err)
			if _, err := d1.Bitmap(uint32(id)); err != nil {
				require.ErrorIs(t, err, ErrCorrupt)
				require.Equal(t, -1, bad, "two bitmaps fail")
				bad = id
				// Else a row outside the column, or bytes that do not decode.
				moved = strings.Contains(err.Error(), "or other rows than the bitmap)")
			}
		}
		require.GreaterOrEqual(t, bad, 0, "no bitmap fails alone")
		if !moved {
			continue
		}
		found++
		// Read after bitmapChecksAlone others, it fails with the check of all of them; then
		// every bitmap read fails the same way.
		s2, err := newSegmentBytes(b)
		require.NoError(t, err)
		d2, err := s2.Dim("d")
		require.NoError(t, err)
		others := 0
		for id := range d2.Cardinality() {
			if id != bad && others < bitmapChecksAlone {
				_, err := d2.Bitmap(uint32(id))
				require.NoError(t, err)
				others++
			}
		}
		err = d2.EachBitmapRows(uint32(bad), nil, func([]uint32) error { return nil })
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorContains(t, err, "the bitmaps hold")
		_, err2 := d2.Bitmap(uint32((bad + 1) % d2.Cardinality()))
		require.ErrorIs(t, err2, ErrCorrupt)
		require.Equal(t, err.Error(), err2.Error())
	}
	t.Logf("faults keeping the count: %d", found)
	require.Positive(t, found)
}

// TestStructuralFaultsVersion5: faults in the decoded chunks of a version 5 ids part (id
// differences; segsurgery decodes its chunks and keeps its rank table), the part re-encoded
// and every CRC recomputed: when Verify rejects the file, reading every column fails with
// ErrCorrupt or reads what the intact file reads.
func TestStructuralFaultsVersion5(t *testing.T) {
	s, rows := deltaRows(seedFor(t, 0), 2000, 115)
	good := writeRows(t, s, rows, writerOptions{Compression: CompressionZstd, ChunkRows: 512, StoreIDs: true})
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	want, err := readEveryColumn(seg)
	require.NoError(t, err)
	f, err := segsurgery.Parse(good)
	require.NoError(t, err)
	k := -1
	for i, p := range f.Parts {
		if p.Enc == segfmt.EncIDChunksV5 {
			k = i
		}
	}
	require.GreaterOrEqual(t, k, 0, "no version 5 ids part")
	dec, err := f.Decode(k)
	require.NoError(t, err)
	require.NotEqual(t, len(f.Parts[k].Data), dec.Len(), "the part decoded as its stored bytes, not as chunks")
	var rejected, failed int
	for pos := 0; pos < dec.Len(); pos += 7 {
		b := f.Faulted(k, dec, pos, []byte{0x01, 0x10, 0x80}[pos%3])
		vs, err := newSegmentBytes(b)
		if err != nil || vs.Verify() == nil {
			continue
		}
		rejected++
		s2, err := newSegmentBytes(b)
		require.NoError(t, err)
		got, err := readEveryColumn(s2)
		if err == nil {
			require.Equal(t, want, got, "decoded byte %d: Verify rejects the file, the read path read something else", pos)
			continue
		}
		require.ErrorIs(t, err, ErrCorrupt)
		failed++
	}
	t.Logf("%d faults Verify rejects, the read path fails on %d", rejected, failed)
	require.Positive(t, rejected)
}
