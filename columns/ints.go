package columns

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/writeout/writeout/internal/segfmt"
)

// Value encodings of one chunk of int64 values. Every encoding starts with its byte and the
// value count n (uvarint); the encoder picks the smallest for the data:
//
//	plain     0 | n | n x int64 LE
//	constant  1 | n | v varint                                   (all n values equal v)
//	for       2 | n | min varint | w u8 | n values v-min packed at w bits
//	delta     3 | n | first varint | dmin varint | w u8 | n-1 deltas d-dmin packed at w bits
//	planes    4 | n | t u8 | the for or delta encoding's fields after n, its packed values
//	              replaced by the planes form of the same values (planes.go); t is 2 (for) or
//	              3 (delta). Version 4 parts only (segfmt.EncLongChunksV4, segfmt.EncDoubleChunksV4).
//
// (varint is zigzag, as encoding/binary.AppendVarint; arithmetic wraps modulo 2^64, so every
// int64 sequence round-trips.)
const (
	intPlain    byte = 0
	intConstant byte = 1
	intFOR      byte = 2
	intDelta    byte = 3
	intPlanes   byte = 4
)

// maxChunkValues bounds the values one decoded chunk may hold, so that no length field can make
// a reader allocate more than a few MiB.
const maxChunkValues = 1 << 20

type intPlan struct {
	enc   byte
	base  int64 // constant value, min, or first
	dmin  int64
	width int
	size  int
}

func uvarintLen(v uint64) int { return (bits64Len(v|1) + 6) / 7 }
func varintLen(v int64) int   { return uvarintLen(uint64(v<<1) ^ uint64(v>>63)) }
func bits64Len(v uint64) int  { return bitWidth(v) }

func planInt64s(vals []int64) intPlan {
	n := len(vals)
	if n == 0 {
		return planOf(vals, 0, 0, 0, 0, false)
	}
	if n >= planSampleMin {
		// Deltas wider than the values in the first planSample (a metric's, mostly): the
		// values' range may leave the delta encoding no chance.
		slo, shi, sdlo, sdhi := int64Ranges(vals[:planSample+1])
		if dw := bitWidth(uint64(sdhi) - uint64(sdlo)); dw > bitWidth(uint64(shi)-uint64(slo)) {
			lo, hi := minMax(vals)
			if lo != hi && dw > bitWidth(uint64(hi)-uint64(lo)) {
				return planOf(vals, lo, hi, 0, 0, false)
			}
			dlo, dhi := deltaRange(vals[planSample:])
			return planOf(vals, lo, hi, min(sdlo, dlo), max(sdhi, dhi), true)
		}
	}
	lo, hi, dlo, dhi := int64Ranges(vals)
	return planOf(vals, lo, hi, dlo, dhi, true)
}

// A chunk of at least planSampleMin values whose first planSample deltas span more bits than
// all its values is planned without its other deltas: the delta encoding cannot be the
// smallest, and they are not read. Its plan is the same: the deltas' width over all of them
// is at least the sample's, so the delta encoding would pack n-1 values of at least w+1 bits
// where the frame of reference packs n of w, (n-w-1)/8 >= 119 bytes more, which its head (a
// varint more, and its first value's, against the least value's, at most 9 bytes shorter)
// cannot make up. The values' range alone (minMax) takes half the time of the values' and
// deltas' (int64Ranges).
const (
	planSample    = 256
	planSampleMin = 1024
)

// minMax returns the least and greatest of vals (at least one), four values a step: each
// running least and greatest waits for the one before, and four of each wait less.
func minMax(vals []int64) (lo, hi int64) {
	l0, h0 := vals[0], vals[0]
	l1, h1, l2, h2, l3, h3 := l0, h0, l0, h0, l0, h0
	i := 0
	for ; i+4 <= len(vals); i += 4 {
		v := vals[i : i+4 : i+4]
		l0, h0 = min(l0, v[0]), max(h0, v[0])
		l1, h1 = min(l1, v[1]), max(h1, v[1])
		l2, h2 = min(l2, v[2]), max(h2, v[2])
		l3, h3 = min(l3, v[3]), max(h3, v[3])
	}
	for ; i < len(vals); i++ {
		l0, h0 = min(l0, vals[i]), max(h0, vals[i])
	}
	return min(l0, l1, l2, l3), max(h0, h1, h2, h3)
}

