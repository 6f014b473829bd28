package columns

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/axiomhq/hyperloglog"
	"github.com/stretchr/testify/require"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/segfmt"
)

// planeModes returns the form byte of each plane of a planes encoding of n values of width w.
func planeModes(t *testing.T, b []byte, n, w int) []byte {
	t.Helper()
	var modes []byte
	for range planeCount(w) {
		require.NotEmpty(t, b)
		modes = append(modes, b[0])
		switch b[0] {
		case planeRaw:
			b = b[1+n:]
		case planeConstant:
			b = b[2:]
		default:
			size, k := uvarint(b[1:])
			b = b[1+k+int(size):]
		}
	}
	require.Empty(t, b)
	return modes
}

func uvarint(b []byte) (uint64, int) {
	var x uint64
	for i, c := range b {
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, i + 1
		}
	}
	return 0, 0
}

// TestPlanesRoundTrip: values of every width and shape come back from the planes form, and
// each plane form is used where it pays: raw for noise, constant for a plane of one byte,
// huffman for a skewed plane, fse for a plane below one bit a value.
func TestPlanesRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pc := newPlaneCoder()
	pd := newPlaneDecoder()
	seen := map[byte]int{}
	check := func(name string, vals []uint64, w int) {
		b, ok := appendPlanes(pc, []byte{0xAA}, vals, w, math.MaxInt)
		require.True(t, ok, name)
		require.Equal(t, byte(0xAA), b[0], "%s: appends", name)
		for _, m := range planeModes(t, b[1:], len(vals), w) {
			seen[m]++
		}
		got, rest, err := decodePlanes(pd, []uint64{7}, append(b[1:], 0x55), len(vals), w)
		require.NoError(t, err, name)
		require.Equal(t, []byte{0x55}, rest, name)
		require.Equal(t, append([]uint64{7}, vals...), got, name)
		if w <= 32 {
			v32 := make([]uint32, len(vals))
			for i, v := range vals {
				v32[i] = uint32(v)
			}
			b32, ok := appendPlanes(pc, nil, v32, w, math.MaxInt)
			require.True(t, ok)
			require.Equal(t, b[1:], b32, "%s: uint32 and uint64 values encode alike", name)
			got32, _, err := decodePlanes(pd, []uint32(nil), b32, len(vals), w)
			require.NoError(t, err, name)
			require.Equal(t, v32, got32, name)
		}
	}
	for _, n := range []int{64, 1000, 4096, maxPlaneBytes} {
		for _, w := range []int{1, 3, 8, 9, 12, 16, 20, 31, 32, 33, 63, 64} {
			mask := uint64(math.MaxUint64) >> (64 - w)
			uniform := make([]uint64, n)
			expo := make([]uint64, n)
			constant := make([]uint64, n)
			for i := range uniform {
				uniform[i] = rng.Uint64() & mask
				expo[i] = uint64(rng.ExpFloat64()*float64(min(mask, 1<<40)/64)) & mask
				constant[i] = mask
			}
			expo[0] = mask // the full width
			check(fmt.Sprintf("uniform n=%d w=%d", n, w), uniform, w)
			check(fmt.Sprintf("exponential n=%d w=%d", n, w), expo, w)
			check(fmt.Sprintf("constant n=%d w=%d", n, w), constant, w)
		}
	}
	for _, m := range []byte{planeRaw, planeConstant, planeHuff, planeFSE} {
		require.Positive(t, seen[m], "plane form %d used (%v)", m, seen)
	}
}

// TestPlanesDecline: too few values, too many, or no gain below the limit: the caller keeps
// bit-packing and dst is unchanged.
func TestPlanesDecline(t *testing.T) {
	pc := newPlaneCoder()
	small := make([]uint32, minPlaneBytes-1)
	b, ok := appendPlanes(pc, []byte{1}, small, 4, math.MaxInt)
	require.False(t, ok)
	require.Equal(t, []byte{1}, b)
	big := make([]uint32, maxPlaneBytes+1)
	_, ok = appendPlanes(pc, nil, big, 4, math.MaxInt)
	require.False(t, ok)
	rng := rand.New(rand.NewPCG(3, 4))
	noise := make([]uint64, 1000)
	for i := range noise {
		noise[i] = rng.Uint64() >> 44 // 20 bits: 3 planes of at least n bytes > 20 bits packed
	}
	b, ok = appendPlanes(pc, []byte{1}, noise, 20, packedSize(len(noise), 20))
	require.False(t, ok)
	require.Equal(t, []byte{1}, b)
}

