package agg

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func quantileSketches(t testing.TB, params string) Sketches {
	t.Helper()
	a, ok := Lookup("quantiles")
	require.True(t, ok)
	var p map[string]json.RawMessage
	if params != "" {
		require.NoError(t, json.Unmarshal([]byte(params), &p))
	}
	sks, err := a.SketchesOf(p)
	require.NoError(t, err)
	require.True(t, NumericInput(sks))
	return sks
}

func insertAll(t testing.TB, sk Sketch, vals []string) {
	t.Helper()
	for _, v := range vals {
		require.NoError(t, sk.Insert([]byte(v)))
	}
}

func sketchBytes(t testing.TB, sk Sketch) []byte {
	t.Helper()
	b, err := sk.AppendBinary(nil)
	require.NoError(t, err)
	return b
}

// latencies returns n heavy-tailed values (log-normal, as latencies in ms), some of them 0 or
// negative, as text.
func latencies(rng *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		v := math.Exp(3 + 1.5*rng.NormFloat64())
		switch rng.IntN(50) {
		case 0:
			v = 0
		case 1:
			v = -v
		}
		if rng.IntN(2) == 0 {
			out[i] = strconv.FormatInt(int64(v), 10)
		} else {
			out[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	return out
}

// TestQuantilesCanonical: the same values inserted in any order, split over any merge tree,
// give the same bytes; decoding and encoding again gives them too.
func TestQuantilesCanonical(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	sks := quantileSketches(t, "")
	for round := 0; round < 30; round++ {
		vals := latencies(rng, rng.IntN(3000))
		one := sks.New()
		insertAll(t, one, vals)
		want := sketchBytes(t, one)

		shuffled := slices.Clone(vals)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		// Split into pieces, merged in a random tree.
		var parts []Sketch
		for len(shuffled) > 0 {
			k := min(len(shuffled), 1+rng.IntN(200))
			p := sks.New()
			insertAll(t, p, shuffled[:k])
			if rng.IntN(2) == 0 { // through bytes
				d, err := sks.Decode(sketchBytes(t, p))
				require.NoError(t, err)
				p = d
			}
			parts = append(parts, p)
			shuffled = shuffled[k:]
		}
		for len(parts) > 1 {
			i := rng.IntN(len(parts) - 1)
			require.NoError(t, parts[i].Merge(parts[i+1]))
			parts = slices.Delete(parts, i+1, i+2)
		}
		got := want
		if len(parts) == 1 {
			got = sketchBytes(t, parts[0])
		}
		require.Equal(t, want, got, "round %d", round)
		back, err := sks.Decode(want)
		require.NoError(t, err)
		require.Equal(t, want, sketchBytes(t, back))
		require.Equal(t, float64(len(vals)), back.Estimate())
		require.Equal(t, want, sketchBytes(t, back.Clone()))
	}
	empty := sketchBytes(t, sks.New())
	require.Len(t, empty, 12)
}

// TestQuantilesAccuracy: each quantile is within the relative accuracy of the lower quantile
// (rank floor(q*(n-1)) of the sorted values).
func TestQuantilesAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for _, acc := range []string{"", `{"accuracy": 0.02}`, `{"accuracy": 0.001}`} {
		sks := quantileSketches(t, acc)
		rel := sks.(*ddSketches).acc
		vals := latencies(rng, 20000)
		sk := sks.New()
		insertAll(t, sk, vals)
		nums := make([]float64, len(vals))
		for i, v := range vals {
			nums[i], _ = strconv.ParseFloat(v, 64)
		}
		slices.Sort(nums)
		for _, q := range []float64{0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1} {
			r := q * float64(len(nums)-1)
			exact := nums[int(r)]
			if exact < 0 { // the library ranks negative values from the other end
				exact = nums[int(math.Ceil(r))]
			}
			got, err := sk.(Quantiler).Quantile(q)
			require.NoError(t, err)
			require.InDelta(t, exact, got, rel*math.Abs(exact)+1e-9, "accuracy %v quantile %v", rel, q)
		}
	}
	_, err := quantileSketches(t, "").New().(Quantiler).Quantile(0.5)
	require.Error(t, err, "an empty sketch has no quantile")
}

func TestQuantilesParams(t *testing.T) {
	a, _ := Lookup("quantiles")
	f := func(params, want string) {
		t.Helper()
		var p map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(params), &p))
		_, err := a.SketchesOf(p)
		require.ErrorContains(t, err, want)
	}
	f(`{"accuracy": 0}`, "want a relative accuracy in (0, 1)")
	f(`{"accuracy": 1.5}`, "want a relative accuracy in (0, 1)")
	f(`{"accuracy": "x"}`, "accuracy")
	f(`{"k": 200}`, `unknown parameter "k"`)
	h, _ := Lookup("hyperUnique")
	_, err := h.SketchesOf(map[string]json.RawMessage{"accuracy": json.RawMessage("0.1")})
	require.ErrorContains(t, err, `takes no parameter "accuracy"`)
	l, _ := Lookup("longSum")
	_, err = l.SketchesOf(map[string]json.RawMessage{"accuracy": json.RawMessage("0.1")})
	require.ErrorContains(t, err, `takes no parameter "accuracy"`)

	// Sketches of another accuracy do not decode or merge.
	s1, s2 := quantileSketches(t, ""), quantileSketches(t, `{"accuracy": 0.05}`)
	b := sketchBytes(t, s1.New())
	_, err = s2.Decode(b)
	require.ErrorIs(t, err, errSketch)
	require.Error(t, s2.New().Merge(s1.New()))
	require.Error(t, s1.New().Insert([]byte("NaN")))
	require.Error(t, s1.New().Insert([]byte("abc")))
}

// TestQuantilesBadBytes: damaged bytes are an error wrapping errSketch, never a panic; what
// decodes encodes back to the same bytes (the encoding is canonical).
func TestQuantilesBadBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 9))
	sks := quantileSketches(t, "")
	sk := sks.New()
	insertAll(t, sk, latencies(rng, 500))
	good := sketchBytes(t, sk)
	for _, b := range [][]byte{nil, {1}, good[:9], good[:len(good)-1], append(slices.Clone(good), 0)} {
		_, err := sks.Decode(b)
		require.ErrorIs(t, err, errSketch, "%x", b)
	}
	for i := 0; i < 20000; i++ {
		b := slices.Clone(good)
		for k := 1 + rng.IntN(3); k > 0; k-- {
			b[9+rng.IntN(len(b)-9)] = byte(rng.IntN(256))
		}
		checkDecode(t, sks, b)
	}
}

func checkDecode(t *testing.T, sks Sketches, b []byte) {
	d, err := sks.Decode(b)
	if err != nil {
		require.True(t, errors.Is(err, errSketch), "%v", err)
		require.Error(t, sks.Check(b))
		return
	}
	require.NoError(t, sks.Check(b))
	if !bytes.Equal(sketchBytes(t, d), b) {
		t.Fatalf("%x decodes, but encodes as %x", b, sketchBytes(t, d))
	}
}

func FuzzQuantilesDecode(f *testing.F) {
	sks := quantileSketches(f, "")
	sk := sks.New()
	insertAll(f, sk, []string{"1", "2", "3", "250", "-4", "0", "1e9"})
	f.Add(sketchBytes(f, sk))
	f.Add(sketchBytes(f, sks.New()))
	f.Fuzz(func(t *testing.T, b []byte) { checkDecode(t, sks, b) })
}
