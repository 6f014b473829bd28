package columns

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/internal/segsurgery"
)

// deriveSchema has a dimension of each kind deriveIDs decides on: derived under zstd (zipf,
// sorted, two with nulls, card at the limit) and not (one past the limit, multi-value, no
// bitmap index).
func deriveSchema() Schema {
	return Schema{
		Dimensions: []Dimension{
			{Name: "zipf"}, {Name: "sorted"}, {Name: "two"}, {Name: "limit"}, {Name: "over"},
			{Name: "multi", MultiValue: true}, {Name: "nobm", NoBitmapIndex: true},
		},
		Metrics: []Metric{{Name: "count", Aggregator: agg.Count}},
	}
}

// deriveRows returns n rows for deriveSchema: Zipf ids (sparse and dense bitmaps: Elias-Fano,
// roaring arrays and bitmap containers), values in long runs (run containers), two values
// and nulls, and uniform ids over derivedMaxCard and derivedMaxCard+1 values.
func deriveRows(seed uint64, n int) []Row {
	rng := rand.New(rand.NewPCG(seed, 7))
	zipf := zipfIDs(rng, n, 200)
	rows := make([]Row, n)
	for i := range rows {
		two := []string{"a"}
		switch r := rng.IntN(10); {
		case r == 0:
			two = nil
		case r < 4:
			two = []string{"b"}
		}
		rows[i] = Row{
			Time: int64(i) * 10,
			Dims: [][]string{
				{fmt.Sprintf("z%03d", zipf[i])},
				{fmt.Sprintf("s%03d", (i/3000)%150)},
				two,
				{fmt.Sprintf("l%04d", (i*7919)%derivedMaxCard)},
				{fmt.Sprintf("o%04d", (i*7919)%(derivedMaxCard+1))},
				{fmt.Sprint("m", rng.IntN(5)), fmt.Sprint("m", 5+rng.IntN(5))},
				{fmt.Sprint("n", rng.IntN(40))},
			},
			Metrics: []Value{{Long: 1}},
		}
	}
	return rows
}

