package columns

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
)

// efShapes are adversarial value sets: one value, the ends of the u32 range, container
// boundaries, a full container, runs, every other value, dense and sparse spreads.
func efShapes() [][]uint32 {
	seq := func(lo, hi, step uint32) []uint32 {
		var vs []uint32
		for v := lo; v < hi; v += step {
			vs = append(vs, v)
		}
		return vs
	}
	return [][]uint32{
		{0}, {1}, {65535}, {65536}, {1<<32 - 1}, {0, 1<<32 - 1},
		{65535, 65536}, {0, 65535, 65536, 131071, 131072},
		seq(0, 1<<16, 1),              // a full container
		seq(1<<16-10, 1<<16+10, 1),    // a run across a boundary
		seq(0, 1<<17, 2),              // every other value
		seq(0, 1<<20, 977),            // sparse, even
		seq(1<<31, 1<<31+5000, 1),     // a run high up
		seq(1<<32-4096, 1<<32-1, 3),   // up to the top of the range
		append(seq(0, 100, 1), 1<<30), // dense then far
	}
}

// decodeEFAll decodes one stored bitmap of a version 4 part whole and in pieces of piece,
// checking that both agree.
func decodeEFAll(t *testing.T, b []byte, limit uint64, piece int) ([]uint32, error) {
	t.Helper()
	d := roaringDecoder{}
	err := d.decodeStored(b, true, limit, nil)
	var pieces []uint32
	p := roaringDecoder{out: make([]uint32, 0, piece), piece: piece}
	perr := p.eachStored(b, true, limit, func(rs []uint32) error {
		require.LessOrEqual(t, len(rs), piece)
		require.NotEmpty(t, rs)
		pieces = append(pieces, rs...)
		return nil
	})
	require.Equal(t, err == nil, perr == nil, "whole: %v, pieces: %v", err, perr)
	if err != nil {
		return nil, err
	}
	require.True(t, slices.Equal(d.out, pieces), "whole and in pieces differ")
	return d.out, nil
}

// TestEFRoundTrip encodes adversarial and random value sets in the Elias-Fano form from rows
// and from bitset words: the same bytes, efSize of them, decoding (whole and in pieces) to the
// values; a limit at the last value and every truncation fail with ErrCorrupt.
func TestEFRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t, 41), 41))
	sets := efShapes()
	for range 100 {
		sets = append(sets, randomRows(rng))
	}
	for i, vals := range sets {
		if len(vals) == 0 {
			continue
		}
		last := vals[len(vals)-1]
		b := appendEFRows([]byte{0xAA}, vals)
		require.Equal(t, byte(0xAA), b[0])
		b = b[1:]
		require.Len(t, b, efSize(len(vals), last), "set %d", i)
		if last < 1<<22 { // the bitset of a huge value is too big for a test
			ws := wordsOf(vals, i%3)
			require.Equal(t, last, lastBit(ws))
			require.Equal(t, b, appendEFWords(nil, ws, len(vals), last), "set %d: from words", i)
		}
		got, err := decodeEFAll(t, b, uint64(last)+1, 1+rng.IntN(5000))
		require.NoError(t, err, "set %d", i)
		require.True(t, slices.Equal(vals, got), "set %d", i)
		_, err = decodeEFAll(t, b, uint64(last), 100)
		require.ErrorIs(t, err, ErrCorrupt, "set %d: limit at the last value", i)
		for _, cut := range []int{1, 2, 3, len(b) / 2, len(b) - 1} {
			if cut > 0 && cut < len(b) {
				_, err = decodeEFAll(t, b[:cut], 1<<32, 100)
				require.ErrorIs(t, err, ErrCorrupt, "set %d cut %d", i, cut)
			}
		}
		_, err = decodeEFAll(t, append(append([]byte(nil), b...), 0), 1<<32, 100)
		require.ErrorIs(t, err, ErrCorrupt, "set %d: a zero byte appended", i)
	}
	// Every truncation and every byte flipped of a few small sets: an error wrapping
	// ErrCorrupt or strictly increasing values below the limit, never a panic.
	for _, vals := range [][]uint32{{5, 9, 200, 201, 7000}, {0, 1, 2, 3}, {1 << 20}} {
		b := appendEFRows(nil, vals)
		for cut := 1; cut < len(b); cut++ {
			_, err := decodeEFAll(t, b[:cut], 1<<21, 2)
			require.ErrorIs(t, err, ErrCorrupt)
		}
		for k := range b {
			for _, x := range []byte{1, 0x10, 0x80, 0xff} {
				c := append([]byte(nil), b...)
				c[k] ^= x
				got, err := decodeEFAll(t, c, 1<<21, 2)
				if err != nil {
					require.ErrorIs(t, err, ErrCorrupt)
					continue
				}
				for j := range got {
					require.Less(t, got[j], uint32(1<<21))
					if j > 0 {
						require.Greater(t, got[j], got[j-1])
					}
				}
			}
		}
	}
}