// TestPlanesCorrupt: damaged planes give errors wrapping ErrCorrupt, never a panic or a value
// wider than the width.
func TestPlanesCorrupt(t *testing.T) {
	pd := newPlaneDecoder()
	vals := make([]uint64, 200)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range vals {
		vals[i] = uint64(rng.ExpFloat64() * 300)
	}
	good, ok := appendPlanes(newPlaneCoder(), nil, vals, 12, math.MaxInt)
	require.True(t, ok)
	for _, c := range []struct {
		name string
		b    []byte
		n, w int
		msg  string
	}{
		{"empty", nil, 10, 8, "missing plane"},
		{"unknown form", []byte{9}, 10, 8, "unknown plane form 9"},
		{"short raw", []byte{planeRaw, 1, 2}, 10, 8, "raw plane of 10 bytes, have 2"},
		{"missing constant", []byte{planeConstant}, 10, 8, "missing constant"},
		{"coded past the end", []byte{planeHuff, 50, 1}, 10, 8, "past the end"},
		{"garbage huffman", []byte{planeHuff, 3, 1, 2, 3}, 10, 8, "coded plane"},
		{"garbage fse", []byte{planeFSE, 3, 0xff, 0xff, 0xff}, 10, 8, "coded plane"},
		{"too wide", []byte{planeConstant, 0x10}, 10, 4, "wider than 4 bits"},
		{"width 0", []byte{planeConstant, 0}, 10, 0, "width 0"},
		{"width 33 in uint32", nil, 10, 33, "width 33"},
		{"truncated", good[:len(good)-1], 200, 12, ""},
		{"wrong count", good, 199, 12, ""},
	} {
		var err error
		if c.w == 33 {
			_, _, err = decodePlanes(pd, []uint32(nil), c.b, c.n, c.w)
		} else {
			_, _, err = decodePlanes(pd, []uint64(nil), c.b, c.n, c.w)
		}
		require.ErrorIs(t, err, ErrCorrupt, c.name)
		require.ErrorContains(t, err, c.msg, c.name)
	}
}

// expRows returns n int64 values shaped like event data: exponential with the given mean.
func expRows(rng *rand.Rand, n int, mean float64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(rng.ExpFloat64() * mean)
	}
	return out
}

// TestInt64sPlanes: the planes form of int64 chunks (for and delta) round-trips, is used only
// when smaller than bit-packing, and only a version 4 part's decoder takes it.
func TestInt64sPlanes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pc := newPlaneCoder()
	expo := expRows(rng, 4096, 250)
	times := make([]int64, 4096)
	times[0] = 1_700_000_000_000
	for i := 1; i < len(times); i++ {
		times[i] = times[i-1] + int64(rng.ExpFloat64()*30)
	}
	uniform := make([]int64, 4096)
	for i := range uniform {
		uniform[i] = rng.Int64N(1_000_000) - 500_000
	}
	for _, c := range []struct {
		name      string
		vals      []int64
		planes    bool
		transform byte
	}{
		{"exponential", expo, true, intFOR},
		{"times", times, true, intDelta},
		{"uniform", uniform, false, 0},
		{"short", expo[:minPlaneBytes-1], false, 0},
		{"constant", make([]int64, 100), false, 0},
	} {
		packed := appendInt64s(nil, c.vals)
		b, planes := appendInt64sV(nil, c.vals, pc)
		require.Equal(t, c.planes, planes, c.name)
		if !planes {
			require.Equal(t, packed, b, "%s: as before", c.name)
			continue
		}
		require.Equal(t, intPlanes, b[0], c.name)
		require.Less(t, len(b), len(packed), "%s: smaller than bit-packing", c.name)
		t.Logf("%s: %d bytes packed, %d in planes", c.name, len(packed), len(b))
		got, rest, err := decodeInt64sV([]int64{-1}, append(b, 9), len(c.vals), newPlaneDecoder())
		require.NoError(t, err, c.name)
		require.Equal(t, []byte{9}, rest)
		require.Equal(t, append([]int64{-1}, c.vals...), got, c.name)
		// Not in a version 2 part.
		_, _, err = decodeInt64s(nil, b, len(c.vals))
		require.ErrorIs(t, err, ErrCorrupt, c.name)
		require.ErrorContains(t, err, "unknown encoding 4", c.name)
		// A damaged transform byte.
		bad := append([]byte(nil), b...)
		bad[1+uvarintLen(uint64(len(c.vals)))] = intPlain
		_, _, err = decodeInt64sV(nil, bad, len(c.vals), newPlaneDecoder())
		require.ErrorIs(t, err, ErrCorrupt, c.name)
		require.ErrorContains(t, err, "planes of no for or delta encoding", c.name)
	}
	// Whole int64 range: wrapping arithmetic survives.
	wide := []int64{math.MinInt64, math.MaxInt64}
	for range 200 {
		wide = append(wide, int64(rng.Uint64()>>uint(rng.IntN(64))))
	}
	b, _ := appendInt64sV(nil, wide, pc)
	got, _, err := decodeInt64sV(nil, b, len(wide), newPlaneDecoder())
	require.NoError(t, err)
	require.Equal(t, wide, got)
}

