package agg

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTableNamesUniqueAndLookup(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range All() {
		require.False(t, seen[a.Name], "duplicate %s", a.Name)
		seen[a.Name] = true
		got, ok := Lookup(a.Name)
		require.True(t, ok)
		require.Equal(t, a, got)
		require.NotZero(t, a.Type, a.Name)
		require.NotZero(t, a.Kind, a.Name)
		if a.Kind == Union {
			require.Equal(t, SketchType, a.Type, a.Name)
		}
	}
	_, ok := Lookup("LongSum")
	require.False(t, ok, "names are case-sensitive")
}

// TestFirstLastTies: equal times keep the first value for First and take the last for Last,
// through Add and through Merge of partial accumulators (as phases of a merge combine them).
func TestFirstLastTies(t *testing.T) {
	type row struct{ v, t int64 }
	rows := []row{{5, 100}, {6, 50}, {7, 50}, {8, 200}, {9, 200}, {1, 120}}
	f := func(k kind, want row) {
		t.Helper()
		a := NewLongAcc(k)
		for _, r := range rows {
			a.Add(k, r.v, r.t, false)
		}
		assert.Equal(t, want, row{a.V, a.t}, "%s by Add", k)
		// Every split into two consecutive parts merges to the same answer.
		for cut := 0; cut <= len(rows); cut++ {
			x, y := NewLongAcc(k), NewLongAcc(k)
			for _, r := range rows[:cut] {
				x.Add(k, r.v, r.t, false)
			}
			for _, r := range rows[cut:] {
				y.Add(k, r.v, r.t, false)
			}
			x.Merge(k, &y)
			assert.Equal(t, want, row{x.V, x.t}, "%s split at %d", k, cut)
		}
		d := NewDoubleAcc(k)
		for _, r := range rows {
			d.Add(k, float64(r.v), r.t, nil, false)
		}
		assert.Equal(t, float64(want.v), d.Value(k))
	}
	f(First, row{6, 50})
	f(Last, row{9, 200})
}

func TestLongKinds(t *testing.T) {
	f := func(k kind, vals []int64, want int64) {
		t.Helper()
		a := NewLongAcc(k)
		for _, v := range vals {
			a.Add(k, v, 0, false)
		}
		got, err := a.Value()
		require.NoError(t, err)
		require.Equal(t, want, got, "%s of %v", k, vals)
	}
	f(Sum, []int64{1, 2, 3}, 6)
	f(Sum, []int64{math.MaxInt64, 1, -1}, math.MaxInt64) // out of range on the way: still exact
	f(Min, []int64{4, -2, 9}, -2)
	f(Max, []int64{4, -2, 9}, 9)
	f(Min, nil, 0) // no value: null, stored as 0 (TestNulls)
	f(Max, nil, 0)
}

// TestTailKeepsSumsExact: a sum stored as Value plus Tail, added again, gives the exact sum of
// the original values, and the stored pair is the same however the values were split.
func TestTailKeepsSumsExact(t *testing.T) {
	seed := uint64(20261201)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	gen := func() float64 {
		switch rng.IntN(4) {
		case 0:
			return []float64{1e16, -1e16, 1, -1, 0.1, 1e308, -1e308, 1e-300}[rng.IntN(8)]
		case 1:
			return math.Ldexp(rng.Float64()-0.5, rng.IntN(2000)-1000)
		case 2:
			return float64(rng.IntN(1000))
		}
		return rng.NormFloat64() * 1e6
	}
	stored := func(xs []float64) (float64, []float64) {
		var s ExactSum
		for _, x := range xs {
			s.add(x)
		}
		return s.Value(), s.Tail(nil)
	}
	for round := 0; round < 2000; round++ {
		xs := make([]float64, 1+rng.IntN(12))
		for i := range xs {
			xs[i] = gen()
		}
		v, tail := stored(xs)
		// Exactness: value + tail equals the big.Float sum exactly.
		want := new(big.Float).SetPrec(4096)
		for _, x := range xs {
			want.Add(want, new(big.Float).SetPrec(4096).SetFloat64(x))
		}
		got := new(big.Float).SetPrec(4096).SetFloat64(v)
		for _, x := range tail {
			got.Add(got, new(big.Float).SetPrec(4096).SetFloat64(x))
		}
		if !math.IsInf(v, 0) {
			require.Zero(t, want.Cmp(got), "round %d: %v -> %v + %v", round, xs, v, tail)
		}
		// Canonical: summing stored pairs of any split gives the same pair.
		cut := rng.IntN(len(xs) + 1)
		v1, t1 := stored(xs[:cut])
		v2, t2 := stored(xs[cut:])
		if math.IsInf(v1, 0) || math.IsInf(v2, 0) {
			continue // a partial sum past the float64 range is stored as an infinity: lossy by nature
		}
		var s ExactSum
		s.add(v2)
		s.addAll(t2)
		s.add(v1)
		s.addAll(t1)
		require.Equal(t, math.Float64bits(v), math.Float64bits(s.Value()), "round %d", round)
		require.Equal(t, tail, s.Tail(nil), "round %d", round)
	}
	v, tail := stored([]float64{1e16, 1, -1e16})
	require.Equal(t, 1.0, v)
	require.Empty(t, tail)
	v, tail = stored([]float64{1e16, 1})
	require.Equal(t, 1e16, v)
	require.Equal(t, []float64{1}, tail)
}