// TestDerivedIDs: under zstd the ids of the single-value dimensions with a bitmap index and
// at most derivedMaxCard values are derived (no bytes a chunk), the others stored; the segment
// is version 6, reads back every row, passes Verify, mapped and read through ReadAt; a cursor
// read in any order, backwards included, gives each row's value. With StoreIDs, or under s2,
// nothing is derived and the ids read the same.
func TestDerivedIDs(t *testing.T) {
	s := deriveSchema()
	n, chunks := 2*maxChunkRows+1234, 3
	if testing.Short() {
		n, chunks = maxChunkRows+1234, 2
	}
	rows := deriveRows(seedFor(t, 0), n)
	sketches := marshalSketches(t, s, rows)
	b := writeRows(t, s, rows, writerOptions{Compression: CompressionZstd})
	require.Equal(t, b, writeColumns(t, s, rows, writerOptions{Compression: CompressionZstd}), "rows and the column writers write the same bytes")
	path := filepath.Join(t.TempDir(), "d.seg")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	mapped, err := Open(path)
	require.NoError(t, err)
	defer mapped.Close()
	read, err := NewSegment(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	require.Nil(t, read.src.data, "read through ReadAt, not mapped")
	for name, seg := range map[string]*Segment{"mapped": mapped, "readat": read} {
		require.Equal(t, byte(versionV6), seg.f.version, name)
		enc := partEncodings(seg)
		for _, d := range []string{"zipf", "sorted", "two", "limit"} {
			require.Equal(t, segfmt.EncIDChunksDerived, enc[d+"/ids"], "%s: %s", name, d)
			col, err := seg.Dim(d)
			require.NoError(t, err)
			require.Equal(t, chunks, col.ix.chunks(), "%s: %s: one chunk every %d rows", name, d, maxChunkRows)
		}
		require.Equal(t, segfmt.EncIDChunksV4, enc["over/ids"], name)
		require.Equal(t, segfmt.EncMultiIDChunks, enc["multi/ids"], name)
		require.Equal(t, segfmt.EncIDChunksV4, enc["nobm/ids"], name)
		checkSegment(t, seg, s, rows, sketches)
		readDerivedAnyOrder(t, seg, rows, seedFor(t, 1))
	}
	forms := bitmapForms(t, mapped, "zipf", "sorted", "two")
	for _, f := range []string{"ef", "array", "bitmap", "run"} {
		require.Positive(t, forms[f], "no %s bitmap or container among the derived dimensions: %v", f, forms)
	}

	for _, opts := range []writerOptions{{Compression: CompressionZstd, StoreIDs: true}, {Compression: CompressionS2}} {
		o := writeRows(t, s, rows, opts)
		seg, err := newSegmentBytes(o)
		require.NoError(t, err)
		require.Less(t, seg.f.version, byte(versionV6))
		for k, e := range partEncodings(seg) {
			require.NotEqual(t, segfmt.EncIDChunksDerived, e, "%+v: %s", opts, k)
		}
		checkSegment(t, seg, s, rows, sketches)
		if opts.Compression == CompressionZstd {
			t.Logf("%d rows: %d bytes with the ids derived, %d stored", len(rows), len(b), len(o))
			require.Less(t, len(b), len(o))
		}
	}
}

// readDerivedAnyOrder reads every single-value dimension of seg through one cursor at rows in
// a random order, then backwards, and compares each row's value with rows'.
func readDerivedAnyOrder(t *testing.T, seg *Segment, rows []Row, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	order := rng.Perm(len(rows))[:200]
	for r := len(rows) - 1; r >= 0; r -= 9973 {
		order = append(order, r)
	}
	for i, d := range seg.Schema().Dimensions {
		if d.MultiValue {
			continue
		}
		col, err := seg.Dim(d.Name)
		require.NoError(t, err)
		cur := col.Cursor()
		for _, r := range order {
			got, err := cur.Values(r)
			require.NoError(t, err, "%s row %d", d.Name, r)
			want := rows[r].Dims[i]
			if len(want) == 0 {
				want = nil
			}
			require.Equal(t, want, got, "%s row %d", d.Name, r)
		}
		cur.Release()
	}
}

// bitmapForms counts the stored forms of the named dimensions' bitmaps: "empty", Elias-Fano
// ("ef") and the roaring containers by kind ("array", "bitmap", "run").
func bitmapForms(t *testing.T, seg *Segment, dims ...string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, name := range dims {
		col, err := seg.Dim(name)
		require.NoError(t, err)
		for id := 0; id < col.Cardinality(); id++ {
			raw, err := col.bitmapBytes(uint32(id))
			require.NoError(t, err)
			switch {
			case col.bms.v4 && len(raw) == 0:
				out["empty"]++
			case col.bms.v4 && raw[0] == efTag:
				out["ef"]++
			default:
				header, runFlags, _, _, err := roaringHeader(raw)
				require.NoError(t, err)
				for i := 0; i < len(header)/4; i++ {
					card := int(binary.LittleEndian.Uint16(header[4*i+2:])) + 1
					switch {
					case runFlags != nil && runFlags[i/8]&(1<<(i%8)) != 0:
						out["run"]++
					case card <= roaringArrayMax:
						out["array"]++
					default:
						out["bitmap"]++
					}
				}
			}
		}
	}
	return out
}

// TestDerivedEmptyBitmap: a dictionary value no row holds has the empty bitmap (version 4
// form), and the derived ids read around it.
func TestDerivedEmptyBitmap(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "d"}}}
	w, err := newWriter(s, writerOptions{Compression: CompressionZstd})
	require.NoError(t, err)
	tw, err := w.Time()
	require.NoError(t, err)
	dw, err := w.Dim("d")
	require.NoError(t, err)
	for _, v := range []string{"a", "b", "c"} {
		_, err := dw.AddValue(v)
		require.NoError(t, err)
	}
	const n = 70_000
	var a, c []uint32
	for r := range n {
		require.NoError(t, tw.Append(int64(r)))
		id := uint32(0)
		if r%3 == 0 {
			id = 2
			c = append(c, uint32(r))
		} else {
			a = append(a, uint32(r))
		}
		require.NoError(t, dw.AppendID(id))
	}
	require.NoError(t, dw.WriteBitmapRows(0, a))
	require.NoError(t, dw.WriteBitmapRows(1, nil))
	require.NoError(t, dw.WriteBitmapRows(2, c))
	var buf bytes.Buffer
	_, err = w.FinishTo(&buf)
	require.NoError(t, err)
	seg, err := newSegmentBytes(buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, segfmt.EncIDChunksDerived, partEncodings(seg)["d/ids"])
	require.Equal(t, 1, bitmapForms(t, seg, "d")["empty"])
	require.NoError(t, seg.Verify())
	col, err := seg.Dim("d")
	require.NoError(t, err)
	cur := col.Cursor()
	for r := range n {
		ids, err := cur.IDs(r)
		require.NoError(t, err)
		require.Equal(t, uint32(2*b2i(r%3 == 0)), ids[0], "row %d", r)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestDerivedWriterChecks: when the writer derives a dimension's ids, bitmaps that do not hold
// exactly the rows' ids are refused in every build (not only with the invariants tag), even
// when every count agrees: a row moved from one bitmap to another.
func TestDerivedWriterChecks(t *testing.T) {
	for _, storeIDs := range []bool{false, true} {
		s := Schema{Dimensions: []Dimension{{Name: "d"}}}
		w, err := newWriter(s, writerOptions{Compression: CompressionZstd, StoreIDs: storeIDs})
		require.NoError(t, err)
		tw, err := w.Time()
		require.NoError(t, err)
		dw, err := w.Dim("d")
		require.NoError(t, err)
		for _, v := range []string{"a", "b"} {
			_, err := dw.AddValue(v)
			require.NoError(t, err)
		}
		for r := range 10 {
			require.NoError(t, tw.Append(int64(r)))
			require.NoError(t, dw.AppendID(uint32(r%2)))
		}
		// Rows 0 and 1 swapped: each bitmap keeps its count.
		require.NoError(t, dw.WriteBitmapRows(0, []uint32{1, 2, 4, 6, 8}))
		require.NoError(t, dw.WriteBitmapRows(1, []uint32{0, 3, 5, 7, 9}))
		_, err = w.FinishTo(&bytes.Buffer{})
		if storeIDs && !invariants {
			require.NoError(t, err, "stored ids: the bitmaps are an index, checked by count in this build")
			continue
		}
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, "bitmaps do not hold the rows' ids")
	}
}

