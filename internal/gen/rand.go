package gen

import (
	"math"
	"math/bits"
	"math/rand/v2"

	"github.com/writeout/writeout/internal/mix"
)

// rng is a PCG from math/rand/v2: its Uint64 stream is a fixed, documented
// algorithm, so the generators do not depend on how math/rand/v2 derives
// bounded integers or floats (which Go does not promise to keep). Every
// derivation below is this package's own and is integer-exact.
type rng = rand.PCG

var (
	mul64 = bits.Mul64
	div64 = bits.Div64
)

// mix64 is the splitmix64 finalizer: a bijection that scatters nearby inputs.
func mix64(x uint64) uint64 { return mix.Mix64(x) }

// seedStream seeds r for stream number stream of seed; distinct
// (seed, stream) pairs give unrelated sequences.
func seedStream(r *rng, seed int64, stream uint64) {
	s := uint64(seed)
	r.Seed(mix64(s^0x6a09e667f3bcc908), mix64(s+(stream+1)*0x9e3779b97f4a7c15))
}

// uintn returns a uniform integer in [0, n), n > 0 (Lemire's
// multiply-and-reject method: exact, no modulo bias).
func uintn(r *rng, n uint64) uint64 {
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}

// unitBits is the resolution of probabilities: a probability p is the
// threshold p * 2^unitBits compared against unitBits random bits.
const unitBits = 53

const unitOne = uint64(1) << unitBits

func unit(r *rng) uint64 { return r.Uint64() >> (64 - unitBits) }

// threshold converts a probability to a unit threshold: unit(r) < t
// happens with probability p (to 2^-53).
func threshold(p float64) uint64 {
	switch {
	case !(p > 0):
		return 0
	case p >= 1:
		return unitOne
	}
	return uint64(p * float64(unitOne))
}

// table samples an index 0..len(cum)-1 with fixed probabilities by
// inverting the cumulative distribution: it returns the first i with
// u < cum[i] for u uniform in [0, 2^53). cum is non-decreasing and its last
// entry is 2^53, so every u lands somewhere; an index whose probability
// rounds to zero is never drawn.
//
// A guide table makes the search O(1) on average (the "indexed search" of
// Chen and Asau): the top bits of u pick a bucket, guide[bucket] is the
// answer for the smallest u in the bucket, and a short forward scan finds
// the answer for u. The result is exactly that of a binary search.
type table struct {
	cum   []uint64
	guide []int32
	shift uint
}

// newTable builds a table from non-negative weights (not all zero).
func newTable(weights []float64) table {
	var total float64
	for _, w := range weights {
		total += w
	}
	cum := make([]uint64, len(weights))
	var run float64
	for i, w := range weights {
		run += w
		c := run / total
		if c >= 1 {
			cum[i] = unitOne
		} else {
			cum[i] = uint64(c * float64(unitOne))
		}
	}
	cum[len(cum)-1] = unitOne
	// About four buckets per index, so that most buckets lie within one
	// index and the scan ends at its first comparison; at most 2^18.
	bitsK := min(uint(bits.Len(uint(len(cum))))+2, 18)
	t := table{cum: cum, guide: make([]int32, 1<<bitsK), shift: unitBits - bitsK}
	i := 0
	for b := range t.guide {
		lo := uint64(b) << t.shift
		for cum[i] <= lo {
			i++
		}
		t.guide[b] = int32(i)
	}
	return t
}

func (t *table) sample(r *rng) int {
	u := unit(r)
	i := int(t.guide[u>>t.shift])
	for u >= t.cum[i] {
		i++
	}
	return i
}

// prob returns the exact probability the table gives index i.
func (t *table) prob(i int) float64 {
	lo := uint64(0)
	if i > 0 {
		lo = t.cum[i-1]
	}
	return float64(t.cum[i]-lo) / float64(unitOne)
}

// zipfWeights returns the Zipf weights 1/k^s for ranks k = 1..n. Unlike
// math/rand/v2's Zipf (which needs s > 1), any s >= 0 works, including the
// s = 1.0 of Druid's basic schema.
func zipfWeights(n int, s float64) []float64 {
	w := make([]float64, n)
	for k := range w {
		if s == 1 {
			w[k] = 1 / float64(k+1)
		} else {
			w[k] = math.Pow(float64(k+1), -s)
		}
	}
	return w
}

// roundedNormalWeights returns the weights of round(X) for X normal with
// the given mean and standard deviation, over the integers
// mean-halfWidth .. mean+halfWidth (the mean must be an integer; mass
// beyond halfWidth standard deviations, under 1e-20 at halfWidth >= 10 sd,
// is dropped).
func roundedNormalWeights(sd float64, halfWidth int) []float64 {
	w := make([]float64, 2*halfWidth+1)
	cdf := func(x float64) float64 { return 0.5 * math.Erfc(-x/(sd*math.Sqrt2)) }
	for i := range w {
		k := float64(i - halfWidth)
		w[i] = cdf(k+0.5) - cdf(k-0.5)
	}
	return w
}