// TestDecodeEFRejects feeds the decoder damage of each kind it checks.
func TestDecodeEFRejects(t *testing.T) {
	good := appendEFRows(nil, []uint32{3, 10, 11, 40}) // l = 3
	require.Equal(t, []byte{efTag, 4, 3}, good[:3])
	f := func(b []byte, limit uint64, want string) {
		t.Helper()
		_, err := decodeEFAll(t, b, limit, 3)
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorContains(t, err, want)
	}
	edit := func(k int, v byte) []byte {
		b := append([]byte(nil), good...)
		b[k] = v
		return b
	}
	f(good, 40, "not below 40")
	f(good, 3, "bad count")         // 4 values cannot be below 3
	f(edit(1, 0), 100, "bad count") // n = 0
	f([]byte{efTag, 0x80}, 100, "2 bytes")
	f([]byte{efTag, 0x80, 0x80}, 100, "bad count")         // a truncated uvarint
	f([]byte{efTag, 0x81, 0x01}, 1000, "truncated header") // no l
	f(edit(2, 32), 100, "32 low bits")
	f([]byte{efTag, 1, 7, 0x3f, 0x01}, 100, "7 low bits, the writer's are 6") // {63} is l = 6
	f(edit(2, 9), 100, "in 4 bytes")                                          // 4 values of 9 low bits leave no highs
	f(edit(1, 5), 100, "4 values, the header says 5")
	f(append(append([]byte(nil), good...), 0), 100, "highs end in a zero byte")
	f(edit(4, good[4]|0x80), 100, "low padding bits set")             // 4 values of 3 bits: bits 12.. of the lows are padding
	f(edit(len(good)-1, 0xff), 1<<20, "11 values, the header says 4") // more highs set than values
	// Fewer highs set than values: n = 4 but only 3 bits.
	b := appendEFRows(nil, []uint32{1, 2, 3})
	b[1] = 4
	f(b, 100, "3 values, the header says 4")
	// Equal values: the same high twice with lows 1 then 1, l = 1.
	b = []byte{efTag, 2, 1, 0b11, 0b011}
	f(b, 100, "not increasing")
	// A high far past the limit (it would overflow 64 bits shifted by l).
	b = append([]byte{efTag, 1, 31, 0, 0, 0, 0}, make([]byte, 1<<10)...)
	b[len(b)-1] = 0x80
	f(b, 1<<32, "not below")
	// The roaring form in a version 4 part is checked as before, trailing bytes included.
	rb := roaringBytes(t, []uint32{1, 5})
	_, err := decodeEFAll(t, append(rb, 0), 100, 3)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "trailing")
	got, err := decodeEFAll(t, rb, 100, 3)
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 5}, got)
	got, err = decodeEFAll(t, nil, 100, 3)
	require.NoError(t, err)
	require.Empty(t, got)
	// decodeBitmap4 gives the same bitmaps, and the same errors.
	bm, err := decodeBitmap4(good, 41)
	require.NoError(t, err)
	require.Equal(t, []uint32{3, 10, 11, 40}, bm.ToArray())
	_, err = decodeBitmap4(good, 40)
	require.ErrorIs(t, err, ErrCorrupt)
	bm, err = decodeBitmap4(nil, 1)
	require.NoError(t, err)
	require.True(t, bm.IsEmpty())
	bm, err = decodeBitmap4(rb, 6)
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 5}, bm.ToArray())
}