// derivedFile is a small segment with one derived dimension, taken apart.
func derivedFile(t *testing.T) (good []byte, f *segsurgery.File, bms []*roaring.Bitmap, k int) {
	t.Helper()
	s := Schema{Dimensions: []Dimension{{Name: "d"}}}
	rng := rand.New(rand.NewPCG(seedFor(t, 5), 1))
	rows := make([]Row, 3000)
	for i := range rows {
		v := []string{fmt.Sprint("v", rng.IntN(6))}
		if rng.IntN(9) == 0 {
			v = nil
		}
		rows[i] = Row{Time: int64(i), Dims: [][]string{v}}
	}
	good = writeRows(t, s, rows, writerOptions{Compression: CompressionZstd})
	f, err := segsurgery.Parse(good)
	require.NoError(t, err)
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	col, err := seg.Dim("d")
	require.NoError(t, err)
	require.True(t, col.derived)
	for id := 0; id < col.Cardinality(); id++ {
		bm, err := col.Bitmap(uint32(id))
		require.NoError(t, err)
		bms = append(bms, bm)
	}
	k = -1
	for i, p := range f.Parts {
		if p.Column == 1 && p.Kind == segfmt.PartBitmaps {
			k = i
		}
	}
	require.GreaterOrEqual(t, k, 0)
	return good, f, bms, k
}

