package source

import (
	"math/rand/v2"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"
)

func TestAppendRoaringRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 21))
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
		got, err := AppendRoaringRows([]uint32{7}, b, uint64(n))
		require.NoError(t, err, "round %d", round)
		require.Equal(t, append([]uint32{7}, bm.ToArray()...), got, "round %d", round)
		var pieces collectSink
		require.NoError(t, EachRoaringRows(b, uint64(n), make([]uint32, 1+rng.IntN(5000)), &pieces))
		require.Equal(t, bm.ToArray(), append([]uint32{}, pieces.rs...), "round %d: pieces", round)
		// A limit at the maximum fails; so does every truncation and a trailing byte.
		if !bm.IsEmpty() {
			_, err = AppendRoaringRows(nil, b, uint64(bm.Maximum()))
			require.ErrorIs(t, err, errRoaring)
		}
		for _, cut := range []int{0, 1, 3, len(b) / 2, len(b) - 1} {
			if cut < len(b) {
				_, err = AppendRoaringRows(nil, b[:cut], uint64(n))
				require.ErrorIs(t, err, errRoaring, "round %d cut %d", round, cut)
			}
		}
		_, err = AppendRoaringRows(nil, append(b, 0), uint64(n))
		require.ErrorIs(t, err, errRoaring)
	}
}

func FuzzAppendRoaringRows(f *testing.F) {
	for _, vals := range [][]uint32{{}, {1}, {1, 2, 3, 70000}, {0, 65535, 65536}} {
		bm := roaring.BitmapOf(vals...)
		b, _ := bm.ToBytes()
		f.Add(b)
		bm.RunOptimize()
		b, _ = bm.ToBytes()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := AppendRoaringRows(nil, b, 1<<20)
		if err != nil {
			return
		}
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("not increasing at %d", i)
			}
		}
	})
}

type collectSink struct{ rs []uint32 }

func (c *collectSink) Rows(rs []uint32) error { c.rs = append(c.rs, rs...); return nil }