// TestDecodeBitmap4Mutable: a bitmap decoded from the Elias-Fano form is the caller's to
// change, and changing it leaves the next decode of the same bytes alone.
func TestDecodeBitmap4Mutable(t *testing.T) {
	vals := []uint32{1, 7, 70_000, 70_001, 200_000}
	b := appendEFRows(nil, vals)
	bm, err := decodeBitmap4(b, 300_000)
	require.NoError(t, err)
	bm.Add(3)
	bm.Remove(70_000)
	bm.RunOptimize()
	require.Equal(t, []uint32{1, 3, 7, 70_001, 200_000}, bm.ToArray())
	again, err := decodeBitmap4(b, 300_000)
	require.NoError(t, err)
	require.Equal(t, vals, again.ToArray())
}

// TestBitmapsWriterPicksSmallest: with compact, each bitmap takes the smallest of its forms
// (roaringSize is the bytes the roaring form takes), from rows, words and roaring bitmaps
// alike; a part whose bitmaps all stay roaring is the version 2 part byte for byte.
func TestBitmapsWriterPicksSmallest(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t, 43), 43))
	sets := [][]uint32{nil}
	sets = append(sets, efShapes()...)
	for range 100 {
		sets = append(sets, randomRows(rng))
	}
	newWriter := func(compact bool) *bitmapsWriter {
		b, err := medium.NewHeap().NewBytes()
		require.NoError(t, err)
		return &bitmapsWriter{st: &stage{b: b, spec: partSpec{1, segfmt.PartBitmaps, segfmt.EncRoaringTable}}, compact: compact}
	}
	var enc roaringEncoder
	for i, vals := range sets {
		rb := roaringBytes(t, vals)
		require.Equal(t, len(rb), roaringSize(enc.rowsContainers(vals)), "set %d: roaringSize", i)
		want := len(rb)
		switch {
		case len(vals) == 0:
			want = 0
		case efSize(len(vals), vals[len(vals)-1]) < len(rb):
			want = efSize(len(vals), vals[len(vals)-1])
		}
		for form := range 3 {
			if form == 1 && len(vals) > 0 && vals[len(vals)-1] >= 1<<22 {
				continue
			}
			w := newWriter(true)
			switch form {
			case 0:
				require.NoError(t, w.addRows(vals))
			case 1:
				require.NoError(t, w.addWords(wordsOf(vals, 1)))
			default:
				bm := roaring.BitmapOf(vals...)
				bm.RunOptimize()
				require.NoError(t, w.add(bm))
			}
			require.Equal(t, uint64(want), w.ends[0], "set %d form %d", i, form)
			require.Equal(t, want != len(rb), w.v4, "set %d form %d", i, form)
		}
	}
	// Runs: roaring is smallest for every bitmap, and the part is the version 2 part.
	parts := map[bool][]byte{}
	for _, compact := range []bool{false, true} {
		w := newWriter(compact)
		for k := range uint32(5) {
			var run []uint32
			for v := k * 100_000; v < k*100_000+10_000; v++ {
				run = append(run, v)
			}
			require.NoError(t, w.addRows(run))
		}
		require.NoError(t, w.finish())
		require.Equal(t, segfmt.EncRoaringTable, w.st.spec.enc)
		var buf bytes.Buffer
		_, err := w.st.b.WriteTo(&buf)
		require.NoError(t, err)
		parts[compact] = buf.Bytes()
	}
	require.Equal(t, parts[false], parts[true])
}