// int64Ranges returns the least and greatest of vals (at least one), and of their deltas
// (math.MaxInt64 and math.MinInt64 for one value), in one pass.
func int64Ranges(vals []int64) (lo, hi, dlo, dhi int64) {
	lo, hi = vals[0], vals[0]
	dlo, dhi = int64(math.MaxInt64), int64(math.MinInt64)
	prev := vals[0]
	for _, v := range vals[1:] {
		d := v - prev
		prev = v
		lo, hi = min(lo, v), max(hi, v)
		dlo, dhi = min(dlo, d), max(dhi, d)
	}
	return lo, hi, dlo, dhi
}

// deltaRange returns the least and greatest delta of vals (math.MaxInt64 and math.MinInt64
// for fewer than two values).
func deltaRange(vals []int64) (dlo, dhi int64) {
	dlo, dhi = int64(math.MaxInt64), int64(math.MinInt64)
	for i := 1; i < len(vals); i++ {
		d := vals[i] - vals[i-1]
		dlo, dhi = min(dlo, d), max(dhi, d)
	}
	return dlo, dhi
}

// planOf returns the plan of vals whose values lie in [lo, hi] and deltas in [dlo, dhi]
// (withDelta false: the delta encoding is not among the candidates).
func planOf(vals []int64, lo, hi, dlo, dhi int64, withDelta bool) intPlan {
	n := len(vals)
	head := 1 + uvarintLen(uint64(n))
	best := intPlan{enc: intPlain, size: head + 8*n}
	if n == 0 {
		return best
	}
	if lo == hi {
		return intPlan{enc: intConstant, base: lo, size: head + varintLen(lo)}
	}
	w := bitWidth(uint64(hi) - uint64(lo))
	if s := head + varintLen(lo) + 1 + packedSize(n, w); s < best.size {
		best = intPlan{enc: intFOR, base: lo, width: w, size: s}
	}
	if withDelta && n >= 2 {
		w := bitWidth(uint64(dhi) - uint64(dlo))
		if s := head + varintLen(vals[0]) + varintLen(dlo) + 1 + packedSize(n-1, w); s < best.size {
			best = intPlan{enc: intDelta, base: vals[0], dmin: dlo, width: w, size: s}
		}
	}
	return best
}

// int64sSize returns the bytes appendInt64s(dst, vals) appends.
func int64sSize(vals []int64) int { return planInt64s(vals).size }

// appendInt64s appends vals in the smallest of the int64 chunk encodings.
func appendInt64s(dst []byte, vals []int64) []byte {
	return appendInt64sPlan(dst, vals, planInt64s(vals))
}

func appendInt64sPlan(dst []byte, vals []int64, p intPlan) []byte {
	dst = append(dst, p.enc)
	dst = binary.AppendUvarint(dst, uint64(len(vals)))
	switch p.enc {
	case intPlain:
		for _, v := range vals {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(v))
		}
	case intConstant:
		dst = binary.AppendVarint(dst, p.base)
	case intFOR:
		dst = binary.AppendVarint(dst, p.base)
		dst = append(dst, byte(p.width))
		if p.width > 0 {
			dst = appendFOR(dst, vals, p.base, p.width)
		}
	case intDelta:
		dst = binary.AppendVarint(dst, p.base)
		dst = binary.AppendVarint(dst, p.dmin)
		dst = append(dst, byte(p.width))
		if p.width > 0 {
			dst = appendDeltas(dst, vals, p.dmin, p.width)
		}
	}
	return dst
}

// packBlock is how many values appendFOR and appendDeltas turn into their packed form (on the
// stack) before packing them.
const packBlock = 256

// appendFOR appends the values v-base of vals packed at width (1..64) bits.
func appendFOR(dst []byte, vals []int64, base int64, width int) []byte {
	bw := startBits(dst, len(vals), width)
	var block [packBlock]uint64
	for len(vals) > 0 {
		in := vals[:min(len(vals), packBlock)]
		u := block[:len(in)]
		for i, v := range in {
			u[i] = uint64(v) - uint64(base)
		}
		putAll(&bw, u)
		vals = vals[len(in):]
	}
	return bw.finish()
}