// TestFloat64sPlanes: an integral double chunk takes the planes form in a version 4 part.
func TestFloat64sPlanes(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	vals := make([]float64, 3000)
	for i := range vals {
		vals[i] = float64(int64(rng.ExpFloat64() * 1000))
	}
	var scratch []int64
	b, planes := appendFloat64sV(nil, vals, &scratch, newPlaneCoder())
	require.True(t, planes)
	require.Less(t, len(b), len(appendFloat64s(nil, vals, nil)))
	got, rest, err := decodeFloat64sV(nil, b, len(vals), &scratch, newPlaneDecoder())
	require.NoError(t, err)
	require.Empty(t, rest)
	require.Equal(t, vals, got)
	_, _, err = decodeFloat64s(nil, b, len(vals), nil)
	require.ErrorIs(t, err, ErrCorrupt)
	// Fractions stay plain.
	vals[5] = 0.5
	b, planes = appendFloat64sV(nil, vals, &scratch, newPlaneCoder())
	require.False(t, planes)
	require.Equal(t, floatPlain, b[0])
}

// zipfRanks returns n ids below card, Zipf-distributed, the frequent ones scattered.
func zipfIDs(rng *rand.Rand, n, card int) []uint32 {
	z := rand.NewZipf(rng, 1.1, 2, uint64(card-1))
	perm := rng.Perm(card)
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(perm[z.Uint64()])
	}
	return out
}

// TestRankedIDs: ranked id chunks round-trip through the rank table in both forms, and bad
// chunks and tables are refused.
func TestRankedIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const card = 1000
	ranks := zipfIDs(rng, 4096, card) // already small for the frequent ones: take them as ranks
	perm := make([]uint32, card)
	for i, p := range rng.Perm(card) {
		perm[i] = uint32(p)
	}
	w := idWidth(card)
	want := make([]uint32, len(ranks))
	for i, r := range ranks {
		want[i] = perm[r]
	}
	pd := newPlaneDecoder()
	planes := appendRankedIDs(nil, ranks, w, newPlaneCoder())
	packed := appendRankedIDs(nil, ranks, w, nil)
	require.Less(t, len(planes), len(packed))
	require.Equal(t, len(packed), idsSize(len(ranks), w)+1)
	for name, b := range map[string][]byte{"planes": planes, "packed": packed} {
		got, rest, err := decodeRankedIDs([]uint32{5}, append(b, 1), len(ranks), perm, false, pd)
		require.NoError(t, err, name)
		require.Equal(t, []byte{1}, rest, name)
		require.Equal(t, append([]uint32{5}, want...), got, name)
		_, _, err = decodeRankedIDs(nil, b, len(ranks)+1, perm, false, pd)
		require.ErrorIs(t, err, ErrCorrupt, name)
		_, _, err = decodeRankedIDs(nil, b, len(ranks), perm[:card-1], false, pd) // width still 10: ranks 999 out of range
		require.ErrorIs(t, err, ErrCorrupt, name)
		_, _, err = decodeRankedIDs(nil, b, len(ranks), perm[:500], false, pd)
		require.ErrorContains(t, err, "width 10, cardinality 500 needs 9", name)
	}
	bad := append([]byte(nil), planes...)
	bad[uvarintLen(uint64(len(ranks)))+1] = 7
	_, _, err := decodeRankedIDs(nil, bad, len(ranks), perm, false, pd)
	require.ErrorContains(t, err, "unknown form 7")

	table := appendPacked(nil, perm, w)
	require.Equal(t, rankTableSize(card), int64(len(table)))
	got, err := decodeRankTable(table, card)
	require.NoError(t, err)
	require.Equal(t, perm, got)
	dup := append([]uint32(nil), perm...)
	dup[3] = dup[4]
	_, err = decodeRankTable(appendPacked(nil, dup, w), card)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "out of range or repeated")
	_, err = decodeRankTable(table[:len(table)-1], card)
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = decodeRankTable(append(table, 0), card)
	require.ErrorContains(t, err, "trailing")
}

