package columns

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/writeout/writeout/internal/segfmt"
)

func TestPacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t, 1), 0))
	for width := 0; width <= 64; width++ {
		for _, n := range []int{0, 1, 2, 7, 8, 63, 64, 65, 1000} {
			vals := make([]uint64, n)
			for i := range vals {
				if width > 0 {
					vals[i] = rng.Uint64() >> (64 - width)
				}
			}
			prefix := []byte("prefix")
			enc := appendPacked(append([]byte(nil), prefix...), vals, width)
			require.Equal(t, prefix, enc[:len(prefix)])
			require.Equal(t, packedSize(n, width), len(enc)-len(prefix), "width %d n %d", width, n)
			got, rest, err := decodePacked([]uint64(nil), append(enc[len(prefix):], 0xAA), n, width)
			require.NoError(t, err)
			require.Equal(t, []byte{0xAA}, rest)
			if n > 0 {
				require.Equal(t, vals, got, "width %d n %d", width, n)
			}
			if packedSize(n, width) > 0 {
				_, _, err = decodePacked([]uint64(nil), enc[len(prefix):len(enc)-1], n, width)
				require.ErrorIs(t, err, ErrCorrupt)
			}
			// 32-bit values.
			if width <= 32 {
				v32 := make([]uint32, n)
				for i, v := range vals {
					v32[i] = uint32(v)
				}
				e32 := appendPacked(nil, v32, width)
				require.True(t, bytes.Equal(enc[len(prefix):], e32))
				g32, _, err := decodePacked([]uint32(nil), e32, n, width)
				require.NoError(t, err)
				if n > 0 {
					require.Equal(t, v32, g32)
				}
			}
		}
	}
	_, _, err := decodePacked([]uint32(nil), make([]byte, 100), 10, 33)
	require.ErrorIs(t, err, ErrCorrupt)
	_, _, err = decodePacked([]uint64(nil), make([]byte, 100), 1, 65)
	require.ErrorIs(t, err, ErrCorrupt)
}

// randInt64s returns values shaped like columns: constant, sorted, small, wide, extremes.
func randInt64s(rng *rand.Rand, n int) []int64 {
	vals := make([]int64, n)
	kind := rng.IntN(6)
	base := rng.Int64()
	for i := range vals {
		switch kind {
		case 0:
			vals[i] = base
		case 1:
			vals[i] = base + int64(i)*int64(rng.IntN(3))
		case 2:
			vals[i] = rng.Int64N(500)
		case 3:
			vals[i] = rng.Int64() - rng.Int64()
		case 4:
			vals[i] = []int64{math.MinInt64, math.MaxInt64, 0, -1}[rng.IntN(4)]
		case 5:
			if i > 0 {
				vals[i] = vals[i-1] + rng.Int64N(1000) - 500
			}
		}
	}
	return vals
}

// TestInt64s checks every int64 encoding round-trips, the announced size is what is appended,
// the smallest encoding wins, and truncations fail cleanly.
func TestInt64s(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t, 2), 0))
	seen := map[byte]int{}
	for c := 0; c < 3000; c++ {
		vals := randInt64s(rng, []int{0, 1, 2, 3, 100, 4096}[rng.IntN(6)])
		enc := appendInt64s([]byte{9}, vals)
		require.Equal(t, int64sSize(vals), len(enc)-1)
		seen[enc[1]]++
		got, rest, err := decodeInt64s([]int64{42}, append(enc[1:], 7), -1)
		require.NoError(t, err)
		require.Equal(t, []byte{7}, rest)
		require.Equal(t, append([]int64{42}, vals...), got)
		// Every other encoding of the same values is at least as large.
		for _, enc := range []byte{intPlain, intFOR, intDelta} {
			p := planInt64s(vals)
			if p.enc == intConstant || len(vals) == 0 {
				continue
			}
			require.LessOrEqual(t, p.size, forcedSize(vals, enc), "encoding %d", enc)
		}
		for cut := 0; cut < len(enc)-1; cut += 1 + cut/4 {
			_, _, err := decodeInt64s(nil, enc[1:1+cut], -1)
			require.ErrorIs(t, err, ErrCorrupt, "cut %d of %d", cut, len(enc)-1)
		}
	}
	for _, enc := range []byte{intPlain, intConstant, intFOR, intDelta} {
		require.Positive(t, seen[enc], "encoding %d never chosen", enc)
	}
	t.Logf("encodings chosen: %v", seen)
	_, _, err := decodeInt64s(nil, appendInt64s(nil, []int64{1, 2}), 3)
	require.ErrorIs(t, err, ErrCorrupt)
	_, _, err = decodeInt64s(nil, []byte{9, 1, 0}, -1)
	require.ErrorIs(t, err, ErrCorrupt)
	// A constant claiming more values than a chunk may hold allocates nothing.
	_, _, err = decodeInt64s(nil, []byte{intConstant, 0xff, 0xff, 0xff, 0xff, 0x0f, 0}, -1)
	require.ErrorIs(t, err, ErrCorrupt)
}