// appendDeltas appends the deltas of vals (at least two values) less dmin, packed at width
// (1..64) bits.
func appendDeltas(dst []byte, vals []int64, dmin int64, width int) []byte {
	bw := startBits(dst, len(vals)-1, width)
	var block [packBlock]uint64
	prev := vals[0]
	vals = vals[1:]
	for len(vals) > 0 {
		in := vals[:min(len(vals), packBlock)]
		u := block[:len(in)]
		for i, v := range in {
			u[i] = uint64(v-prev) - uint64(dmin)
			prev = v
		}
		putAll(&bw, u)
		vals = vals[len(in):]
	}
	return bw.finish()
}

// appendInt64sV is appendInt64s for a version 4 part: with a coder, a for or delta chunk is
// stored in the planes form when that is smaller. It reports whether it was.
func appendInt64sV(dst []byte, vals []int64, pc *planeCoder) ([]byte, bool) {
	return appendInt64sVPlan(dst, vals, planInt64s(vals), pc)
}

func appendInt64sVPlan(dst []byte, vals []int64, p intPlan, pc *planeCoder) ([]byte, bool) {
	if pc == nil || (p.enc != intFOR && p.enc != intDelta) || p.width == 0 {
		return appendInt64sPlan(dst, vals, p), false
	}
	start := len(dst)
	dst = append(dst, intPlanes)
	dst = binary.AppendUvarint(dst, uint64(len(vals)))
	dst = append(dst, p.enc)
	dst = binary.AppendVarint(dst, p.base)
	u := pc.u64[:0]
	if p.enc == intFOR {
		for _, v := range vals {
			u = append(u, uint64(v)-uint64(p.base))
		}
	} else {
		dst = binary.AppendVarint(dst, p.dmin)
		for i := 1; i < len(vals); i++ {
			u = append(u, uint64(vals[i]-vals[i-1])-uint64(p.dmin))
		}
	}
	pc.u64 = u
	dst = append(dst, byte(p.width))
	dst, ok := appendPlanes(pc, dst, u, p.width, p.size-(len(dst)-start))
	if !ok {
		return appendInt64sPlan(dst[:start], vals, p), false
	}
	return dst, true
}

// decodeInt64s appends the values of the int64 chunk encoding at the front of src to dst and
// returns the rest of src. want >= 0 requires exactly want values, checked before anything is
// allocated; want < 0 takes any number up to the chunk limit. Bad bytes give an error wrapping
// ErrCorrupt.
func decodeInt64s(dst []int64, src []byte, want int) ([]int64, []byte, error) {
	return decodeInt64sV(dst, src, want, nil)
}

