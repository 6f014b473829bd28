package merger

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/internal/segsurgery"
)

// Segment surgery for the tests of structural faults: a segment file taken apart into its
// parts and footer fields, parts replaced by bytes the test encodes itself (layouts in
// columns/doc.go, always uncompressed), and put back together with every offset and CRC
// recomputed, so that the file opens and its checksums agree with the fault.

// segFile is a segment file taken apart (internal/segsurgery).
type segFile struct{ *segsurgery.File }

// parseSegFile takes b apart (it must be a well-formed segment).
func parseSegFile(t testing.TB, b []byte) *segFile {
	t.Helper()
	f, err := segsurgery.Parse(b)
	require.NoError(t, err)
	return &segFile{f}
}

// assemble puts the file back together, every offset and CRC recomputed.
func (f *segFile) assemble() []byte { return f.Assemble() }

// set replaces the bytes of column's part of kind.
func (f *segFile) set(t testing.TB, column int, kind segfmt.PartKind, data []byte) {
	t.Helper()
	for i := range f.Parts {
		if f.Parts[i].Column == column && f.Parts[i].Kind == kind {
			f.Parts[i].Data = data
			if enc, ok := encodingV2[f.Parts[i].Enc]; ok {
				f.Parts[i].Enc = enc // the encoders here write the version 2 layouts
			}
			f.Version = f.minVersion()
			return
		}
	}
	t.Fatalf("no part %s of column %d", kind, column)
}

// encodingV2 maps each version 4 or 5 encoding to the version 2 encoding it replaces.
var encodingV2 = map[segfmt.Encoding]segfmt.Encoding{
	segfmt.EncIDChunksV5:     segfmt.EncIDChunks,
	segfmt.EncLongChunksV4:   segfmt.EncLongChunks,
	segfmt.EncDoubleChunksV4: segfmt.EncDoubleChunks,
	segfmt.EncIDChunksV4:     segfmt.EncIDChunks,
	segfmt.EncRoaringTableV4: segfmt.EncRoaringTable,
}

// minVersion returns the format version the parts need, as the writer decides it: 5 with a
// part in a version 5 encoding, else 4 with a part in a version 4 encoding, else 3 with a
// metric's nulls part, else 2 (1 stays 1).
func (f *segFile) minVersion() byte {
	if f.Version < 2 {
		return f.Version
	}
	for _, p := range f.Parts {
		if p.Enc == segfmt.EncIDChunksV5 {
			return 5
		}
	}
	for _, p := range f.Parts {
		if _, ok := encodingV2[p.Enc]; ok {
			return 4
		}
	}
	var s columns.Schema
	if err := json.Unmarshal(f.Schema, &s); err == nil {
		for _, p := range f.Parts {
			if p.Kind == segfmt.PartNulls && p.Column > len(s.Dimensions) {
				return 3
			}
		}
	}
	return 2
}

// surgeryChunkRows is the rows per chunk of the chunked parts the tests encode: small, so
// that faults land in chunks other than the first too.
const surgeryChunkRows = 64

// chunkedPart frames raw chunks (each of the rows firsts gives) into a chunked part.
func chunkedPart(chunks [][]byte, firsts []int, rows int) []byte {
	var out []byte
	offs := make([]int, len(chunks))
	for i, c := range chunks {
		offs[i] = len(out)
		out = append(out, 0) // codec none
		out = append(out, c...)
	}
	for i := range chunks {
		out = binary.LittleEndian.AppendUint64(out, uint64(offs[i]))
		out = binary.LittleEndian.AppendUint64(out, uint64(firsts[i]))
	}
	out = binary.LittleEndian.AppendUint32(out, uint32(len(chunks)))
	return binary.LittleEndian.AppendUint64(out, uint64(rows))
}