// TestBitmapIndexV4Segment writes segments whose bitmap indexes take every form (empty,
// Elias-Fano, roaring runs and bitmap containers) through rows, words and roaring bitmaps:
// the same file each way, version 4 under s2 and zstd, version 2 under none, and every value's
// rows read back the same through Bitmap and EachBitmapRows; Verify passes.
func TestBitmapIndexV4Segment(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "d", MultiValue: true}}}
	const rows = 140_000
	ids := make([][]uint32, rows)
	r := rand.New(rand.NewPCG(seedFor(t, 47), 47))
	for i := range ids {
		switch {
		case i%11 == 0:
			ids[i] = nil // null: a sparse bitmap
		case i < 66_000:
			ids[i] = []uint32{1} // a run over a container boundary
		default:
			ids[i] = []uint32{2 + uint32(r.IntN(50)), 60} // scattered; 60 in every row: dense
		}
	}
	const card = 62 // ids 52..59 and 61 hold no row: empty bitmaps
	write := func(form int, comp Compression) []byte {
		w, err := newWriter(s, writerOptions{Compression: comp})
		require.NoError(t, err)
		tw, err := w.Time()
		require.NoError(t, err)
		d, err := w.Dim("d")
		require.NoError(t, err)
		require.NoError(t, d.AddNull())
		for v := 1; v < card; v++ {
			_, err := d.AddValue(string(rune('A'+v/26)) + string(rune('a'+v%26)))
			require.NoError(t, err)
		}
		bms := make([][]uint32, card)
		for i, row := range ids {
			require.NoError(t, tw.Append(int64(i)))
			require.NoError(t, d.AppendIDs(row))
			if len(row) == 0 {
				bms[0] = append(bms[0], uint32(i))
			}
			for _, id := range row {
				bms[id] = append(bms[id], uint32(i))
			}
		}
		for id, rs := range bms {
			switch form {
			case 0:
				require.NoError(t, d.WriteBitmapRows(uint32(id), rs))
			case 1:
				require.NoError(t, d.WriteBitmapWords(uint32(id), wordsOf(rs, id%2)))
			default:
				bm := roaring.BitmapOf(rs...)
				bm.RunOptimize()
				require.NoError(t, d.WriteBitmap(uint32(id), bm))
			}
		}
		var buf bytes.Buffer
		_, err = w.FinishTo(&buf)
		require.NoError(t, err)
		return buf.Bytes()
	}
	for _, comp := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
		b := write(0, comp)
		require.Equal(t, b, write(1, comp), "%s: words and rows give different files", comp)
		require.Equal(t, b, write(2, comp), "%s: roaring and rows give different files", comp)
		seg, err := newSegmentBytes(b)
		require.NoError(t, err)
		require.NoError(t, seg.Verify())
		want := segfmt.EncRoaringTableV4
		if comp == CompressionNone {
			want = segfmt.EncRoaringTable
		}
		for _, p := range seg.Info().Parts {
			if p.Kind == segfmt.PartBitmaps {
				require.Equal(t, want, p.Encoding, "%s", comp)
				t.Logf("compression %s: bitmaps %s, %d bytes", comp, p.Encoding, p.Length)
			}
		}
		version := byte(versionV4)
		if comp == CompressionNone {
			version = versionNoNulls
		}
		require.Equal(t, version, b[len(magic)])
		col, err := seg.Dim("d")
		require.NoError(t, err)
		forms := map[string]int{}
		for id := range uint32(card) {
			raw, err := col.bitmapBytes(id)
			require.NoError(t, err)
			switch {
			case len(raw) == 0:
				forms["empty"]++
			case raw[0] == efTag && want == segfmt.EncRoaringTableV4:
				forms["elias-fano"]++
			default:
				forms["roaring"]++
			}
			bm, err := col.Bitmap(id)
			require.NoError(t, err)
			var got []uint32
			require.NoError(t, col.EachBitmapRows(id, make([]uint32, 1000), func(rs []uint32) error {
				got = append(got, rs...)
				return nil
			}))
			require.Equal(t, bm.ToArray(), append([]uint32{}, got...), "id %d", id)
		}
		t.Logf("compression %s: forms %v", comp, forms)
		if comp != CompressionNone {
			require.Equal(t, map[string]int{"empty": 9, "elias-fano": 51, "roaring": 2}, forms)
		}
		require.NoError(t, seg.Close())
	}
}

