package agg

import (
	"math"
	"math/bits"
)

// ExactSum adds float64 values exactly and rounds once, at the end, to the nearest float64 (ties
// to even). The result is therefore the same whatever order the values come in, which is what
// lets a merged segment and its unmerged inputs give equal doubleSum results, and a rollup give
// the same row whatever the order of the rows it combines.
//
// The running sum is held as a float64 hi plus the exact rounding errors of every addition
// (Knuth's TwoSum) in a lazily allocated fixed-point accumulator: data whose partial sums are
// exact in float64 (integers below 2^53, as most metrics) never allocate it. Infinities and NaNs
// are counted aside and decide the result as IEEE 754 would for any order.
type ExactSum struct {
	hi    float64
	acc   *limbs
	pinf  uint32
	ninf  uint32
	nan   bool
	count uint32 // additions into acc since it was last normalised
}

// add adds x.
func (s *ExactSum) add(x float64) {
	if math.IsInf(x, 0) || x != x {
		switch {
		case x != x:
			s.nan = true
		case x > 0:
			s.pinf++
		default:
			s.ninf++
		}
		return
	}
	sum := s.hi + x
	if math.IsInf(sum, 0) {
		// hi + x overflowed: move both into the accumulator.
		s.spill(s.hi)
		s.spill(x)
		s.hi = 0
		return
	}
	// TwoSum: err is exactly (hi + x) - sum.
	bv := sum - s.hi
	av := sum - bv
	err := (s.hi - av) + (x - bv)
	s.hi = sum
	if err != 0 {
		s.spill(err)
	}
}

// merge adds everything o holds.
func (s *ExactSum) merge(o *ExactSum) {
	s.nan = s.nan || o.nan
	s.pinf += o.pinf
	s.ninf += o.ninf
	if o.acc != nil {
		if s.acc == nil {
			s.acc = new(limbs)
		}
		s.acc.normalize()
		o.acc.normalize()
		for i := range s.acc {
			s.acc[i] += o.acc[i]
		}
		s.acc.normalize()
		s.count = 0
	}
	s.add(o.hi)
}

func (s *ExactSum) spill(x float64) {
	if s.acc == nil {
		s.acc = new(limbs)
	}
	s.acc.add(x)
	s.count++
	if s.count >= 1<<29 {
		s.acc.normalize()
		s.count = 0
	}
}

// Value returns the correctly rounded sum.
func (s *ExactSum) Value() float64 {
	switch {
	case s.nan || (s.pinf > 0 && s.ninf > 0):
		return math.NaN()
	case s.pinf > 0:
		return math.Inf(1)
	case s.ninf > 0:
		return math.Inf(-1)
	case s.acc == nil:
		return s.hi
	}
	l := *s.acc
	l.add(s.hi)
	return l.round()
}

// Tail appends to dst the terms that, added to Value, give the exact sum: the canonical
// expansion t1 = RN(S - v), t2 = RN(S - v - t1), ... (RN rounds to nearest, ties to even)
// that ends at the first zero remainder. Being a function of the exact sum S alone, it is the
// same whatever order the values came in, so storing Value and Tail keeps a sum exact across
// any number of merges. It is empty when Value is exact, and for NaN and infinite sums.
func (s *ExactSum) Tail(dst []float64) []float64 {
	if s.nan || s.pinf > 0 || s.ninf > 0 || s.acc == nil {
		return dst // no rounding error was ever spilled: hi is the exact sum
	}
	l := *s.acc
	l.add(s.hi)
	for first := true; ; first = false {
		c := l // round changes its receiver
		v := c.round()
		if v == 0 || math.IsInf(v, 0) {
			return dst
		}
		if !first {
			dst = append(dst, v)
		}
		l.add(-v)
	}
}

// addAll adds every value of xs (a stored Tail, for instance).
func (s *ExactSum) addAll(xs []float64) {
	for _, x := range xs {
		s.add(x)
	}
}

// reset empties s, keeping its accumulator's memory.
func (s *ExactSum) reset() {
	acc := s.acc
	*s = ExactSum{}
	if acc != nil {
		*acc = limbs{}
		s.acc = acc
	}
}

// limbs is a fixed-point number: the sum of limbs[i] * 2^(32i) * 2^-1074. Every finite float64
// is an integer multiple of 2^-1074 below 2^1024, so 66 limbs of 32 bits hold any of them; two
// more hold the carries of up to 2^64 additions. Between normalisations a limb may hold any
// int64; normalize carries so that every limb but the last is in [0, 2^32).
type limbs [nLimbs]int64

const nLimbs = 68

func (l *limbs) add(x float64) {
	if x == 0 {
		return
	}
	b := math.Float64bits(x)
	exp := int((b >> 52) & 0x7ff)
	m := b & (1<<52 - 1)
	p := 0
	if exp != 0 {
		m |= 1 << 52
		p = exp - 1
	}
	i, sh := p>>5, uint(p&31)
	lo := int64((m << sh) & 0xffffffff)
	rest := m >> (32 - sh) // sh == 0 gives m >> 32
	mid := int64(rest & 0xffffffff)
	top := int64(rest >> 32)
	if b>>63 != 0 {
		lo, mid, top = -lo, -mid, -top
	}
	l[i] += lo
	l[i+1] += mid
	l[i+2] += top
}

func (l *limbs) normalize() {
	for i := 0; i < nLimbs-1; i++ {
		c := l[i] >> 32
		l[i] -= c << 32
		l[i+1] += c
	}
}

// round returns the float64 nearest to l, ties to even.
func (l *limbs) round() float64 {
	l.normalize()
	neg := l[nLimbs-1] < 0
	if neg {
		for i := range l {
			l[i] = -l[i]
		}
		l.normalize()
	}
	h := nLimbs - 1
	for h >= 0 && l[h] == 0 {
		h--
	}
	if h < 0 {
		return 0
	}
	bitlen := 32*h + bits.Len64(uint64(l[h]))
	// The 64 most significant bits and a sticky bit for anything below them.
	var top uint64
	sticky := false
	lowBit := bitlen - 64 // position of top's least significant bit
	for i := h; i >= 0; i-- {
		v := uint64(l[i])
		pos := 32 * i // position of v's least significant bit
		switch {
		case lowBit <= pos:
			top |= v << uint(pos-lowBit)
		case lowBit < pos+32:
			top |= v >> uint(lowBit-pos)
			if v&(1<<uint(lowBit-pos)-1) != 0 {
				sticky = true
			}
		default:
			if v != 0 {
				sticky = true
			}
		}
	}
	var f float64
	if bitlen <= 53 {
		// Small enough to be exact, subnormals included.
		f = math.Ldexp(float64(top>>uint(64-bitlen)), -1074)
	} else {
		mant := top >> 11
		rem := top & 0x7ff
		const half = 0x400
		if rem > half || (rem == half && (sticky || mant&1 == 1)) {
			mant++
		}
		f = math.Ldexp(float64(mant), bitlen-53-1074) // mant <= 2^53: exact, or +Inf past the range
	}
	if neg {
		f = -f
	}
	return f
}