// chunkRows calls enc for every run of surgeryChunkRows rows of n and frames the chunks.
func chunkRows(n int, enc func(lo, hi int) []byte) []byte {
	var chunks [][]byte
	var firsts []int
	for lo := 0; lo < n; lo += surgeryChunkRows {
		hi := min(n, lo+surgeryChunkRows)
		chunks = append(chunks, enc(lo, hi))
		firsts = append(firsts, lo)
	}
	return chunkedPart(chunks, firsts, n)
}

// plainLongs is a plain int64 chunk.
func plainLongs(dst []byte, vals []int64) []byte {
	dst = append(dst, 0)
	dst = binary.AppendUvarint(dst, uint64(len(vals)))
	for _, v := range vals {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(v))
	}
	return dst
}

// longPart encodes a long column.
func longPart(vals []int64) []byte {
	return chunkRows(len(vals), func(lo, hi int) []byte { return plainLongs(nil, vals[lo:hi]) })
}

// blobPart encodes a blob column (raw strings, sketches, tails).
func blobPart(vals [][]byte) []byte {
	return chunkRows(len(vals), func(lo, hi int) []byte {
		lens := make([]int64, 0, hi-lo)
		for _, v := range vals[lo:hi] {
			lens = append(lens, int64(len(v)))
		}
		out := plainLongs(nil, lens)
		for _, v := range vals[lo:hi] {
			out = append(out, v...)
		}
		return out
	})
}

// idWidth is the bits ids of a dictionary of card values are packed at.
func idWidth(card int) int {
	if card <= 1 {
		return 0
	}
	return bits.Len64(uint64(card - 1))
}

// packBits packs vals at w bits each, a little-endian bit stream.
func packBits(dst []byte, vals []uint32, w int) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, (len(vals)*w+7)/8)...)
	out := dst[start:]
	for i, v := range vals {
		for b := 0; b < w; b++ {
			if v>>b&1 != 0 {
				bit := i*w + b
				out[bit/8] |= 1 << (bit % 8)
			}
		}
	}
	return dst
}

// idsPart encodes a dictionary dimension's ids (rows[r]: row r's ids) for a dictionary of
// card values.
func idsPart(rows [][]uint32, multi bool, card int) []byte {
	w := idWidth(card)
	return chunkRows(len(rows), func(lo, hi int) []byte {
		out := binary.AppendUvarint(nil, uint64(hi-lo))
		if !multi {
			ids := make([]uint32, 0, hi-lo)
			for _, r := range rows[lo:hi] {
				ids = append(ids, r[0])
			}
			return packBits(append(out, byte(w)), ids, w)
		}
		var counts, all []uint32
		cmax := uint32(0)
		for _, r := range rows[lo:hi] {
			counts = append(counts, uint32(len(r)-1))
			cmax = max(cmax, uint32(len(r)-1))
			all = append(all, r...)
		}
		out = binary.AppendUvarint(out, uint64(len(all)))
		cw := bits.Len32(cmax)
		out = packBits(append(out, byte(cw)), counts, cw)
		return packBits(append(out, byte(w)), all, w)
	})
}

// bitmapsPart encodes a bitmap index.
func bitmapsPart(t testing.TB, bms []*roaring.Bitmap) []byte {
	t.Helper()
	var out bytes.Buffer
	ends := make([]uint64, len(bms))
	for i, bm := range bms {
		_, err := bm.WriteTo(&out)
		require.NoError(t, err)
		ends[i] = uint64(out.Len())
	}
	b := out.Bytes()
	for _, e := range ends {
		b = binary.LittleEndian.AppendUint64(b, e)
	}
	return binary.LittleEndian.AppendUint32(b, uint32(len(bms)))
}

