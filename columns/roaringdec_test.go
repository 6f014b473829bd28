package columns

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"
)

// eachRoaring hands fn the values of the bitmap serialized in src in pieces of at most len(buf),
// and returns the bytes the bitmap took.
func eachRoaring(src []byte, limit uint64, buf []uint32, fn func([]uint32) error) (int, error) {
	d := roaringDecoder{out: buf[:0], piece: len(buf)}
	return d.each(src, limit, fn)
}

// TestDecodeRoaring decodes what the roaring library writes, with and without run containers,
// whole and in pieces; a limit at the maximum and every truncation fail, a trailing byte is
// left as the tail.
func TestDecodeRoaring(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t, 21), 21))
	for round := 0; round < 400; round++ {
		bm := roaring.New()
		n := 1 + rng.IntN(400_000)
		switch rng.IntN(4) {
		case 0: // sparse
			for i := rng.IntN(50); i > 0; i-- {
				bm.Add(uint32(rng.IntN(n)))
			}
		case 1: // dense
			for r := 0; r < n; r++ {
				if rng.IntN(3) > 0 {
					bm.Add(uint32(r))
				}
			}
		case 2: // runs
			for i := rng.IntN(20); i > 0; i-- {
				a := rng.IntN(n)
				bm.AddRange(uint64(a), uint64(min(n, a+rng.IntN(70_000))))
			}
		default: // mixed density
			p := rng.Float64() * 0.2
			for r := 0; r < n; r++ {
				if rng.Float64() < p {
					bm.Add(uint32(r))
				}
			}
		}
		if rng.IntN(2) == 0 {
			bm.RunOptimize()
		}
		b, err := bm.ToBytes()
		require.NoError(t, err)
		got, rest, err := decodeRoaring([]uint32{7}, append(b, 0xAA), uint64(n))
		require.NoError(t, err, "round %d", round)
		require.Equal(t, []byte{0xAA}, rest)
		require.Equal(t, append([]uint32{7}, bm.ToArray()...), got, "round %d", round)
		var pieces []uint32
		piece := 1 + rng.IntN(5000)
		used, err := eachRoaring(b, uint64(n), make([]uint32, piece), func(rs []uint32) error {
			require.LessOrEqual(t, len(rs), piece)
			require.NotEmpty(t, rs)
			pieces = append(pieces, rs...)
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, len(b), used)
		require.Equal(t, bm.ToArray(), append([]uint32{}, pieces...), "round %d: pieces", round)
		// A limit at the maximum fails; so does every truncation.
		if !bm.IsEmpty() {
			_, _, err = decodeRoaring(nil, b, uint64(bm.Maximum()))
			require.ErrorIs(t, err, ErrCorrupt)
		}
		for _, cut := range []int{0, 1, 3, len(b) / 2, len(b) - 1} {
			if cut < len(b) {
				_, _, err = decodeRoaring(nil, b[:cut], uint64(n))
				require.ErrorIs(t, err, ErrCorrupt, "round %d cut %d", round, cut)
			}
		}
		// fn's error stops the walk and comes back as it is.
		if bm.GetCardinality() > 1 {
			stop := errors.New("stop")
			calls := 0
			_, err = eachRoaring(b, uint64(n), make([]uint32, 1), func([]uint32) error { calls++; return stop })
			require.Same(t, stop, err)
			require.Equal(t, 1, calls)
		}
	}
}

// TestDecodeRoaringOwnEncoder decodes what roaringEncoder writes.
func TestDecodeRoaringOwnEncoder(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t, 22), 22))
	var enc roaringEncoder
	for round := 0; round < 200; round++ {
		vals := randomRows(rng)
		b := enc.appendRows(nil, vals)
		got, rest, err := decodeRoaring(nil, b, 1<<32)
		require.NoError(t, err)
		require.Empty(t, rest)
		require.Equal(t, vals, got, "round %d", round)
	}
}

func FuzzDecodeRoaring(f *testing.F) {
	for _, vals := range [][]uint32{{}, {1}, {1, 2, 3, 70000}, {0, 65535, 65536}} {
		bm := roaring.BitmapOf(vals...)
		b, _ := bm.ToBytes()
		f.Add(b)
		bm.RunOptimize()
		b, _ = bm.ToBytes()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, rest, err := decodeRoaring(nil, b, 1<<20)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v does not wrap ErrCorrupt", err)
			}
			return
		}
		if len(rest) > len(b) {
			t.Fatalf("tail longer than the input")
		}
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("not increasing at %d", i)
			}
		}
		if len(got) > 0 && got[len(got)-1] >= 1<<20 {
			t.Fatalf("value %d past the limit", got[len(got)-1])
		}
		// What decodes whole also decodes in pieces, to the same values.
		var pieces []uint32
		n, err := eachRoaring(b, 1<<20, make([]uint32, 3), func(rs []uint32) error { pieces = append(pieces, rs...); return nil })
		if err != nil || n != len(b)-len(rest) || len(pieces) != len(got) {
			t.Fatalf("in pieces: %d values, %d bytes, %v; whole: %d values, %d bytes", len(pieces), n, err, len(got), len(b)-len(rest))
		}
	})
}