// withBitmaps returns f with the bitmap index of part k replaced by bms (portable roaring,
// encoding roaring-table) and every CRC recomputed.
func withBitmaps(f *segsurgery.File, k int, bms []*roaring.Bitmap) []byte {
	var out bytes.Buffer
	ends := make([]uint64, len(bms))
	for i, bm := range bms {
		if _, err := bm.WriteTo(&out); err != nil {
			panic(err)
		}
		ends[i] = uint64(out.Len())
	}
	b := out.Bytes()
	for _, e := range ends {
		b = binary.LittleEndian.AppendUint64(b, e)
	}
	g := *f
	g.Parts = append([]segsurgery.Part(nil), f.Parts...)
	g.Parts[k].Data = binary.LittleEndian.AppendUint32(b, uint32(len(bms)))
	g.Parts[k].Enc = segfmt.EncRoaringTable
	return g.Assemble()
}

// TestDerivedPartition: bitmaps that do not partition the rows, every checksum agreeing, are
// corrupt on every read path (a cursor, a bitmap read alone, Verify): a row in two bitmaps, a
// row in none, a row past the end, the null rows other than the null id's bitmap. Deriving
// finds the first three even when the checks are skipped (trusted bytes), without a panic.
// The intact bitmaps re-encoded read as before, and so does a row moved to another bitmap:
// the bitmaps still partition the rows, a segment that holds other values and passes Verify
// (stored ids and their bitmaps would disagree there; derived ids have no second copy).
func TestDerivedPartition(t *testing.T) {
	good, f, bms, k := derivedFile(t)
	clone := func() []*roaring.Bitmap {
		out := make([]*roaring.Bitmap, len(bms))
		for i, bm := range bms {
			out[i] = bm.Clone()
		}
		return out
	}
	first := func(bm *roaring.Bitmap) uint32 { return bm.Minimum() }
	want, err := newSegmentBytes(good)
	require.NoError(t, err)
	intact, err := readEveryColumn(want)
	require.NoError(t, err)
	for _, name := range []string{"intact", "moved"} {
		b := clone()
		if name == "moved" {
			r := first(b[2])
			b[2].Remove(r)
			b[3].Add(r)
		}
		seg, err := newSegmentBytes(withBitmaps(f, k, b))
		require.NoError(t, err)
		require.NoError(t, seg.Verify(), name)
		got, err := readEveryColumn(seg)
		require.NoError(t, err)
		require.Equal(t, name == "intact", got == intact, name)
	}
	cases := map[string]func(b []*roaring.Bitmap){
		"twice":     func(b []*roaring.Bitmap) { b[2].Add(first(b[3])) },
		"none":      func(b []*roaring.Bitmap) { b[2].Remove(first(b[2])) },
		"pastend":   func(b []*roaring.Bitmap) { b[1].Add(3000) },
		"nullmoved": func(b []*roaring.Bitmap) { r := first(b[0]); b[0].Remove(r); b[1].Add(r) },
	}
	for name, edit := range cases {
		b := clone()
		edit(b)
		file := withBitmaps(f, k, b)
		reads := []string{"cursor", "bitmap", "verify", "trusted"}
		if name == "nullmoved" {
			reads = reads[:3] // a partition still: only the null rows disagree
		}
		for _, read := range reads {
			seg, err := newSegmentBytes(file)
			require.NoError(t, err, name)
			col, err := seg.Dim("d")
			require.NoError(t, err, name)
			switch read {
			case "cursor":
				_, err = col.Cursor().IDs(0)
			case "bitmap":
				_, err = col.Bitmap(4)
			case "verify":
				err = seg.Verify()
			case "trusted":
				seg.markStructPassed()
				cur := col.Cursor()
				for r := 0; r < seg.Rows() && err == nil; r++ {
					_, err = cur.IDs(r)
				}
			}
			require.ErrorIs(t, err, ErrCorrupt, "%s: %s", name, read)
			require.ErrorContains(t, err, `column "d" part `, "%s: %s", name, read)
			t.Logf("%s: %s: %v", name, read, err)
		}
	}
}