// TestFlipBitmapsV4 flips each byte of a version 4 bitmap index part and fixes the CRCs, so
// the damage reaches the decoder: Open or Verify fails with ErrCorrupt (Verify compares the
// bitmaps with the ids, so any other set of rows is caught), and reading never panics.
func TestFlipBitmapsV4(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "d"}}}
	g := newRowGen(5, s)
	rows := make([]Row, 300)
	for i := range rows {
		rows[i] = g.next()
	}
	good := writeRows(t, s, rows, writerOptions{})
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	var part segfmt.PartInfo
	for _, p := range seg.Info().Parts {
		if p.Kind == segfmt.PartBitmaps {
			part = p
		}
	}
	require.Equal(t, segfmt.EncRoaringTableV4, part.Encoding)
	b := append([]byte(nil), good...)
	for i := part.Offset; i < part.Offset+part.Length; i++ {
		for _, x := range []byte{0x01, 0x80} {
			b[i] ^= x
			fixed := fixCRCs(b)
			require.NotEqual(t, good, fixed)
			seg, err := newSegmentBytes(fixed)
			if err != nil {
				require.ErrorIs(t, err, ErrCorrupt)
			} else {
				err := seg.Verify()
				require.Error(t, err, "flip %#x at %d (bitmap part byte %d of %d)", x, i, i-part.Offset, part.Length)
				require.True(t, errors.Is(err, ErrCorrupt), "%v", err)
				_ = readAll(seg)
			}
			b[i] ^= x
		}
	}
}

// FuzzDecodeBitmapV4 decodes arbitrary bytes as one bitmap of a version 4 part: an error
// wrapping ErrCorrupt, or strictly increasing values below the limit, the same whole and in
// pieces; and decodeBitmap4 agrees.
func FuzzDecodeBitmapV4(f *testing.F) {
	for _, vals := range efShapes()[:8] {
		f.Add(appendEFRows(nil, vals))
	}
	f.Add([]byte{})
	f.Add(appendEFRows(nil, []uint32{3, 10, 11, 40, 1000, 1001, 1002, 70_000}))
	f.Add(roaringBytes(f, []uint32{1, 2, 3, 100_000}))
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 1 << 20
		d := roaringDecoder{}
		err := d.decodeStored(b, true, limit, nil)
		bm, berr := decodeBitmap4(b, limit)
		if berr != nil && !errors.Is(berr, ErrCorrupt) {
			t.Fatalf("decodeBitmap4: %v does not wrap ErrCorrupt", berr)
		}
		if len(b) > 0 && b[0] != efTag {
			// The roaring form: decodeBitmap4 is roaring's own reader, which checks less than
			// roaringdec.go (a run container's header cardinality, for one), as in version 2.
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v does not wrap ErrCorrupt", err)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || !errors.Is(berr, ErrCorrupt) {
				t.Fatalf("%v / %v does not wrap ErrCorrupt", err, berr)
			}
			return
		}
		if berr != nil {
			t.Fatalf("decodes, yet decodeBitmap4 fails: %v", berr)
		}
		for i := range d.out {
			if d.out[i] >= limit || i > 0 && d.out[i] <= d.out[i-1] {
				t.Fatalf("value %d at %d: not increasing or not below the limit", d.out[i], i)
			}
		}
		if bm.GetCardinality() != uint64(len(d.out)) {
			t.Fatalf("decodeBitmap4 holds %d values, the decoder gave %d", bm.GetCardinality(), len(d.out))
		}
		var pieces []uint32
		p := roaringDecoder{out: make([]uint32, 0, 3), piece: 3}
		if err := p.eachStored(b, true, limit, func(rs []uint32) error { pieces = append(pieces, rs...); return nil }); err != nil || len(pieces) != len(d.out) {
			t.Fatalf("in pieces: %d values, %v; whole: %d values", len(pieces), err, len(d.out))
		}
		// An Elias-Fano form that decodes is the one the writer writes for its values.
		if len(d.out) > 0 && b[0] == efTag && !bytes.Equal(appendEFRows(nil, d.out), b) {
			t.Fatalf("decodes, yet re-encodes differently")
		}
	})
}