// v4Schema and v4Rows make a segment whose columns are shaped like event data (exponential
// metrics and time steps, Zipf dimensions), so that the version 4 forms pay.
func v4Schema() Schema {
	return Schema{
		Dimensions: []Dimension{
			{Name: "page"},
			{Name: "tags", MultiValue: true},
			{Name: "country", NoBitmapIndex: true},
			{Name: "one"},
		},
		Metrics: []Metric{
			{Name: "count", Aggregator: agg.Count},
			{Name: "added", Aggregator: agg.LongSum, Field: "added"},
			{Name: "firstAdded", Aggregator: agg.LongFirst, Field: "added"},
			{Name: "delta", Aggregator: agg.DoubleSum, Field: "delta"},
			{Name: "lastDelta", Aggregator: agg.DoubleLast, Field: "delta"},
		},
	}
}

func v4Rows(n int, seed uint64) []Row {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	pages := zipfIDs(rng, n, 300)
	countries := zipfIDs(rng, n, 40)
	t := int64(1_700_000_000_000)
	rows := make([]Row, n)
	for i := range rows {
		t += int64(rng.ExpFloat64() * 40)
		r := Row{Time: t, Dims: make([][]string, 4), Metrics: make([]Value, 5)}
		if i%17 != 3 {
			r.Dims[0] = []string{fmt.Sprintf("page-%03d", pages[i])}
		}
		if i%3 == 0 {
			r.Dims[1] = []string{"a", fmt.Sprint(i % 7)}
		}
		r.Dims[2] = []string{fmt.Sprintf("c%02d", countries[i])}
		r.Dims[3] = []string{"x"}
		r.Metrics[0].Long = 1
		r.Metrics[1].Long = int64(rng.ExpFloat64() * 250)
		r.Metrics[2].Long = int64(rng.ExpFloat64() * 500)
		r.Metrics[3].Double = float64(int64(rng.ExpFloat64() * 100))
		if i == 7 {
			r.Metrics[3].Double = 0.25 // its chunk stays plain
		}
		r.Metrics[4].Double = float64(int64(rng.ExpFloat64() * 300))
		if i%101 == 5 {
			r.Metrics[1] = Value{Null: true}
		}
		rows[i] = r
	}
	return rows
}

// partEncodings returns the encoding of each chunked part (values, ids, times, tails), by
// "column/kind": the parts the chunk forms concern (bitmap parts have their own version 4
// encoding, not tested here).
func partEncodings(seg *Segment) map[string]segfmt.Encoding {
	out := map[string]segfmt.Encoding{}
	for _, p := range seg.Info().Parts {
		switch p.Kind {
		case segfmt.PartValues, segfmt.PartIDs, segfmt.PartTimes, segfmt.PartTails:
			out[p.Column+"/"+p.Kind.String()] = p.Encoding
		case segfmt.PartDictionary, segfmt.PartBitmaps, segfmt.PartNulls:
		}
	}
	return out
}

