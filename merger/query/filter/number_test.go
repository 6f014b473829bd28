package filter

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFloorCeil: floorCeil equals big.Rat's floor and ceiling on numbers written many ways,
// and bounds huge and tiny ones without computing them.
func TestFloorCeil(t *testing.T) {
	f := func(n Number, floor, ceil string) {
		t.Helper()
		fl, ce := n.floorCeil()
		require.Equal(t, floor, fl.String(), n)
		require.Equal(t, ceil, ce.String(), n)
	}
	f("10", "10", "10")
	f("10.5", "10", "11")
	f("-10.5", "-11", "-10")
	f("-0", "0", "0")
	f(".5", "0", "1")
	f("-.5", "-1", "0")
	f("1.", "1", "1")
	f("1.50e1", "15", "15")
	f("15e-1", "1", "2")
	f("9223372036854775807", "9223372036854775807", "9223372036854775807")
	f("9223372036854775807.5", "9223372036854775807", "9223372036854775808")
	f("-9223372036854775808.000000001", "-9223372036854775809", "-9223372036854775808")
	f("1e99999999999999999999", "1000000000000000000000", "1000000000000000000000")
	f("-1e400", "-1000000000000000000000", "-1000000000000000000000")
	f("1e-99999999999999999999", "0", "1")
	f("-1e-400", "-1", "0")
	f("0.000e999999", "0", "0")

	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		n := fmt.Sprintf("%d.%0*d", rng.Int64N(1<<62)-(1<<61), rng.IntN(8), rng.IntN(1000))
		if rng.IntN(2) == 0 {
			n += fmt.Sprintf("e%d", rng.IntN(40)-20)
		}
		r, ok := new(big.Rat).SetString(n)
		require.True(t, ok, n)
		fl := new(big.Int).Quo(r.Num(), r.Denom())
		if r.Sign() < 0 && !r.IsInt() {
			fl.Sub(fl, big.NewInt(1))
		}
		ce := new(big.Int).Set(fl)
		if !r.IsInt() {
			ce.Add(ce, big.NewInt(1))
		}
		lim := new(big.Int).Exp(big.NewInt(10), big.NewInt(21), nil)
		if new(big.Int).Abs(fl).Cmp(lim) >= 0 { // saturated: past every int64 either way
			if fl.Sign() < 0 {
				lim.Neg(lim)
			}
			fl, ce = lim, lim
		}
		f(Number(n), fl.String(), ce.String())
	}
}

// TestIntSpan: a comparison with an int64 column is exact, also past 2^53 and with decimals.
func TestIntSpan(t *testing.T) {
	f := func(expr string, in []int64, out []int64) {
		t.Helper()
		c := MustParse(expr).(cmpFilter)
		sp := c.intSpan()
		for _, v := range in {
			require.Equal(t, []uint32{0}, sp.match(nil, 0, []int64{v}), "%s holds for %d", expr, v)
		}
		for _, v := range out {
			require.Empty(t, sp.match(nil, 0, []int64{v}), "%s does not hold for %d", expr, v)
		}
	}
	const big = 1 << 53
	f("x > 10.5", []int64{11, math.MaxInt64}, []int64{10, -11})
	f("x >= 10.5", []int64{11}, []int64{10})
	f("x < -10.5", []int64{-11, math.MinInt64}, []int64{-10})
	f("x <= -10.5", []int64{-11}, []int64{-10})
	f("x = 10.5", nil, []int64{10, 11})
	f("x != 10.5", []int64{10, 11}, nil)
	f("x = 9007199254740993", []int64{big + 1}, []int64{big, big + 2})
	f("x > 9007199254740992", []int64{big + 1}, []int64{big})
	f("x = 9223372036854775807", []int64{math.MaxInt64}, []int64{math.MaxInt64 - 1})
	f("x > 9223372036854775807", nil, []int64{math.MaxInt64})
	f("x >= 9223372036854775807.1", nil, []int64{math.MaxInt64})
	f("x < -9223372036854775808", nil, []int64{math.MinInt64})
	f("x <= -9223372036854775808", []int64{math.MinInt64}, []int64{math.MinInt64 + 1})
	f("x > 1e30", nil, []int64{math.MaxInt64})
	f("x > -1e30", []int64{math.MinInt64}, nil)
	f("x between 1.5 and 3.5", []int64{2, 3}, []int64{1, 4})
	f("x between 3 and 1", nil, []int64{1, 2, 3})
	f("x not between 3 and 1", []int64{1, 2, 3}, nil)
	f("x not between -1 and 1", []int64{-2, 2}, []int64{-1, 0, 1})
	f("x between 1e-30 and 1", []int64{1}, []int64{0})
}

// TestFloatSpan: a double column compares with the number rounded to float64, as SQL does.
func TestFloatSpan(t *testing.T) {
	f := func(expr string, in []float64, out []float64) {
		t.Helper()
		sp := MustParse(expr).(cmpFilter).floatSpan()
		for _, v := range in {
			require.Len(t, sp.match(nil, 0, []float64{v}), 1, "%s holds for %v", expr, v)
		}
		for _, v := range out {
			require.Empty(t, sp.match(nil, 0, []float64{v}), "%s does not hold for %v", expr, v)
		}
	}
	f("x = 0.1", []float64{0.1}, []float64{math.Nextafter(0.1, 1)})
	f("x > 0.1", []float64{math.Nextafter(0.1, 1), math.Inf(1)}, []float64{0.1, math.NaN()})
	f("x < 0.1", []float64{math.Nextafter(0.1, 0), math.Inf(-1)}, []float64{0.1, math.NaN()})
	f("x != 0.1", []float64{0.2, math.NaN()}, []float64{0.1})
	f("x > 1e400", nil, []float64{math.MaxFloat64, math.Inf(1)})
	f("x < -1e400", nil, []float64{-math.MaxFloat64, math.Inf(-1)})
	f("x between -1 and 1", []float64{-1, 0, 1, math.Copysign(0, -1)}, []float64{1.0000001, math.NaN()})
}