// dictPart encodes a dictionary of the non-null values vals, in the order given (sorted or
// not: the encoding front-codes whatever it gets).
func dictPart(vals []string, hasNull bool) []byte {
	var out []byte
	var starts []uint32
	for i, v := range vals {
		if i%16 == 0 {
			starts = append(starts, uint32(len(out)))
			out = binary.AppendUvarint(out, uint64(len(v)))
			out = append(out, v...)
			continue
		}
		prev := vals[i-1]
		p := 0
		for p < len(prev) && p < len(v) && prev[p] == v[p] {
			p++
		}
		out = binary.AppendUvarint(out, uint64(p))
		out = binary.AppendUvarint(out, uint64(len(v)-p))
		out = append(out, v[p:]...)
	}
	for _, s := range starts {
		out = binary.LittleEndian.AppendUint32(out, s)
	}
	out = binary.LittleEndian.AppendUint32(out, uint32(len(vals)))
	flags := byte(0)
	if hasNull {
		flags = 1
	}
	return append(out, flags, 16)
}

// TestSurgeryRoundTrip: every part re-encoded by the surgery encoders from what a segment
// reads back gives a segment that verifies and reads the same rows (the encoders write what
// columns reads, so that a test's fault is the only fault).
func TestSurgeryRoundTrip(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed))
	dir := t.TempDir()
	for n := 0; n < 20; n++ {
		rc := newRandCase(rng, 1, 300)
		seg := writeSegment(t, dir, fmt.Sprintf("rt-%d.seg", n), rc.Schemas[0], rc.Rows[0])
		m := readModel(t, seg)
		f := m.file
		m.encodeAll(t, f)
		b := f.assemble()
		seg2, err := columns.NewSegment(bytes.NewReader(b), int64(len(b)))
		require.NoError(t, err)
		require.NoError(t, seg2.Verify())
		require.Equal(t, readRows(t, seg), readRows(t, seg2))
	}
}

// segModel is what the surgery tests change in a segment: its columns decoded (times, the
// dictionary dimensions, raw dimensions, sketches, doubleSum tails), each re-encoded into
// its parts by encode*.
type segModel struct {
	file     *segFile
	schema   columns.Schema
	rows     int
	times    []int64
	dims     []*dimModel // per dimension; nil for a raw one
	raws     []*rawModel // per dimension; nil for a dictionary one
	sketches map[int][][]byte
	tails    map[int][][]byte
}

type dimModel struct {
	col     int
	dim     columns.Dimension
	vals    []string // the non-null values, id order
	hasNull bool
	ids     [][]uint32
	bms     []*roaring.Bitmap // nil without a bitmap index
	nulls   *roaring.Bitmap
}

func (d *dimModel) card() int {
	if d.hasNull {
		return len(d.vals) + 1
	}
	return len(d.vals)
}

type rawModel struct {
	col   int
	vals  [][]byte
	nulls *roaring.Bitmap
}