// TestSegmentVersion4: under zstd a segment of event-shaped data is version 4, its time, long,
// double, times and single-value id parts in their version 4 encodings; multi-value ids and a
// one-value dimension keep the version 2 encodings, and so does every part under
// CompressionNone and s2 (planesFor). Both ways of writing agree, and everything reads back.
func TestSegmentVersion4(t *testing.T) {
	s := v4Schema()
	rows := v4Rows(3000, 1)
	sketches := marshalSketches(t, s, rows)
	for _, comp := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
		opts := writerOptions{Compression: comp, ChunkRows: 700, StoreIDs: true}
		byRows := writeRows(t, s, rows, opts)
		byCols := writeColumns(t, s, rows, opts)
		require.Equal(t, byRows, byCols, "%s: rows and the column writers write the same bytes", comp)
		seg, err := newSegmentBytes(byRows)
		require.NoError(t, err)
		checkSegment(t, seg, s, rows, sketches)
		enc := partEncodings(seg)
		if comp != CompressionZstd {
			version := byte(versionNulls) // none means none; s2 is for speed
			for _, p := range seg.Info().Parts {
				if p.Kind == segfmt.PartBitmaps && isV4Encoding(p.Encoding) {
					version = versionV4 // an Elias-Fano bitmap index (bitmapef.go), under s2
				}
			}
			require.Equal(t, version, byRows[len(magic)], comp)
			for k, e := range enc {
				require.False(t, isV4Encoding(e), "%s: %s in %s", comp, k, e)
			}
			continue
		}
		require.Equal(t, byte(versionV4), byRows[len(magic)], comp)
		want := map[string]segfmt.Encoding{
			"__time/values":     segfmt.EncLongChunksV4,
			"page/ids":          segfmt.EncIDChunksV4,
			"country/ids":       segfmt.EncIDChunksV4,
			"tags/ids":          segfmt.EncMultiIDChunks,
			"one/ids":           segfmt.EncIDChunks, // one id: nothing to rank
			"count/values":      segfmt.EncLongChunks,
			"added/values":      segfmt.EncLongChunksV4,
			"firstAdded/values": segfmt.EncLongChunksV4,
			"firstAdded/times":  segfmt.EncLongChunksV4,
			"delta/values":      segfmt.EncDoubleChunksV4,
			"lastDelta/values":  segfmt.EncDoubleChunksV4,
			"lastDelta/times":   segfmt.EncLongChunksV4,
		}
		for k, e := range want {
			require.Equal(t, e, enc[k], "%s: %s", comp, k)
		}
		plain := writeRows(t, s, rows, writerOptions{Compression: CompressionNone, ChunkRows: 700})
		t.Logf("%s: %d bytes, %d without compression", comp, len(byRows), len(plain))
		require.Less(t, len(byRows), len(plain), "%s: the version 4 forms pay", comp)
	}
}

// TestSegmentVersion4Ranks: ids rank by their rows, most first, ties by id.
func TestSegmentVersion4Ranks(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "d", NoBitmapIndex: true}}}
	var rows []Row
	for i := range 5000 {
		v := "rare"
		if i%10 != 0 {
			v = "common"
		}
		if i%1000 == 1 {
			v = fmt.Sprint("z", i)
		}
		rows = append(rows, Row{Time: int64(i), Dims: [][]string{{v}}})
	}
	b := writeRows(t, s, rows, writerOptions{Compression: CompressionZstd})
	seg, err := newSegmentBytes(b)
	require.NoError(t, err)
	dc := seg.dims[0]
	// "common" (id 0) ranks first, "rare" (id 1) second, the "z..." ids after, by id on ties.
	require.Equal(t, []uint32{0, 1, 2, 3, 4, 5, 6}, dc.perm)
	checkSegment(t, seg, s, rows, marshalSketches(t, s, rows))
}

// TestGoldenVersion4 pins a version 4 segment (testdata/golden-v4.seg): it must keep reading
// to the same rows; the writer must keep writing the same bytes (run with -update after a
// deliberate change).
func TestGoldenVersion4(t *testing.T) {
	s := v4Schema()
	rows := v4Rows(600, 2)
	got := writeRows(t, s, rows, writerOptions{Compression: CompressionZstd, ChunkRows: 200, StoreIDs: true})
	want, seg := goldenFile(t, "golden-v4.seg", got)
	require.Equal(t, byte(versionV4), seg.f.version)
	checkSegment(t, seg, s, rows, marshalSketches(t, s, rows))
	var v4 []string
	for k, e := range partEncodings(seg) {
		if isV4Encoding(e) {
			v4 = append(v4, k)
		}
	}
	require.ElementsMatch(t, []string{"page/ids", "country/ids", "added/values", "firstAdded/values", "delta/values", "lastDelta/values"}, v4)
	require.True(t, bytes.Equal(want, got), "the version 4 segment bytes changed (run with -update if deliberate)")
}