func forcedSize(vals []int64, enc byte) int {
	n := len(vals)
	head := 1 + uvarintLen(uint64(n))
	switch enc {
	case intPlain:
		return head + 8*n
	case intFOR:
		lo, hi := slicesMinMax(vals)
		return head + varintLen(lo) + 1 + packedSize(n, bitWidth(uint64(hi)-uint64(lo)))
	case intDelta:
		if n < 2 {
			return math.MaxInt
		}
		d := make([]int64, n-1)
		for i := 1; i < n; i++ {
			d[i-1] = vals[i] - vals[i-1]
		}
		lo, hi := slicesMinMax(d)
		return head + varintLen(vals[0]) + varintLen(lo) + 1 + packedSize(n-1, bitWidth(uint64(hi)-uint64(lo)))
	}
	return 0
}

func slicesMinMax(v []int64) (int64, int64) {
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

func TestFloat64s(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t, 3), 0))
	seen := map[byte]int{}
	for c := 0; c < 2000; c++ {
		n := []int{0, 1, 2, 100, 4096}[rng.IntN(5)]
		vals := make([]float64, n)
		kind := rng.IntN(4)
		for i := range vals {
			switch kind {
			case 0:
				vals[i] = 5000
			case 1:
				vals[i] = float64(rng.IntN(1000) - 500)
			case 2:
				vals[i] = randDouble(rng)
			case 3:
				vals[i] = rng.NormFloat64()
			}
		}
		enc := appendFloat64s([]byte{1}, vals, nil)
		require.Equal(t, float64sSize(vals), len(enc)-1)
		seen[enc[1]]++
		got, rest, err := decodeFloat64s(nil, enc[1:], -1, nil)
		require.NoError(t, err)
		require.Empty(t, rest)
		require.Len(t, got, n)
		for i := range vals {
			require.Equal(t, math.Float64bits(vals[i]), math.Float64bits(got[i]), "value %d", i)
		}
		for cut := 0; cut < len(enc)-1; cut += 1 + cut/4 {
			_, _, err := decodeFloat64s(nil, enc[1:1+cut], -1, nil)
			require.ErrorIs(t, err, ErrCorrupt)
		}
	}
	for _, enc := range []byte{floatPlain, floatConstant, floatIntegral} {
		require.Positive(t, seen[enc], "encoding %d never chosen", enc)
	}
	// -0, NaN and values past 2^62 are not integral.
	for _, v := range []float64{math.Copysign(0, -1), math.NaN(), 1 << 63, math.Inf(1), 0.5} {
		_, ok := integral(v)
		require.False(t, ok, "%v", v)
	}
}

// TestCheckIDs: an id not below the cardinality is found wherever it is (each of the four
// maxima checkIDs keeps, and the tail past a multiple of four), and the error names the first.
func TestCheckIDs(t *testing.T) {
	f := func(ids []uint32, card int, bad string) {
		t.Helper()
		err := checkIDs(ids, card)
		if bad == "" {
			require.NoError(t, err, "ids %v, cardinality %d", ids, card)
			return
		}
		require.ErrorIs(t, err, ErrCorrupt, "ids %v, cardinality %d", ids, card)
		require.ErrorContains(t, err, bad)
	}
	f(nil, 0, "")
	f([]uint32{}, 5, "")
	f([]uint32{0}, 0, "id 0 not below the cardinality 0")
	f([]uint32{4, 4, 4, 4, 4, 4, 4, 4, 4}, 5, "")
	for n := 1; n <= 11; n++ {
		for at := 0; at < n; at++ {
			ids := make([]uint32, n)
			for i := range ids {
				ids[i] = uint32(i % 5)
			}
			ids[at] = 6
			if at+1 < n {
				ids[n-1] = 7 // a second culprit, after the first
			}
			f(ids, 5, "id 6 not below the cardinality 5")
		}
	}
}

func TestIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t, 4), 0))
	for c := 0; c < 500; c++ {
		card := []int{1, 2, 3, 255, 256, 257, 1 << 20, 1<<32 - 1}[rng.IntN(8)]
		n := rng.IntN(5000)
		ids := make([]uint32, n)
		for i := range ids {
			ids[i] = uint32(rng.Int64N(int64(card)))
		}
		w := idWidth(card)
		enc := appendIDs(nil, ids, w)
		require.Equal(t, idsSize(n, w), len(enc))
		got, rest, err := decodeIDs([]uint32{9}, append(enc, 0xAA), n, card)
		require.NoError(t, err)
		require.Equal(t, []byte{0xAA}, rest)
		require.Equal(t, uint32(9), got[0])
		got = got[1:]
		require.Equal(t, n, len(got))
		if n > 0 {
			require.Equal(t, ids, got)
		}
		_, _, err = decodeIDs(nil, enc, n+1, card)
		require.ErrorIs(t, err, ErrCorrupt)
		if card > 1 && n > 0 && 1<<w != card {
			bad := append([]uint32(nil), ids...)
			bad[rng.IntN(n)] = uint32(card)
			_, _, err := decodeIDs(nil, appendIDs(nil, bad, w), n, card)
			require.ErrorIs(t, err, ErrCorrupt, "id past the cardinality")
		}

		// Multi-value: counts of at least one.
		counts := make([]uint32, rng.IntN(300))
		var all []uint32
		for i := range counts {
			counts[i] = uint32(1 + rng.IntN([]int{1, 3, 40}[rng.IntN(3)]))
			for k := uint32(0); k < counts[i]; k++ {
				all = append(all, uint32(rng.Int64N(int64(card))))
			}
		}
		menc := appendMultiIDs([]byte{5}, counts, all, w)
		require.Equal(t, multiIDsSize(counts, len(all), w), len(menc)-1)
		var offs []uint32
		gotIDs, rest, err := decodeMultiIDs([]uint32{7, 7}, append(menc[1:], 0xAA), len(counts), card, &offs)
		require.NoError(t, err)
		require.Equal(t, []byte{0xAA}, rest)
		require.Len(t, offs, len(counts)+1)
		require.Equal(t, uint32(2), offs[0], "offsets count from len(dst)")
		for i := range counts {
			require.Equal(t, counts[i], offs[i+1]-offs[i])
		}
		require.Equal(t, append([]uint32{7, 7}, all...), gotIDs)
		for cut := 0; cut < len(menc)-1; cut += 1 + cut/3 {
			_, _, err := decodeMultiIDs(nil, menc[1:1+cut], len(counts), card, &offs)
			require.ErrorIs(t, err, ErrCorrupt)
		}
	}
}