// goldenV4BitmapsPath is the golden rows (goldenRows) written with s2 chunks: its bitmap index
// parts are in the version 4 forms (segfmt.EncRoaringTableV4).
var goldenV4BitmapsPath = filepath.Join("testdata", "golden-v4-bitmaps.seg")

func goldenV4BitmapsBytes(t testing.TB) []byte {
	s, rows := goldenRows()
	return writeColumns(t, s, rows, writerOptions{Compression: CompressionS2, ChunkRows: 3})
}

// TestGoldenV4Bitmaps reads the pinned version 4 segment: it verifies and holds the golden
// rows, and the writer still writes its bitmap index parts byte for byte (the other parts may
// take other version 4 encodings without touching this test). Run with -update to rewrite it
// after a deliberate change.
func TestGoldenV4Bitmaps(t *testing.T) {
	if *update {
		require.NoError(t, os.WriteFile(goldenV4BitmapsPath, goldenV4BitmapsBytes(t), 0o644))
	}
	seg, err := Open(goldenV4BitmapsPath)
	require.NoError(t, err)
	defer seg.Close()
	require.NoError(t, seg.Verify())
	s, rows := goldenRows()
	checkSegment(t, seg, s, rows, marshalSketches(t, s, rows))
	want, err := os.ReadFile(goldenV4BitmapsPath)
	require.NoError(t, err)
	require.Equal(t, byte(versionV4), want[len(magic)])
	fresh, err := newSegmentBytes(goldenV4BitmapsBytes(t))
	require.NoError(t, err)
	var n int
	for _, p := range seg.Info().Parts {
		if p.Kind != segfmt.PartBitmaps {
			continue
		}
		n++
		require.Equal(t, segfmt.EncRoaringTableV4, p.Encoding, "column %s", p.Column)
		for _, q := range fresh.Info().Parts {
			if q.Column == p.Column && q.Kind == segfmt.PartBitmaps {
				require.Equal(t, q.Encoding, p.Encoding)
				require.Equal(t, hex.Dump(want[p.Offset:p.Offset+p.Length]), hex.Dump(fresh.src.data[q.Offset:q.Offset+q.Length]), "column %s: the bitmap index bytes changed (run with -update if deliberate)", p.Column)
			}
		}
	}
	require.Equal(t, 2, n) // page and tags; country has no bitmap index
}

// TestBitmapsWriterMappedSameBytes: a large bitmap encoded in a buffer outside the Go heap
// (mapBuf) gives the part the heap's encoding gives, byte for byte, in both forms.
func TestBitmapsWriterMappedSameBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t, 44), 44))
	sets := efShapes()
	for range 30 {
		sets = append(sets, randomRows(rng))
	}
	dense := make([]uint32, 300_000) // roaring's bitmap containers
	for i := range dense {
		dense[i] = uint32(i + i/7)
	}
	sets = append(sets, dense)
	saved := mappedBitmapRows
	t.Cleanup(func() { mappedBitmapRows = saved })
	for _, compact := range []bool{false, true} {
		parts := map[bool][]byte{}
		ends := map[bool][]uint64{}
		for _, mapped := range []bool{false, true} {
			mappedBitmapRows = map[bool]int{false: 1 << 40, true: 0}[mapped]
			before := mappedBitmaps.Load()
			b, err := medium.NewHeap().NewBytes()
			require.NoError(t, err)
			w := &bitmapsWriter{st: &stage{b: b, spec: partSpec{1, segfmt.PartBitmaps, segfmt.EncRoaringTable}}, compact: compact}
			for _, vals := range sets {
				require.NoError(t, w.addRows(vals))
			}
			require.NoError(t, w.finish())
			var buf bytes.Buffer
			_, err = w.st.b.WriteTo(&buf)
			require.NoError(t, err)
			parts[mapped], ends[mapped] = buf.Bytes(), w.ends
			if runtime.GOOS == "linux" {
				require.Equal(t, mapped, mappedBitmaps.Load() > before, "compact %v, mapped %v", compact, mapped)
			}
		}
		require.Equal(t, ends[false], ends[true], "compact %v", compact)
		require.Equal(t, parts[false], parts[true], "compact %v", compact)
	}
}