// v4FlipSegment is the version 4 segment the flip tests damage: every part kind, and the
// planes form in its long, double and id chunks.
func v4FlipSegment(t testing.TB) []byte {
	s := flipSchema()
	rows := flipRows(140, 3)
	rng := rand.New(rand.NewPCG(13, 14))
	pages := zipfIDs(rng, len(rows), 100)
	t0 := int64(1_700_000_000_000)
	for i := range rows {
		if rng.IntN(8) == 0 {
			t0 += int64(rng.ExpFloat64() * 3000)
		}
		rows[i].Time = t0
		if rows[i].Dims[0] != nil {
			rows[i].Dims[0] = []string{fmt.Sprint("p", pages[i])}
		}
		// Mostly zero, now and then large: small in planes, wide when bit-packed.
		sparse := func() int64 {
			if rng.IntN(8) > 0 {
				return 0
			}
			return int64(rng.ExpFloat64() * 3000)
		}
		rows[i].Metrics[1].Long = sparse()
		rows[i].Metrics[2].Long = sparse()
		rows[i].Metrics[3].Double = float64(sparse())
		rows[i].Metrics[4].Double = float64(sparse())
		sk := hyperloglog.New()
		sk.Insert(fmt.Appendf(nil, "u%d", i%3))
		rows[i].Metrics[5].Sketch = hllOf(sk)
	}
	return writeRows(t, s, rows, writerOptions{ChunkRows: 70, Compression: CompressionZstd, StoreIDs: true})
}

func TestV4FlipSegment(t *testing.T) {
	seg, err := newSegmentBytes(v4FlipSegment(t))
	require.NoError(t, err)
	enc := partEncodings(seg)
	for _, k := range []string{"__time/values", "page/ids", "added/values", "firstAdded/values", "delta/values", "lastDelta/values"} {
		require.True(t, isV4Encoding(enc[k]), "%s: %s", k, enc[k])
	}
}

// FuzzDecodePlanes decodes arbitrary bytes as planes: no panic, errors wrap ErrCorrupt, and
// what decodes re-encodes to values that decode the same.
func FuzzDecodePlanes(f *testing.F) {
	rng := rand.New(rand.NewPCG(15, 16))
	pc := newPlaneCoder()
	for _, w := range []int{3, 9, 17} {
		vals := make([]uint64, 100)
		for i := range vals {
			vals[i] = uint64(rng.ExpFloat64()*float64(uint64(1)<<(w-2))) & (1<<w - 1)
		}
		b, _ := appendPlanes(pc, nil, vals, w, math.MaxInt)
		f.Add(b, uint16(100), uint8(w))
	}
	f.Add([]byte{planeConstant, 3}, uint16(5), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, n uint16, w uint8) {
		pd := newPlaneDecoder()
		got, rest, err := decodePlanes(pd, []uint64(nil), b, int(n), int(w))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v does not wrap ErrCorrupt", err)
			}
			return
		}
		if len(got) != int(n) || len(rest) > len(b) {
			t.Fatalf("%d values, want %d", len(got), n)
		}
		for _, v := range got {
			if w < 64 && v>>w != 0 {
				t.Fatalf("value %d wider than %d bits", v, w)
			}
		}
		if b2, ok := appendPlanes(newPlaneCoder(), nil, got, int(w), math.MaxInt); ok {
			again, _, err := decodePlanes(pd, []uint64(nil), b2, int(n), int(w))
			if err != nil || !slicesEqual(again, got) {
				t.Fatalf("re-encoded values do not decode the same: %v", err)
			}
		}
	})
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzDecodeInt64sV decodes arbitrary bytes as a version 4 int64 chunk: no panic, errors wrap
// ErrCorrupt, what decodes re-encodes to the same values.
func FuzzDecodeInt64sV(f *testing.F) {
	rng := rand.New(rand.NewPCG(17, 18))
	pc := newPlaneCoder()
	f.Add(appendInt64s(nil, []int64{1, 2, 3}))
	b, _ := appendInt64sV(nil, expRows(rng, 200, 100), pc)
	f.Add(b)
	times := make([]int64, 300)
	for i := 1; i < len(times); i++ {
		times[i] = times[i-1] + int64(rng.ExpFloat64()*20)
	}
	b, _ = appendInt64sV(nil, times, pc)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		got, _, err := decodeInt64sV(nil, b, -1, newPlaneDecoder())
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v does not wrap ErrCorrupt", err)
			}
			return
		}
		if m, ok := int64Bound(b); ok { // the header's bound holds for what decodes
			for i, v := range got {
				if a := uint64(v); (v >= 0 && a > m) || (v < 0 && -a > m) {
					t.Fatalf("value %d (%d) past the header's bound %d", i, v, m)
				}
			}
		}
		b2, _ := appendInt64sV(nil, got, newPlaneCoder())
		again, rest, err := decodeInt64sV(nil, b2, len(got), newPlaneDecoder())
		if err != nil || len(rest) != 0 || !slicesEqual(again, got) {
			t.Fatalf("re-encoded values do not decode the same: %v", err)
		}
	})
}