// A doubleSum stored as its rounded value and its tail stays exact when stored sums are added
// again, as merges do.
func ExampleExactSum_Tail() {
	var a, b ExactSum
	a.add(1e16)
	a.add(1) // 1e16 + 1 rounds to 1e16: the 1 is kept in the tail
	b.add(-1e16)
	fmt.Println(a.Value(), a.Tail(nil))

	var merged ExactSum
	merged.add(a.Value())
	merged.addAll(a.Tail(nil))
	merged.add(b.Value())
	fmt.Println(merged.Value())
	// Output:
	// 1e+16 [1]
	// 1
}

// First keeps the value of the earliest time, the first of equal times in input order.
func ExampleLongAcc() {
	acc := NewLongAcc(First)
	acc.Add(First, 7, 200, false)
	acc.Add(First, 8, 100, false)
	acc.Add(First, 9, 100, false)
	fmt.Println(acc.V, acc.t)
	// Output: 8 100
}

// TestLongSumExactOrError: a sum of longs is the exact sum whatever the order of its values
// and however they are split and merged, or, when that does not fit an int64, ErrOverflow;
// never a wrapped value. Checked against math/big on values near the ends of int64.
func TestLongSumExactOrError(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 11))
	near := []int64{math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 1, -1, 0, 1 << 62, -(1 << 62)}
	for range 2000 {
		vals := make([]int64, 1+r.IntN(6))
		exact := new(big.Int)
		for i := range vals {
			vals[i] = near[r.IntN(len(near))]
			exact.Add(exact, big.NewInt(vals[i]))
		}
		fits := exact.IsInt64()
		check := func(a LongAcc, how string) {
			t.Helper()
			v, err := a.Value()
			if fits {
				require.NoError(t, err, "%v %s", vals, how)
				require.Equal(t, exact.Int64(), v, "%v %s", vals, how)
			} else {
				require.ErrorIs(t, err, ErrOverflow, "%v %s", vals, how)
				require.ErrorContains(t, err, "the exact sum "+exact.String()+" is outside the int64 range")
			}
		}
		a := NewLongAcc(Sum)
		for _, v := range vals {
			a.Add(Sum, v, 0, false)
		}
		check(a, "by Add")
		r.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
		cut := r.IntN(len(vals) + 1)
		x, y := NewLongAcc(Sum), NewLongAcc(Sum)
		for _, v := range vals[:cut] {
			x.Add(Sum, v, 0, false)
		}
		for _, v := range vals[cut:] {
			y.Add(Sum, v, 0, false)
		}
		x.Merge(Sum, &y)
		check(x, "shuffled, split and merged")
	}
	// Min and Max never carry.
	for _, k := range []kind{Min, Max} {
		v, c := k.CombineLong(math.MaxInt64, math.MinInt64)
		require.Zero(t, c)
		require.Equal(t, map[kind]int64{Min: math.MinInt64, Max: math.MaxInt64}[k], v)
	}
	s, c := AddLong(math.MaxInt64, 1)
	require.Equal(t, [2]int64{math.MinInt64, 1}, [2]int64{s, c})
	s, c = AddLong(math.MinInt64, -1)
	require.Equal(t, [2]int64{math.MaxInt64, -1}, [2]int64{s, c})
}