// readModel reads seg (opened from a file) into a model.
func readModel(t testing.TB, seg *columns.Segment) *segModel {
	t.Helper()
	b, err := os.ReadFile(seg.Name())
	require.NoError(t, err)
	m := &segModel{file: parseSegFile(t, b), schema: seg.Schema(), rows: seg.Rows(),
		sketches: map[int][][]byte{}, tails: map[int][][]byte{}}
	tc := seg.Time().Cursor()
	for r := range m.rows {
		v, err := tc.At(r)
		require.NoError(t, err)
		m.times = append(m.times, v)
	}
	m.dims = make([]*dimModel, len(m.schema.Dimensions))
	m.raws = make([]*rawModel, len(m.schema.Dimensions))
	for i, dim := range m.schema.Dimensions {
		if dim.Raw {
			rc, err := seg.Raw(dim.Name)
			require.NoError(t, err)
			rm := &rawModel{col: 1 + i}
			rm.nulls, err = rc.Nulls()
			require.NoError(t, err)
			cur := rc.Cursor()
			for r := range m.rows {
				v, _, err := cur.Bytes(r)
				require.NoError(t, err)
				rm.vals = append(rm.vals, append([]byte{}, v...))
			}
			m.raws[i] = rm
			continue
		}
		dc, err := seg.Dim(dim.Name)
		require.NoError(t, err)
		dm := &dimModel{col: 1 + i, dim: dim, hasNull: dc.HasNull()}
		it := dc.Dictionary()
		for it.Next() {
			if !it.IsNull() {
				dm.vals = append(dm.vals, it.Value())
			}
		}
		require.NoError(t, it.Err())
		cur := dc.Cursor()
		for r := range m.rows {
			ids, err := cur.IDs(r)
			require.NoError(t, err)
			dm.ids = append(dm.ids, append([]uint32(nil), ids...))
		}
		if dc.HasBitmaps() {
			for id := range dc.Cardinality() {
				bm, err := dc.Bitmap(uint32(id))
				require.NoError(t, err)
				dm.bms = append(dm.bms, bm)
			}
		}
		dm.nulls, err = dc.Nulls()
		require.NoError(t, err)
		m.dims[i] = dm
	}
	for k, met := range m.schema.Metrics {
		col := 1 + len(m.schema.Dimensions) + k
		if met.Aggregator == agg.HyperUnique {
			sc, err := seg.Sketch(met.Name)
			require.NoError(t, err)
			cur := sc.Cursor()
			for r := range m.rows {
				v, err := cur.Bytes(r)
				require.NoError(t, err)
				m.sketches[col] = append(m.sketches[col], append([]byte{}, v...))
			}
			continue
		}
		if dc, err := seg.Double(met.Name); err == nil && dc.Tails() != nil {
			cur := dc.Tails().Cursor()
			vals := make([][]byte, 0, m.rows)
			for r := range m.rows {
				terms, err := cur.Tail(r, nil)
				require.NoError(t, err)
				var b []byte
				for _, x := range terms {
					b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
				}
				vals = append(vals, b)
			}
			m.tails[col] = vals
		}
	}
	return m
}

func (m *segModel) encodeTime(f *segFile) {
	f.Parts[m.partIndex(f, 0, segfmt.PartValues)].Data = longPart(m.times)
}

func (m *segModel) partIndex(f *segFile, col int, kind segfmt.PartKind) int {
	for i, p := range f.Parts {
		if p.Column == col && p.Kind == kind {
			return i
		}
	}
	panic("no such part")
}

// encodeDim re-encodes every part of dictionary dimension d.
func (m *segModel) encodeDim(t testing.TB, f *segFile, d *dimModel) {
	f.set(t, d.col, segfmt.PartDictionary, dictPart(d.vals, d.hasNull))
	f.set(t, d.col, segfmt.PartIDs, idsPart(d.ids, d.dim.MultiValue, d.card()))
	if d.bms != nil {
		f.set(t, d.col, segfmt.PartBitmaps, bitmapsPart(t, d.bms))
	}
	f.set(t, d.col, segfmt.PartNulls, bitmapBytes(t, d.nulls))
}

func (m *segModel) encodeRaw(t testing.TB, f *segFile, r *rawModel) {
	f.set(t, r.col, segfmt.PartValues, blobPart(r.vals))
	f.set(t, r.col, segfmt.PartNulls, bitmapBytes(t, r.nulls))
}

func bitmapBytes(t testing.TB, bm *roaring.Bitmap) []byte {
	t.Helper()
	b, err := bm.ToBytes()
	require.NoError(t, err)
	return b
}

// encodeAll re-encodes every part the model holds.
func (m *segModel) encodeAll(t testing.TB, f *segFile) {
	m.encodeTime(f)
	for i := range m.dims {
		if m.dims[i] != nil {
			m.encodeDim(t, f, m.dims[i])
		} else {
			m.encodeRaw(t, f, m.raws[i])
		}
	}
	for col, v := range m.sketches {
		f.set(t, col, segfmt.PartValues, blobPart(v))
	}
	for col, v := range m.tails {
		f.set(t, col, segfmt.PartTails, blobPart(v))
	}
}
