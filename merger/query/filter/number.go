package filter

import (
	"math"
	"math/big"
	"strconv"
	"strings"
)

// bigMax and bigMin are the int64 bounds as big integers.
var (
	bigMax = big.NewInt(math.MaxInt64)
	bigMin = big.NewInt(math.MinInt64)
	bigOne = big.NewInt(1)
)

// floorCeil returns the greatest integer at or below n and the least at or above it, exactly.
// A number whose magnitude is 10^21 or more gives ±10^21 for both (past every int64, which is
// all that matters for comparisons with int64 values), one nonzero below 10^-21 in magnitude
// gives 0 and ±1: the work is bounded by the number's length, whatever its exponent.
func (n Number) floorCeil() (floor, ceil *big.Int) {
	s := string(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e := strings.TrimPrefix(s[i+1:], "+")
		v, err := strconv.Atoi(e)
		if err != nil || v > 1<<20 || v < -(1<<20) { // too many digits for an int: saturate
			v = 1 << 20
			if strings.HasPrefix(e, "-") {
				v = -v
			}
		}
		exp = v
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	// value = 0.digits * 10^point
	point := len(intPart) + exp - (len(intPart+frac) - len(digits))
	digits = strings.TrimRight(digits, "0")
	switch {
	case digits == "":
		return new(big.Int), new(big.Int)
	case point > 21:
		v := new(big.Int).Exp(big.NewInt(10), big.NewInt(21), nil)
		if neg {
			v.Neg(v)
		}
		return v, v
	case point < -21:
		if neg {
			return big.NewInt(-1), new(big.Int)
		}
		return new(big.Int), big.NewInt(1)
	}
	m, _ := new(big.Int).SetString(digits, 10)
	// value = m * 10^(point - len(digits))
	e := point - len(digits)
	if e >= 0 {
		m.Mul(m, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(e)), nil))
		if neg {
			m.Neg(m)
		}
		return m, m
	}
	q, r := new(big.Int).QuoRem(m, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-e)), nil), new(big.Int))
	if neg {
		q.Neg(q)
	}
	if r.Sign() == 0 {
		return q, q
	}
	if neg {
		return new(big.Int).Sub(q, bigOne), q
	}
	return q, new(big.Int).Add(q, bigOne)
}

// float returns n rounded to the nearest float64 (±Inf past the range), as SQL casts a
// literal compared with a double column.
func (n Number) float() float64 {
	f, _ := strconv.ParseFloat(string(n), 64) // the syntax is a subset of ParseFloat's
	return f
}

// span is a closed interval of values [lo, hi] (empty when lo > hi); not: the values outside
// it. A null matches neither.
type span[T int64 | float64] struct {
	lo, hi T
	not    bool
}

func (s span[T]) empty() bool { return s.lo > s.hi }

// intSpan returns the int64 values that f's comparison (not an in list) holds for, exactly.
func (f cmpFilter) intSpan() span[int64] {
	var lo, hi *big.Int // nil: unbounded
	not := false
	switch f.Op {
	case opEq, opNe:
		fl, ce := f.Lo.floorCeil()
		if fl.Cmp(ce) == 0 {
			lo, hi = fl, fl
		} else {
			lo, hi = bigOne, new(big.Int) // no integer
		}
		not = f.Op == opNe
	case opLt:
		_, ce := f.Lo.floorCeil()
		hi = new(big.Int).Sub(ce, bigOne)
	case opLe:
		hi, _ = f.Lo.floorCeil()
	case opGt:
		fl, _ := f.Lo.floorCeil()
		lo = new(big.Int).Add(fl, bigOne)
	case opGe:
		_, lo = f.Lo.floorCeil()
	case opBetween, opNotBetween:
		_, lo = f.Lo.floorCeil()
		hi, _ = f.Hi.floorCeil()
		not = f.Op == opNotBetween
	}
	out := span[int64]{lo: math.MinInt64, hi: math.MaxInt64, not: not}
	switch {
	case lo != nil && hi != nil && lo.Cmp(hi) > 0,
		lo != nil && lo.Cmp(bigMax) > 0,
		hi != nil && hi.Cmp(bigMin) < 0:
		out.lo, out.hi = 1, 0 // empty
		return out
	}
	if lo != nil && lo.Cmp(bigMin) > 0 {
		out.lo = lo.Int64()
	}
	if hi != nil && hi.Cmp(bigMax) < 0 {
		out.hi = hi.Int64()
	}
	return out
}

// floatSpan returns the float64 values that f's comparison holds for, the numbers rounded to
// float64 first (a NaN value matches no comparison but !=, not between and not in).
func (f cmpFilter) floatSpan() span[float64] {
	out := span[float64]{lo: math.Inf(-1), hi: math.Inf(1)}
	v := f.Lo.float()
	switch f.Op {
	case opEq, opNe:
		out.lo, out.hi, out.not = v, v, f.Op == opNe
	case opLt:
		out.hi = math.Nextafter(v, math.Inf(-1))
		if math.IsInf(v, -1) {
			out.lo, out.hi = 1, 0
		}
	case opLe:
		out.hi = v
	case opGt:
		out.lo = math.Nextafter(v, math.Inf(1))
		if math.IsInf(v, 1) {
			out.lo, out.hi = 1, 0
		}
	case opGe:
		out.lo = v
	case opBetween, opNotBetween:
		out.lo, out.hi, out.not = v, f.Hi.float(), f.Op == opNotBetween
	}
	return out
}

// match appends to out the rows first+i of vals whose value is in s (outside it with not).
// NaN is in no span.
func (s span[T]) match(out []uint32, first int, vals []T) []uint32 {
	lo, hi := s.lo, s.hi
	if s.not {
		for i, v := range vals {
			if !(v >= lo && v <= hi) {
				out = append(out, uint32(first+i))
			}
		}
		return out
	}
	for i, v := range vals {
		if v >= lo && v <= hi {
			out = append(out, uint32(first+i))
		}
	}
	return out
}