// FuzzDecodeRankedIDs decodes arbitrary bytes as a ranked ids chunk of a cardinality, of a
// version 4 part or (deltas) a version 5 one: no panic, errors wrap ErrCorrupt, every id below
// the cardinality.
func FuzzDecodeRankedIDs(f *testing.F) {
	rng := rand.New(rand.NewPCG(19, 20))
	f.Add(appendRankedIDs(nil, zipfIDs(rng, 500, 300), idWidth(300), newPlaneCoder()), uint16(300), false)
	f.Add(appendRankedIDs(nil, zipfIDs(rng, 50, 3), idWidth(3), nil), uint16(3), false)
	var scratch []uint32
	sorted, _ := appendIDDeltas(nil, sortedRunIDs(rng, 600, 300, 50), 300, idWidth(300), newPlaneCoder(), &scratch, 1<<20)
	f.Add(sorted, uint16(300), true)
	f.Fuzz(func(t *testing.T, b []byte, card uint16, deltas bool) {
		perm := make([]uint32, card)
		for i := range perm {
			perm[i] = uint32(len(perm) - 1 - i)
		}
		got, _, err := decodeRankedIDs(nil, b, -1, perm, deltas, newPlaneDecoder())
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v does not wrap ErrCorrupt", err)
			}
			return
		}
		for _, id := range got {
			if int(id) >= int(card) {
				t.Fatalf("id %d not below %d", id, card)
			}
		}
	})
}

// TestInt64Bound: a chunk's header bounds its values' magnitudes (Cursor.Bound) for constant,
// frame of reference and delta chunks, plain or in planes, and gives no bound for plain values
// or past 2^62.
func TestInt64Bound(t *testing.T) {
	rng := rand.New(rand.NewPCG(62, 64))
	pc := newPlaneCoder()
	shapes := map[string]func(i int) int64{
		"constant": func(int) int64 { return -77 },
		"small":    func(int) int64 { return rng.Int64N(1000) },
		"signed":   func(int) int64 { return rng.Int64N(1<<40) - 1<<39 },
		"rising":   func(i int) int64 { return 1_700_000_000_000 + int64(i)*1000 + rng.Int64N(10) },
		"falling":  func(i int) int64 { return -int64(i) * (1 << 40) },
		"huge":     func(int) int64 { return rng.Int64() },
		"edge":     func(i int) int64 { return []int64{math.MinInt64, math.MaxInt64, 0}[i%3] },
	}
	for name, gen := range shapes {
		for _, n := range []int{1, 2, 100, 5000} {
			vals := make([]int64, n)
			var most uint64
			for i := range vals {
				vals[i] = gen(i)
				a := uint64(vals[i])
				if vals[i] < 0 {
					a = -a
				}
				most = max(most, a)
			}
			for _, planes := range []bool{false, true} {
				b := appendInt64s(nil, vals)
				if planes {
					b, _ = appendInt64sV(nil, vals, pc)
				}
				m, ok := int64Bound(b)
				what := fmt.Sprintf("%s, %d values, planes %v, encoding %d", name, n, planes, b[0])
				if name != "huge" && name != "edge" {
					require.True(t, ok, what)
				} else if n > 1 {
					require.False(t, ok, what) // plain, or of 64 bits
				}
				if ok {
					require.GreaterOrEqual(t, m, most, what)
					require.Less(t, m, uint64(1)<<62, what)
				}
			}
		}
	}
}
