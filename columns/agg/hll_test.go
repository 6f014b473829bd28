package agg

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/axiomhq/hyperloglog"
	"github.com/stretchr/testify/require"
)

// TestCheckSketch: the in-place check accepts every sketch the library writes (sparse and
// dense, any precision, canonical or not), and accepts a damaged sketch only when the decoder
// does too: it never says yes where the decoder says no.
func TestCheckSketch(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 2))
	var written [][]byte
	for _, p := range []uint8{4, 10, 14, 16, 18} {
		for _, n := range []int{0, 1, 2, 7, 100, 3000, 40000} {
			sk, err := hyperloglog.NewSketch(p, true)
			require.NoError(t, err)
			for i := 0; i < n; i++ {
				sk.Insert([]byte(strconv.Itoa(rng.Int())))
			}
			for _, canon := range []bool{false, true} {
				if canon {
					sk.Estimate() // compacts, as hll.Compact
				}
				b, err := sk.MarshalBinary()
				require.NoError(t, err)
				require.True(t, sketchDecodes(b), "p %d, %d values, canonical %v: the check rejects a sketch the library wrote", p, n, canon)
				require.NoError(t, hllSketches{}.Check(b))
				written = append(written, b)
			}
		}
	}
	agree, fallback := 0, 0
	for i := 0; i < 60000; i++ {
		b := append([]byte(nil), written[rng.IntN(len(written))]...)
		switch rng.IntN(5) {
		case 0:
			b = b[:rng.IntN(len(b)+1)]
		case 1:
			b = append(b, byte(rng.IntN(256)))
		case 2: // the header and the list's header, where the rules are
			for k := 1 + rng.IntN(2); k > 0; k-- {
				b[rng.IntN(min(len(b), 24))] ^= byte(1 << rng.IntN(8))
			}
		default:
			for k := 1 + rng.IntN(3); k > 0; k-- {
				b[rng.IntN(len(b))] = byte(rng.IntN(256))
			}
		}
		fast := sketchDecodes(b)
		_, lerr := hllSketches{}.Decode(b)
		lib := lerr == nil
		if fast {
			require.True(t, lib, "the check accepts %x, the decoder rejects it", b)
		}
		if fast == lib {
			agree++
		} else {
			fallback++
		}
	}
	t.Logf("damaged sketches: %d answered alike, %d left to the decoder (accepted by it)", agree, fallback)
}

func BenchmarkCheckSketch(b *testing.B) {
	sk := hyperloglog.New()
	sk.Insert([]byte("a"))
	sk.Insert([]byte("b"))
	raw, err := sk.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("check", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := (hllSketches{}).Check(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := (hllSketches{}).Decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