// decodeInt64sV is decodeInt64s for a part of either version: a decoder (a version 4 part)
// also takes the planes form.
func decodeInt64sV(dst []int64, src []byte, want int, pd *planeDecoder) ([]int64, []byte, error) {
	if len(src) < 1 {
		return dst, src, corruptf("int64 chunk: empty")
	}
	enc := src[0]
	n, k := binary.Uvarint(src[1:])
	if k <= 0 {
		return dst, src, corruptf("int64 chunk: bad value count")
	}
	if n > maxChunkValues || (want >= 0 && n != uint64(want)) {
		return dst, src, corruptf("int64 chunk: %d values, want %d (at most %d)", n, want, maxChunkValues)
	}
	rest := src[1+k:]
	count := int(n)
	planes := false
	if enc == intPlanes && pd != nil {
		if len(rest) < 1 || (rest[0] != intFOR && rest[0] != intDelta) {
			return dst, src, corruptf("int64 chunk: planes of no for or delta encoding")
		}
		enc, planes, rest = rest[0], true, rest[1:]
	}
	switch enc {
	case intPlain:
		if uint64(len(rest)) < 8*n {
			return dst, src, corruptf("int64 chunk: %d plain values need %d bytes, have %d", n, 8*n, len(rest))
		}
		start := len(dst)
		dst = grow(dst, count)
		out := dst[start:]
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(rest[8*i:]))
		}
		return dst, rest[8*count:], nil
	case intConstant:
		v, k := binary.Varint(rest)
		if k <= 0 {
			return dst, src, corruptf("int64 chunk: bad constant")
		}
		start := len(dst)
		dst = grow(dst, count)
		out := dst[start:]
		for i := range out {
			out[i] = v
		}
		return dst, rest[k:], nil
	case intFOR, intDelta:
		base, k := binary.Varint(rest)
		if k <= 0 {
			return dst, src, corruptf("int64 chunk: bad base")
		}
		rest = rest[k:]
		var dmin int64
		if enc == intDelta {
			if count == 0 {
				return dst, src, corruptf("int64 chunk: delta encoding of no values")
			}
			dmin, k = binary.Varint(rest)
			if k <= 0 {
				return dst, src, corruptf("int64 chunk: bad delta minimum")
			}
			rest = rest[k:]
		}
		if len(rest) < 1 {
			return dst, src, corruptf("int64 chunk: missing bit width")
		}
		w := int(rest[0])
		rest = rest[1:]
		if w > 64 {
			return dst, src, corruptf("int64 chunk: bit width %d", w)
		}
		packed := count
		if enc == intDelta {
			packed = count - 1
		}
		start := len(dst)
		var size int
		var out []int64
		if planes {
			if w == 0 {
				return dst, src, corruptf("int64 chunk: planes of width 0")
			}
			u, after, err := decodePlanes(pd, pd.u64[:0], rest, packed, w)
			pd.u64 = u
			if err != nil {
				return dst, src, fmt.Errorf("int64 chunk: %w", err)
			}
			dst = grow(dst, count)
			out = dst[start:]
			off := 0
			if enc == intDelta {
				off = 1
			}
			for i, v := range u {
				out[off+i] = int64(v)
			}
			size = len(rest) - len(after)
		} else {
			size = packedSize(packed, w)
			if size > len(rest) {
				return dst, src, corruptf("int64 chunk: %d values of %d bits need %d bytes, have %d", packed, w, size, len(rest))
			}
			dst = grow(dst, count)
			out = dst[start:]
			if enc == intFOR {
				unpack(out, rest[:size], uint(w), uint64(base))
			} else {
				unpack(out[1:], rest[:size], uint(w), 0)
			}
		}
		if enc == intFOR {
			if planes {
				for i := range out {
					out[i] = int64(uint64(out[i]) + uint64(base))
				}
			}
		} else {
			out[0] = base
			prev := base
			for i := 1; i < len(out); i++ {
				prev = int64(uint64(prev) + uint64(out[i]) + uint64(dmin))
				out[i] = prev
			}
		}
		return dst, rest[size:], nil
	}
	return dst, src, corruptf("int64 chunk: unknown encoding %d", enc)
}

// Value encodings of one chunk of float64 values:
//
//	plain     0 | n | n x float64 bits LE
//	constant  1 | n | float64 bits LE                     (all n values have the same bits)
//	integral  2 | n | an int64 chunk encoding of the values (every value a whole number that
//	                  converts to int64 and back to the same bits)
const (
	floatPlain    byte = 0
	floatConstant byte = 1
	floatIntegral byte = 2
)

func integral(v float64) (int64, bool) {
	if !(v >= -(1<<62) && v <= 1<<62) { // also rejects NaN
		return 0, false
	}
	i := int64(v)
	return i, math.Float64bits(float64(i)) == math.Float64bits(v)
}

// float64sSize returns the bytes appendFloat64s(dst, vals, scratch) appends.
func float64sSize(vals []float64) int {
	_, size, _, _ := planFloat64s(vals, nil)
	return size
}

// planFloat64s picks the encoding; for integral it returns the values as int64 in ints, and
// their plan.
func planFloat64s(vals []float64, ints []int64) (byte, int, []int64, intPlan) {
	n := len(vals)
	head := 1 + uvarintLen(uint64(n))
	plain := head + 8*n
	if n == 0 {
		return floatPlain, plain, ints, intPlan{}
	}
	first := math.Float64bits(vals[0])
	constant, whole := true, true
	ints = ints[:0]
	for _, v := range vals {
		if math.Float64bits(v) != first {
			constant = false
		}
		if whole {
			i, ok := integral(v)
			whole = ok
			ints = append(ints, i)
		}
	}
	if constant {
		return floatConstant, head + 8, ints, intPlan{}
	}
	if whole {
		p := planInt64s(ints)
		if s := head + p.size; s < plain {
			return floatIntegral, s, ints, p
		}
	}
	return floatPlain, plain, ints, intPlan{}
}

