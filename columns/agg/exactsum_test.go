package agg

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// bigSum is the reference: an exact sum in math/big, rounded once.
func bigSum(xs []float64) float64 {
	acc := new(big.Float).SetPrec(4096)
	for _, x := range xs {
		acc.Add(acc, new(big.Float).SetPrec(4096).SetFloat64(x))
	}
	f, _ := acc.Float64()
	return f
}

func TestExactSum(t *testing.T) {
	seed := uint64(20261130)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	gens := []func() float64{
		func() float64 { return rng.NormFloat64() * 1e6 },
		func() float64 { return float64(rng.IntN(1000)) },
		func() float64 { return math.Float64frombits(rng.Uint64()) }, // any bits, NaN included
		func() float64 { return math.Ldexp(rng.Float64()-0.5, rng.IntN(2100)-1075) },
		func() float64 { return math.Ldexp(rng.Float64(), -1074+rng.IntN(60)) }, // subnormals
		func() float64 { return math.Ldexp(rng.Float64(), 1000+rng.IntN(24)) },  // near overflow
		func() float64 { return []float64{1e308, -1e308, 1, -1, 1e-300, 0.1}[rng.IntN(6)] },
	}
	for round := 0; round < 3000; round++ {
		g := gens[round%len(gens)]
		n := 1 + rng.IntN(40)
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = g()
		}
		var s ExactSum
		for _, x := range xs {
			s.add(x)
		}
		got := s.Value()
		want := bigSumSpecial(xs)
		if math.IsNaN(want) {
			require.True(t, math.IsNaN(got), "round %d: %v", round, xs)
			continue
		}
		require.Equal(t, math.Float64bits(want), math.Float64bits(got), "round %d: %v: got %v want %v", round, xs, got, want)
		// Any order, and any split merged back, gives the same bits.
		rng.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
		var a, b ExactSum
		k := rng.IntN(len(xs) + 1)
		for _, x := range xs[:k] {
			a.add(x)
		}
		for _, x := range xs[k:] {
			b.add(x)
		}
		a.merge(&b)
		require.Equal(t, math.Float64bits(got), math.Float64bits(a.Value()), "round %d shuffled", round)
	}
}

// bigSumSpecial handles infinities and NaN as IEEE 754 does, then sums the finite values exactly.
func bigSumSpecial(xs []float64) float64 {
	var pinf, ninf, nan bool
	var fin []float64
	for _, x := range xs {
		switch {
		case x != x:
			nan = true
		case math.IsInf(x, 1):
			pinf = true
		case math.IsInf(x, -1):
			ninf = true
		default:
			fin = append(fin, x)
		}
	}
	switch {
	case nan || pinf && ninf:
		return math.NaN()
	case pinf:
		return math.Inf(1)
	case ninf:
		return math.Inf(-1)
	}
	r := bigSum(fin)
	if r == 0 {
		// big.Float gives -0 for a sum of -0s only; ExactSum gives +0 unless hi stays -0.
		var s ExactSum
		for _, x := range fin {
			s.add(x)
		}
		if s.Value() == 0 {
			return s.Value()
		}
	}
	return r
}
