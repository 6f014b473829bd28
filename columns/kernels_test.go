package columns

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The bit-packing, int64 chunk and Elias-Fano kernels checked against straightforward
// reference encoders kept here: a bit at a time, two passes where one would do. The kernels
// must write the same bytes and decode the same values for every width and count.

// refPack appends vals packed at width bits, one bit at a time.
func refPack(dst []byte, vals []uint64, width int) []byte {
	size := packedSize(len(vals), width)
	start := len(dst)
	dst = append(dst, make([]byte, size)...)
	for i, v := range vals {
		for j := 0; j < width; j++ {
			if v>>j&1 != 0 {
				bit := i*width + j
				dst[start+bit/8] |= 1 << (bit % 8)
			}
		}
	}
	return dst
}

// refUnpack decodes n values of width bits from src, one bit at a time.
func refUnpack(src []byte, n, width int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		for j := 0; j < width; j++ {
			bit := i*width + j
			out[i] |= uint64(src[bit/8]>>(bit%8)&1) << j
		}
	}
	return out
}

// refInt64s is appendInt64s written plainly: min and max, then the deltas' min and max, in
// separate passes, each encoding's size, the smallest one's bytes.
func refInt64s(dst []byte, vals []int64) []byte {
	n := len(vals)
	head := binary.AppendUvarint(nil, uint64(n))
	plainSize := 1 + len(head) + 8*n
	plain := func() []byte {
		dst = append(append(dst, intPlain), head...)
		for _, v := range vals {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(v))
		}
		return dst
	}
	if n == 0 {
		return plain()
	}
	lo, hi := vals[0], vals[0]
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo == hi {
		return binary.AppendVarint(append(append(dst, intConstant), head...), lo)
	}
	u := make([]uint64, n)
	for i, v := range vals {
		u[i] = uint64(v) - uint64(lo)
	}
	fw := bitWidth(uint64(hi) - uint64(lo))
	forBytes := append(append(binary.AppendVarint(append([]byte{intFOR}, head...), lo), byte(fw)), refPack(nil, u, fw)...)
	best := forBytes
	if n >= 2 {
		dlo, dhi := vals[1]-vals[0], vals[1]-vals[0]
		for i := 1; i < n; i++ {
			d := vals[i] - vals[i-1]
			dlo, dhi = min(dlo, d), max(dhi, d)
		}
		du := make([]uint64, n-1)
		for i := 1; i < n; i++ {
			du[i-1] = uint64(vals[i]-vals[i-1]) - uint64(dlo)
		}
		dw := bitWidth(uint64(dhi) - uint64(dlo))
		b := append([]byte{intDelta}, head...)
		b = binary.AppendVarint(binary.AppendVarint(b, vals[0]), dlo)
		b = append(append(b, byte(dw)), refPack(nil, du, dw)...)
		if len(b) < len(best) {
			best = b
		}
	}
	if len(best) >= plainSize {
		return plain()
	}
	return append(dst, best...)
}

// refEF is the Elias-Fano form of vals (at least one, increasing), a bit at a time.
func refEF(dst []byte, vals []uint32) []byte {
	n, last := len(vals), vals[len(vals)-1]
	l := efLowBits(n, last)
	dst = append(dst, efTag)
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = append(dst, byte(l))
	lows := make([]uint64, n)
	for i, v := range vals {
		lows[i] = uint64(v) & (1<<l - 1)
	}
	dst = refPack(dst, lows, l)
	highs := make([]byte, (n+int(last>>l)+7)/8)
	for i, v := range vals {
		b := int(v>>l) + i
		highs[b/8] |= 1 << (b % 8)
	}
	return append(dst, highs...)
}

// kernelCounts are the value counts every width is tried with.
var kernelCounts = []int{0, 1, 7, 63, 64, 65, 4096}

// randWidth returns n random values below 2^w, the top bit set in some (so the width is w).
func randWidth(rng *rand.Rand, n, w int) []uint64 {
	vals := make([]uint64, n)
	for i := range vals {
		if w > 0 {
			vals[i] = rng.Uint64() >> (64 - w)
			if rng.IntN(4) == 0 {
				vals[i] |= 1 << (w - 1)
			}
		}
	}
	return vals
}