// appendFloat64s appends vals in the smallest of the float64 chunk encodings. scratch holds
// the values as int64 while the encoding is picked, its capacity reused; nil allocates.
func appendFloat64s(dst []byte, vals []float64, scratch *[]int64) []byte {
	dst, _ = appendFloat64sV(dst, vals, scratch, nil)
	return dst
}

// appendFloat64sV is appendFloat64s for a version 4 part: with a coder, an integral chunk's
// int64 chunk may take the planes form (appendInt64sV). It reports whether it did.
func appendFloat64sV(dst []byte, vals []float64, scratch *[]int64, pc *planeCoder) ([]byte, bool) {
	var ints []int64
	if scratch != nil {
		ints = *scratch
	}
	enc, _, ints, plan := planFloat64s(vals, ints)
	if scratch != nil {
		*scratch = ints
	}
	dst = append(dst, enc)
	dst = binary.AppendUvarint(dst, uint64(len(vals)))
	switch enc {
	case floatPlain:
		for _, v := range vals {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
		}
	case floatConstant:
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(vals[0]))
	case floatIntegral:
		if pc != nil {
			return appendInt64sVPlan(dst, ints, plan, pc)
		}
		dst = appendInt64sPlan(dst, ints, plan)
	}
	return dst, false
}

// decodeFloat64s appends the values of the float64 chunk encoding at the front of src to dst
// and returns the rest of src. want is as for decodeInt64s; scratch holds an integral chunk's
// int64 values, its capacity reused (nil allocates). Bad bytes give an error wrapping
// ErrCorrupt.
func decodeFloat64s(dst []float64, src []byte, want int, scratch *[]int64) ([]float64, []byte, error) {
	var ints []int64
	if scratch != nil {
		ints = *scratch
	}
	out, rest, ints, err := decodeFloat64sInts(dst, src, want, ints, nil)
	if scratch != nil {
		*scratch = ints
	}
	return out, rest, err
}

// decodeFloat64sV is decodeFloat64s for a part of either version: a decoder (a version 4
// part) also takes an integral chunk in the planes form.
func decodeFloat64sV(dst []float64, src []byte, want int, scratch *[]int64, pd *planeDecoder) ([]float64, []byte, error) {
	var ints []int64
	if scratch != nil {
		ints = *scratch
	}
	out, rest, ints, err := decodeFloat64sInts(dst, src, want, ints, pd)
	if scratch != nil {
		*scratch = ints
	}
	return out, rest, err
}

func decodeFloat64sInts(dst []float64, src []byte, want int, ints []int64, pd *planeDecoder) ([]float64, []byte, []int64, error) {
	if len(src) < 1 {
		return dst, src, ints, corruptf("float64 chunk: empty")
	}
	enc := src[0]
	n, k := binary.Uvarint(src[1:])
	if k <= 0 {
		return dst, src, ints, corruptf("float64 chunk: bad value count")
	}
	if n > maxChunkValues || (want >= 0 && n != uint64(want)) {
		return dst, src, ints, corruptf("float64 chunk: %d values, want %d (at most %d)", n, want, maxChunkValues)
	}
	rest := src[1+k:]
	count := int(n)
	switch enc {
	case floatPlain:
		if uint64(len(rest)) < 8*n {
			return dst, src, ints, corruptf("float64 chunk: %d plain values need %d bytes, have %d", n, 8*n, len(rest))
		}
		start := len(dst)
		dst = grow(dst, count)
		out := dst[start:]
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(rest[8*i:]))
		}
		return dst, rest[8*count:], ints, nil
	case floatConstant:
		if len(rest) < 8 {
			return dst, src, ints, corruptf("float64 chunk: short constant")
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(rest))
		start := len(dst)
		dst = grow(dst, count)
		out := dst[start:]
		for i := range out {
			out[i] = v
		}
		return dst, rest[8:], ints, nil
	case floatIntegral:
		var err error
		ints, rest, err = decodeInt64sV(ints[:0], rest, count, pd)
		if err != nil {
			return dst, src, ints, err
		}
		start := len(dst)
		dst = grow(dst, count)
		out := dst[start:]
		for i, v := range ints {
			out[i] = float64(v)
		}
		return dst, rest, ints, nil
	}
	return dst, src, ints, corruptf("float64 chunk: unknown encoding %d", enc)
}