func TestBlobs(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t, 5), 0))
	for c := 0; c < 300; c++ {
		n := rng.IntN(200)
		var lens []int64
		var data []byte
		var vals [][]byte
		for i := 0; i < n; i++ {
			v := []byte(randValue(rng, 50))
			vals = append(vals, v)
			lens = append(lens, int64(len(v)))
			data = append(data, v...)
		}
		enc := appendBlobs(nil, lens, data)
		require.Equal(t, blobsSize(lens), len(enc))
		var lens2 []int64
		src := append(enc, 0xAA)
		offs, rest, err := decodeBlobs([]int{5}, src, n, &lens2)
		require.NoError(t, err)
		require.Equal(t, []byte{0xAA}, rest)
		require.Len(t, offs, 1+n+1)
		for i, v := range vals {
			require.Equal(t, v, src[offs[1+i]:offs[2+i]])
		}
		for cut := 0; cut < len(enc); cut += 1 + cut/3 {
			_, _, err := decodeBlobs(nil, enc[:cut], n, nil)
			require.ErrorIs(t, err, ErrCorrupt, "cut %d of %d", cut, len(enc))
		}
	}
	_, _, err := decodeBlobs(nil, appendInt64s(nil, []int64{-1}), 1, nil)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestChunkFrames(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t, 6), 0))
	for _, c := range []Compression{CompressionNone, CompressionZstd, CompressionS2} {
		for _, raw := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("abc"), 10000), randBytes(rng, 5000)} {
			fr, err := appendChunk([]byte{1, 2}, raw, c)
			require.NoError(t, err)
			require.Equal(t, []byte{1, 2}, fr[:2])
			require.LessOrEqual(t, len(fr)-2, 1+len(raw), "never larger than storing raw")
			got, _, err := decodeChunk(nil, fr[2:], len(raw))
			require.NoError(t, err)
			require.True(t, bytes.Equal(raw, got))
			if len(raw) > 1000 && c != CompressionNone {
				if fr[2] != codecNone {
					_, _, err = decodeChunk(nil, fr[2:], len(raw)-1)
					require.ErrorIs(t, err, ErrCorrupt, "raw length over the bound")
				}
				bad := append([]byte(nil), fr[2:]...)
				bad[len(bad)/2] ^= 0xff
				_, _, err = decodeChunk(nil, bad, len(raw)) // may decode to other bytes; must not panic
				_ = err
			}
		}
	}
	_, _, err := decodeChunk(nil, []byte{7, 1, 0}, 10)
	require.ErrorIs(t, err, ErrCorrupt)
	_, _, err = decodeChunk(nil, nil, 10)
	require.ErrorIs(t, err, ErrCorrupt)
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestDictionaryCodec writes dictionaries through the streaming writer and reads them back by
// id, by lookup and in order; out-of-order values are refused.
func TestDictionaryCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t, 7), 0))
	for c := 0; c < 100; c++ {
		set := map[string]bool{}
		for k := rng.IntN(300); k > 0; k-- {
			set[randValue(rng, 1000)] = true
		}
		var vals []string
		for v := range set {
			vals = append(vals, v)
		}
		slicesSortStrings(vals)
		st := &stage{b: newTestBytes(t)}
		d := dictWriter{st: st, hasNull: c%2 == 0}
		for _, v := range vals {
			require.NoError(t, d.add(v))
		}
		if len(vals) > 0 {
			require.Error(t, d.add(vals[len(vals)-1]), "duplicate")
			require.Error(t, d.add(""), "out of order") // "" sorts first; at least one value is before it or equal
		}
		require.NoError(t, d.finish())
		require.Equal(t, st.n, st.b.Size(), "announced size")
		buf := make([]byte, st.n)
		_, err := st.b.ReadAt(buf, 0)
		require.NoError(t, err)
		src := &source{data: buf, size: int64(len(buf))}
		p := &segfmt.PartInfo{Offset: 0, Length: int64(len(buf))}
		r, err := parseDict(src, p)
		require.NoError(t, err)
		require.Equal(t, len(vals), r.count)
		require.Equal(t, c%2 == 0, r.hasNull)
		var it blockIter
		for i, v := range vals {
			got, err := r.value(i, &it, nil)
			require.NoError(t, err)
			require.Equal(t, v, got)
			k, ok, err := r.lookup(v)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, i, k)
			_, ok, err = r.lookup(v + "\x00")
			require.NoError(t, err)
			require.Equal(t, set[v+"\x00"], ok)
		}
	}
}

func TestErrorsNameColumnAndPart(t *testing.T) {
	err := partError("page", segfmt.PartBitmaps, corruptf("offset %d past end %d", 123, 100))
	require.EqualError(t, err, `columns: column "page" part bitmaps: offset 123 past end 100: columns: corrupt segment`)
	require.True(t, errors.Is(err, ErrCorrupt))
	require.NoError(t, partError("x", segfmt.PartIDs, nil))
	err = safely("x", func() error { panic("boom") })
	require.ErrorIs(t, err, ErrCorrupt)
}