func TestPackedMatchesReference(t *testing.T) {
	seed := uint64(14)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for w := 0; w <= 64; w++ {
		for _, n := range kernelCounts {
			vals := randWidth(rng, n, w)
			want := refPack([]byte{0xee}, vals, w)
			// A prefix to keep, and a destination with spare capacity holding junk.
			junk := make([]byte, 1, len(want)+100)
			junk[0] = 0xee
			for i := range junk[1:cap(junk)] {
				junk[:cap(junk)][1+i] = 0xa5
			}
			got := appendPacked(junk, vals, w)
			require.Equal(t, want, got, "w=%d n=%d", w, n)
			require.Equal(t, want, appendPacked([]byte{0xee}, vals, w), "w=%d n=%d (no spare capacity)", w, n)

			out, rest, err := decodePacked([]uint64{7}, append(got[1:], 0xcc), n, w)
			require.NoError(t, err)
			require.Equal(t, []byte{0xcc}, rest)
			require.Equal(t, append([]uint64{7}, refUnpack(got[1:], n, w)...), out, "w=%d n=%d", w, n)
			require.Equal(t, append([]uint64{7}, vals...), out, "w=%d n=%d", w, n)
			if w <= 32 {
				u32 := make([]uint32, n)
				for i, v := range vals {
					u32[i] = uint32(v)
				}
				require.Equal(t, want, appendPacked([]byte{0xee}, u32, w), "w=%d n=%d uint32", w, n)
				o32, _, err := decodePacked([]uint32{}, got[1:], n, w)
				require.NoError(t, err)
				require.Equal(t, u32, o32, "w=%d n=%d uint32", w, n)
			}
			i64 := make([]int64, n)
			unpack(i64, got[1:], uint(w), 0)
			for i, v := range vals {
				require.Equal(t, v, uint64(i64[i]), "w=%d n=%d value %d", w, n, i)
			}
			base := uint64(rng.Int64())
			unpack(i64, got[1:], uint(w), base)
			for i, v := range vals {
				require.Equal(t, v+base, uint64(i64[i]), "w=%d n=%d value %d plus %d", w, n, i, base)
			}
		}
	}
}

// int64Adversarial returns chunks of int64 values of many shapes: every width of FOR and
// delta, the ends of the int64 range, deltas that wrap.
func int64Adversarial(rng *rand.Rand) [][]int64 {
	var out [][]int64
	for _, n := range kernelCounts {
		for w := 0; w <= 64; w++ {
			u := randWidth(rng, n, w)
			forv := make([]int64, n)
			delta := make([]int64, n)
			base := int64(rng.Uint64())
			acc := base
			for i, x := range u {
				forv[i] = int64(uint64(base) + x)
				acc = int64(uint64(acc) + x) // wraps
				delta[i] = acc
			}
			out = append(out, forv, delta)
		}
		ends := make([]int64, n)
		for i := range ends {
			ends[i] = []int64{math.MinInt64, math.MaxInt64, 0, -1, 1}[rng.IntN(5)]
		}
		out = append(out, ends)
	}
	return append(out, []int64{math.MinInt64, math.MaxInt64}, []int64{math.MaxInt64, math.MinInt64},
		[]int64{math.MaxInt64, math.MaxInt64}, []int64{math.MinInt64})
}

func TestInt64sMatchReference(t *testing.T) {
	seed := uint64(14)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	for k, vals := range int64Adversarial(rng) {
		want := refInt64s([]byte{0xee}, vals)
		got := appendInt64s([]byte{0xee}, vals)
		require.Equal(t, want, got, "chunk %d (%d values)", k, len(vals))
		require.Equal(t, len(got)-1, int64sSize(vals), "chunk %d", k)
		dec, rest, err := decodeInt64s([]int64{5}, append(got[1:], 0xcc), len(vals))
		require.NoError(t, err, "chunk %d", k)
		require.Equal(t, []byte{0xcc}, rest)
		require.Equal(t, append([]int64{5}, vals...), dec, "chunk %d", k)
	}
}