// TestFooterVersion6 pins the rule of version 6: an ids part may be id-chunks-derived only in
// a version 6 segment, which has at least one such part; a reader of version 5 refuses it.
func TestFooterVersion6(t *testing.T) {
	good, _, _, _ := derivedFile(t)
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	require.Equal(t, uint8(versionV6), seg.f.version)
	idx := partWith(t, seg, segfmt.EncIDChunksDerived)
	edited := footerEditor(t, seg)
	decode := func(edit func(f *footer)) error {
		_, err := edited(edit)
		return err
	}
	require.NoError(t, decode(func(f *footer) {}))
	err = decode(func(f *footer) { f.version = versionV5 })
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "encoding id-chunks-derived, want id-chunks")
	err = decode(func(f *footer) { f.parts[idx].Encoding = segfmt.EncIDChunksV4 })
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "version 6 without a part in a version 6 encoding")
	require.ErrorIs(t, decode(func(f *footer) { f.parts[0].Encoding = segfmt.EncIDChunksDerived }), ErrCorrupt)

	// A dimension without a bitmap index cannot derive its ids.
	sc := seg.f.schema
	sc.Dimensions = append([]Dimension(nil), sc.Dimensions...)
	sc.Dimensions[0].NoBitmapIndex = true
	require.ErrorIs(t, decode(func(f *footer) { f.schema = sc }), ErrCorrupt)

	fb, err := appendFooter(nil, seg.f)
	require.NoError(t, err)
	last := seg.f.parts[len(seg.f.parts)-1]
	fb[0] = maxVersion + 1
	_, err = decodeFooter(fb, last.Offset+last.Length)
	require.ErrorIs(t, err, ErrVersion)
}

// TestGoldenVersion6 pins a version 6 segment (testdata/golden-v6.seg): it must keep reading to
// the same rows; the writer must keep writing the same bytes (run with -update after a
// deliberate change).
func TestGoldenVersion6(t *testing.T) {
	s := deriveSchema()
	rows := deriveRows(1, 5000)
	got := writeRows(t, s, rows, writerOptions{Compression: CompressionZstd, ChunkRows: 700})
	want, seg := goldenFile(t, "golden-v6.seg", got)
	require.Equal(t, byte(versionV6), seg.f.version)
	require.Equal(t, segfmt.EncIDChunksDerived, partEncodings(seg)["zipf/ids"])
	checkSegment(t, seg, s, rows, marshalSketches(t, s, rows))
	require.True(t, bytes.Equal(want, got), "the version 6 segment bytes changed (run with -update if deliberate)")
}

// FuzzDerivedTrusted reads the ids of the seeds' derived dimensions with the structural checks
// skipped (as trusted bytes are read), from mutated bytes whose CRCs are fixed: deriving must
// never panic or read out of bounds, and its errors wrap ErrCorrupt.
func FuzzDerivedTrusted(f *testing.F) {
	for _, name := range []string{"testdata/seeds/v6-zstd.seg", "testdata/golden-v6.seg"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		seg, err := newSegmentBytes(fixCRCs(data))
		if err != nil {
			return
		}
		seg.markStructPassed()
		for _, dc := range seg.dims {
			if dc == nil || !dc.derived {
				continue
			}
			cur := dc.Cursor()
			for r := 0; r < seg.Rows(); r++ {
				if _, err := cur.IDs(r); err != nil {
					if !errors.Is(err, ErrCorrupt) {
						t.Fatalf("row %d: %v does not wrap ErrCorrupt", r, err)
					}
					break
				}
			}
			cur.Release()
		}
	})
}
