package agg

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// nullable is a value of a test: v, or null.
type nullable struct {
	v    int64
	t    int64
	null bool
}

// oracleLong is the rule written plainly: drop the nulls, then combine what is left; nothing
// left is null (0 for count).
func oracleLong(x Agg, vals []nullable) (int64, bool) {
	var kept []nullable
	for _, v := range vals {
		if !v.null {
			kept = append(kept, v)
		}
	}
	if len(kept) == 0 {
		return 0, x.Nullable()
	}
	out := kept[0]
	for _, v := range kept[1:] {
		switch x.Kind {
		case Sum:
			out.v += v.v
		case Min:
			out.v = min(out.v, v.v)
		case Max:
			out.v = max(out.v, v.v)
		case First:
			if v.t < out.t {
				out = v
			}
		case Last:
			if v.t >= out.t {
				out = v
			}
		case Union:
		}
	}
	return out.v, false
}

// TestNullsLong: every long aggregator skips nulls through Add, through Merge of any split, and
// through LongAccOf of a stored partial result; all-null is null but for count; a null's value
// and time are 0; a null never wins First or Last whatever its time.
func TestNullsLong(t *testing.T) {
	seed := uint64(1313)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, x := range All() {
		if x.Type != Long {
			continue
		}
		k := x.Kind
		for round := 0; round < 500; round++ {
			vals := make([]nullable, rng.IntN(8))
			p := []float64{0, 1.0 / 15, 0.25, 0.5, 1}[round%5]
			for i := range vals {
				vals[i] = nullable{v: rng.Int64N(200) - 100, t: rng.Int64N(5)}
				if rng.Float64() < p {
					// A null carries garbage: it must not matter.
					vals[i] = nullable{v: -1 << 40, t: -1, null: true}
				}
			}
			want, wantNull := oracleLong(x, vals)
			a := NewLongAcc(k)
			for _, v := range vals {
				a.Add(k, v.v, v.t, v.null)
			}
			got, err := a.Value()
			require.NoError(t, err)
			require.Equal(t, wantNull, a.Null(x), "%s %v", x.Name, vals)
			require.Equal(t, want, got, "%s %v", x.Name, vals)
			if !a.Set {
				require.Zero(t, a.Time())
			}
			for cut := 0; cut <= len(vals); cut++ {
				l, r := NewLongAcc(k), NewLongAcc(k)
				for _, v := range vals[:cut] {
					l.Add(k, v.v, v.t, v.null)
				}
				for _, v := range vals[cut:] {
					r.Add(k, v.v, v.t, v.null)
				}
				// The left part stored (as a rolled-up row is) and resumed.
				lv, err := l.Value()
				require.NoError(t, err)
				resumed := LongAccOf(k, lv, 0, l.Time(), l.Null(x) || !l.Set)
				resumed.Merge(k, &r)
				got, err := resumed.Value()
				require.NoError(t, err)
				require.Equal(t, want, got, "%s %v split %d", x.Name, vals, cut)
				require.Equal(t, wantNull, resumed.Null(x))
			}
		}
	}
	// The examples of the issue: a longMin over rows with missing delays is not 0.
	mn, _ := Lookup("longMin")
	a := NewLongAcc(Min)
	a.Add(Min, 7, 0, false)
	a.Add(Min, 0, 0, true)
	a.Add(Min, 3, 0, false)
	v, _ := a.Value()
	require.Equal(t, int64(3), v)
	require.False(t, a.Null(mn))
	cnt, _ := Lookup("count")
	empty := NewLongAcc(Sum)
	require.False(t, empty.Null(cnt), "count is never null")
	sum, _ := Lookup("longSum")
	require.True(t, empty.Null(sum), "a sum of no value is null, not 0")
}

// TestNullsDouble: the same rules for doubles, doubleSum's exactness included.
func TestNullsDouble(t *testing.T) {
	rng := rand.New(rand.NewPCG(77, 2))
	for _, x := range All() {
		if x.Type != Double {
			continue
		}
		k := x.Kind
		for round := 0; round < 300; round++ {
			vals := make([]nullable, rng.IntN(8))
			p := []float64{0, 1.0 / 15, 0.25, 0.5, 1}[round%5]
			for i := range vals {
				vals[i] = nullable{v: rng.Int64N(200) - 100, t: rng.Int64N(5)}
				if rng.Float64() < p {
					vals[i] = nullable{v: 1 << 50, t: -1, null: true}
				}
			}
			want, wantNull := oracleLong(Agg{Type: Long, Kind: k}, vals) // small whole numbers: exact
			a := NewDoubleAcc(k)
			for _, v := range vals {
				a.Add(k, float64(v.v), v.t, nil, v.null)
			}
			require.Equal(t, wantNull, a.Null(x), "%s %v", x.Name, vals)
			require.Equal(t, float64(want), a.Value(k), "%s %v", x.Name, vals)
			if wantNull {
				require.Equal(t, uint64(0), math.Float64bits(a.Value(k)), "+0, not -0 or an identity")
			}
			for cut := 0; cut <= len(vals); cut++ {
				l, r := NewDoubleAcc(k), NewDoubleAcc(k)
				for _, v := range vals[:cut] {
					l.Add(k, float64(v.v), v.t, nil, v.null)
				}
				for _, v := range vals[cut:] {
					r.Add(k, float64(v.v), v.t, nil, v.null)
				}
				l.Merge(k, &r)
				require.Equal(t, float64(want), l.Value(k), "%s %v split %d", x.Name, vals, cut)
				require.Equal(t, wantNull, l.Null(x))
			}
		}
	}
}

// TestNullsBatch: AddLongs and AddDoubles give what LongAcc.Add and DoubleAcc.Add give, value
// by value, with and without nulls.
func TestNullsBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, x := range All() {
		if x.Type == SketchType {
			continue
		}
		k := x.Kind
		for round := 0; round < 50; round++ {
			n := rng.IntN(40)
			gid := make([]int32, n)
			vals := make([]int64, n)
			dvals := make([]float64, n)
			times := make([]int64, n)
			var null []bool
			if round%2 == 1 {
				null = make([]bool, n)
			}
			for i := range n {
				gid[i] = int32(rng.IntN(4))
				vals[i] = rng.Int64N(100) - 50
				if rng.IntN(10) == 0 {
					vals[i] = math.MaxInt64 - rng.Int64N(3)
				}
				dvals[i] = float64(vals[i]) / 4
				times[i] = rng.Int64N(5)
				if null != nil {
					null[i] = rng.IntN(3) == 0
				}
			}
			la, lb := make([]LongAcc, 4), make([]LongAcc, 4)
			da, db := make([]DoubleAcc, 4), make([]DoubleAcc, 4)
			for g := range 4 {
				la[g], lb[g] = NewLongAcc(k), NewLongAcc(k)
				da[g], db[g] = NewDoubleAcc(k), NewDoubleAcc(k)
			}
			AddLongs(k, la, gid, vals, times, null)
			AddDoubles(k, da, gid, dvals, times, null)
			for i := range n {
				isNull := null != nil && null[i]
				lb[gid[i]].Add(k, vals[i], times[i], isNull)
				db[gid[i]].Add(k, dvals[i], times[i], nil, isNull)
			}
			for g := range 4 {
				require.Equal(t, lb[g], la[g], "%s group %d", x.Name, g)
				require.Equal(t, db[g].Value(k), da[g].Value(k), "%s group %d", x.Name, g)
				require.Equal(t, db[g].Null(x), da[g].Null(x))
			}
		}
	}
}