// TestPlanInt64sSample: a chunk of planSampleMin values or more whose first planSample deltas
// span more bits than its values is planned without the other deltas; the plan is the one
// from every delta (and the bytes the reference encoder's), at and around the sizes where the
// sample starts, for values narrow and wide, deltas wide only in the sample or only after it,
// and a least value far below the first (whose varint the delta head saves).
func TestPlanInt64sSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 4))
	full := func(vals []int64) intPlan {
		if len(vals) == 0 {
			return planOf(vals, 0, 0, 0, 0, false)
		}
		lo, hi, dlo, dhi := int64Ranges(vals)
		return planOf(vals, lo, hi, dlo, dhi, true)
	}
	skipped := 0
	for _, n := range []int{planSampleMin - 1, planSampleMin, planSampleMin + 1, planSample + planSampleMin, 16384} {
		for w := 1; w <= 63; w += 2 {
			shapes := map[string][]int64{}
			mk := func(name string, f func(i int) int64) {
				v := make([]int64, n)
				for i := range v {
					v[i] = f(i)
				}
				shapes[name] = v
			}
			span := int64(1) << (w - 1)
			mk("random", func(int) int64 { return rng.Int64N(span) - span/2 })
			mk("sorted", func(i int) int64 { return int64(i)*3 + rng.Int64N(3) })
			mk("wide sample, then sorted", func(i int) int64 {
				if i <= planSample {
					return rng.Int64N(span)
				}
				return span + int64(i)
			})
			mk("sorted sample, then wide", func(i int) int64 {
				if i <= planSample {
					return int64(i)
				}
				return rng.Int64N(span)
			})
			mk("least far below the first", func(i int) int64 {
				switch i {
				case 0:
					return 0
				case n / 2:
					return math.MinInt64 / 2
				}
				return rng.Int64N(span)
			})
			for name, vals := range shapes {
				got, want := planInt64s(vals), full(vals)
				require.Equal(t, want, got, "%s: n %d, w %d", name, n, w)
				require.Equal(t, refInt64s(nil, vals), appendInt64s(nil, vals), "%s: n %d, w %d", name, n, w)
				if n >= planSampleMin {
					if dlo, dhi := deltaRange(vals[:planSample+1]); want.enc != intConstant &&
						bitWidth(uint64(dhi)-uint64(dlo)) > bitWidth(uint64(slices.Max(vals))-uint64(slices.Min(vals))) {
						skipped++
					}
				}
			}
		}
	}
	require.Greater(t, skipped, 50, "chunks planned from the sample")
	for _, vals := range [][]int64{{5}, {5, 6, 5, 9, 1}, {3, 4, -7, 2, 8, 1, 0, 9}, make([]int64, 1027)} {
		lo, hi := minMax(vals)
		require.Equal(t, [2]int64{slices.Min(vals), slices.Max(vals)}, [2]int64{lo, hi})
	}
}

func TestEFMatchesReference(t *testing.T) {
	seed := uint64(14)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	shapes := efShapes()
	for _, n := range kernelCounts[1:] {
		for _, spread := range []uint32{1, 2, 3, 17, 1000, 1 << 20} {
			vals := make([]uint32, 0, n)
			v := uint32(rng.IntN(100))
			for range n {
				if uint64(v) >= 1<<32-uint64(spread) {
					break
				}
				vals = append(vals, v)
				v += 1 + uint32(rng.IntN(int(spread)))
			}
			shapes = append(shapes, vals)
		}
	}
	for k, vals := range shapes {
		want := refEF([]byte{0xee}, vals)
		require.Equal(t, want, appendEFRows([]byte{0xee}, vals), "shape %d", k)
		words := make([]uint64, vals[len(vals)-1]/64+1)
		for _, v := range vals {
			words[v/64] |= 1 << (v % 64)
		}
		require.Equal(t, want, appendEFWords([]byte{0xee}, words, len(vals), vals[len(vals)-1]), "shape %d words", k)
		p := beginEF([]byte{0xee}, len(vals), vals[len(vals)-1])
		for _, v := range vals {
			p.add(v)
		}
		require.Equal(t, want, p.finish(), "shape %d one at a time", k)
		require.Len(t, want, 1+efSize(len(vals), vals[len(vals)-1]))
	}
}