// numDecoder returns the chunk decoder of T's values, decodeInt64sV or decodeFloat64sV, in
// the shape of Cursor.decode.
func numDecoder[T Number]() func(dst []T, src []byte, n int, scratch *[]int64, pd *planeDecoder) ([]T, []byte, error) {
	var zero T
	if _, ok := any(zero).(int64); ok {
		return any(decodeLongChunk).(func([]T, []byte, int, *[]int64, *planeDecoder) ([]T, []byte, error))
	}
	return any(decodeFloat64sV).(func([]T, []byte, int, *[]int64, *planeDecoder) ([]T, []byte, error))
}

// decodeLongChunk is decodeInt64sV in the shape of Cursor.decode.
func decodeLongChunk(dst []int64, src []byte, n int, _ *[]int64, pd *planeDecoder) ([]int64, []byte, error) {
	return decodeInt64sV(dst, src, n, pd)
}

// numEncoder returns the chunk encoder of T's values, appendInt64sV or appendFloat64sV, in the
// shape of numWriter.encode, and the version 4 encoding its planes form takes.
func numEncoder[T Number]() (func(dst []byte, vals []T, scratch *[]int64, pc *planeCoder) ([]byte, bool), segfmt.Encoding) {
	var zero T
	if _, ok := any(zero).(int64); ok {
		return any(encodeLongChunk).(func([]byte, []T, *[]int64, *planeCoder) ([]byte, bool)), segfmt.EncLongChunksV4
	}
	return any(appendFloat64sV).(func([]byte, []T, *[]int64, *planeCoder) ([]byte, bool)), segfmt.EncDoubleChunksV4
}

// encodeLongChunk is appendInt64sV in the shape of numWriter.encode.
func encodeLongChunk(dst []byte, vals []int64, _ *[]int64, pc *planeCoder) ([]byte, bool) {
	return appendInt64sV(dst, vals, pc)
}

// int64Bound returns m with |v| <= m for every value of the int64 chunk raw (its encoded
// bytes), read off its header: a constant, a frame of reference's base and width, a delta
// chain's first value, least delta, width and count. ok is false for plain values, for a
// bound that would pass 2^62, and for a header that does not parse (the chunk's decode says
// why). The bound holds for the values a decode of raw gives, whatever they were written as:
// it follows from the fields the decode reads.
func int64Bound(raw []byte) (m uint64, ok bool) {
	if len(raw) < 1 {
		return 0, false
	}
	enc := raw[0]
	n, k := binary.Uvarint(raw[1:])
	if k <= 0 {
		return 0, false
	}
	rest := raw[1+k:]
	if enc == intPlanes {
		if len(rest) < 1 {
			return 0, false
		}
		enc, rest = rest[0], rest[1:]
	}
	const most = 1 << 62
	abs := func(v int64) (uint64, bool) {
		if v < -most || v > most {
			return 0, false
		}
		if v < 0 {
			return uint64(-v), true
		}
		return uint64(v), true
	}
	base, k := binary.Varint(rest)
	if k <= 0 || (enc != intConstant && enc != intFOR && enc != intDelta) {
		return 0, false
	}
	m, ok = abs(base)
	if !ok || enc == intConstant {
		return m, ok
	}
	rest = rest[k:]
	var dmin uint64
	if enc == intDelta {
		d, k := binary.Varint(rest)
		if k <= 0 {
			return 0, false
		}
		if dmin, ok = abs(d); !ok {
			return 0, false
		}
		rest = rest[k:]
	}
	if len(rest) < 1 || rest[0] > 60 {
		return 0, false
	}
	step := uint64(1) << rest[0] // a value past the base, or a delta past dmin, is below it
	if enc == intFOR {
		m += step
		return m, m < most
	}
	step += dmin // each of the n-1 deltas is at most this in magnitude
	if n > maxChunkValues || bits.Len64(step)+bits.Len64(n) >= 62 {
		return 0, false
	}
	m += step * n
	return m, m < most
}
