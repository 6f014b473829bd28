package columns

import (
	"encoding/binary"
	"math/bits"
)

// The portable roaring serialization (RoaringFormatSpec), written straight from a sorted list of
// values, without building a roaring.Bitmap. The bytes are those roaring's RunOptimize and then
// WriteTo give for the same values (roaringenc_test.go checks it), so a part does not depend on
// which path wrote it. Its decoder, which reads the values back the same way, is roaringdec.go;
// both use these constants.
const (
	roaringCookieNoRun = 12346 // arrays and bitmap containers only: u32 cookie, u32 count
	roaringCookieRun   = 12347 // u16 cookie, u16 count-1, then a bit per container: is it runs
	roaringNoOffsetMax = 4     // with runs, fewer containers than this have no offset table
	roaringArrayMax    = 4096  // an array container holds at most this many values
	roaringBitmapBytes = 8192  // a bitmap container: 1024 little-endian u64 words
	roaringArrayKind   = 0
	roaringBitmapKind  = 1
	roaringRunKind     = 2
)

// roaringContainer describes one container of values sharing their high 16 bits.
type roaringContainer struct {
	key        uint16
	kind       uint8
	card, runs int
	lo, hi     int // the container's values are vals[lo:hi] (appendRows) or words[lo:hi] (appendWords)
}

// bodySize returns the bytes of the container's serialized body.
func (c *roaringContainer) bodySize() int {
	switch c.kind {
	case roaringRunKind:
		return 2 + 4*c.runs
	case roaringBitmapKind:
		return roaringBitmapBytes
	}
	return 2 * c.card
}

// roaringEncoder appends serialized bitmaps; its scratch is reused from one bitmap to the next.
type roaringEncoder struct {
	cs []roaringContainer
}

// kindFor is RunOptimize's choice of container: runs when strictly smaller than both other
// forms, else an array up to roaringArrayMax values, else a bitmap.
func kindFor(card, runs int) uint8 {
	switch {
	case 2+4*runs < min(roaringBitmapBytes, 2*card):
		return roaringRunKind
	case card <= roaringArrayMax:
		return roaringArrayKind
	}
	return roaringBitmapKind
}

// appendRows appends the serialization of vals, which must be strictly increasing, to dst.
func (e *roaringEncoder) appendRows(dst []byte, vals []uint32) []byte {
	return e.appendRowsBodies(appendRoaringHeader(dst, e.rowsContainers(vals)), vals)
}

// rowsContainers splits vals, strictly increasing, into the containers of their
// serialization (kept in e.cs for appendRowsBodies).
func (e *roaringEncoder) rowsContainers(vals []uint32) []roaringContainer {
	cs := e.cs[:0]
	for lo := 0; lo < len(vals); {
		hi := keyEnd(vals, lo)
		runs := runsIn(vals[lo:hi])
		cs = append(cs, roaringContainer{key: uint16(vals[lo] >> 16), kind: kindFor(hi-lo, runs), card: hi - lo, runs: runs, lo: lo, hi: hi})
		lo = hi
	}
	e.cs = cs
	return cs
}

// keyEnd returns the end of the values of vals[lo]'s container, the index of the first value of
// a later key (vals increase), found by galloping, then bisection.
func keyEnd(vals []uint32, lo int) int {
	key := vals[lo] >> 16
	end, hi, step := lo+1, lo+1, 1 // vals[end-1] is of key; vals[hi], if any, of a later one
	for hi < len(vals) && vals[hi]>>16 == key {
		end = hi + 1
		hi += step
		step *= 2
	}
	hi = min(hi, len(vals))
	for end < hi {
		if m := int(uint(end+hi) >> 1); vals[m]>>16 == key {
			end = m + 1
		} else {
			hi = m
		}
	}
	return end
}

// runsIn returns the runs of consecutive values in vals (at least one, increasing): one, and
// one more at each value that does not follow the one before (no branch a value: d is 0
// exactly when it follows).
func runsIn(vals []uint32) int {
	runs := 1
	for k := 1; k < len(vals); k++ {
		d := vals[k] - vals[k-1] - 1
		runs += int((d | -d) >> 31)
	}
	return runs
}

// appendRowsBodies appends the bodies of the containers rowsContainers(vals) made.
func (e *roaringEncoder) appendRowsBodies(dst []byte, vals []uint32) []byte {
	cs := e.cs
	for i := range cs {
		c := &cs[i]
		vs := vals[c.lo:c.hi]
		switch c.kind {
		case roaringArrayKind:
			for _, v := range vs {
				dst = binary.LittleEndian.AppendUint16(dst, uint16(v))
			}
		case roaringRunKind:
			dst = binary.LittleEndian.AppendUint16(dst, uint16(c.runs))
			start := 0
			for k := 1; k <= len(vs); k++ {
				if k == len(vs) || vs[k] != vs[k-1]+1 {
					dst = binary.LittleEndian.AppendUint16(dst, uint16(vs[start]))
					dst = binary.LittleEndian.AppendUint16(dst, uint16(vs[k-1]-vs[start]))
					start = k
				}
			}
		default:
			var words [roaringBitmapBytes / 8]uint64
			for _, v := range vs {
				words[uint16(v)>>6] |= 1 << (v & 63)
			}
			for _, w := range words {
				dst = binary.LittleEndian.AppendUint64(dst, w)
			}
		}
	}
	return dst
}

// wordsPerContainer is the number of 64-bit words of a bitset a container covers.
const wordsPerContainer = roaringBitmapBytes / 8

// appendWords appends the serialization of the bitset words (value v is bit v%64 of
// words[v/64]) to dst.
func (e *roaringEncoder) appendWords(dst []byte, words []uint64) []byte {
	return e.appendWordsBodies(appendRoaringHeader(dst, e.wordsContainers(words)), words)
}

// wordsContainers splits the bitset words into the containers of their serialization (kept in
// e.cs for appendWordsBodies).
func (e *roaringEncoder) wordsContainers(words []uint64) []roaringContainer {
	cs := e.cs[:0]
	for lo := 0; lo < len(words); lo += wordsPerContainer {
		hi := min(lo+wordsPerContainer, len(words))
		card, runs := 0, 0
		var carry uint64 // the previous word's top bit
		for _, w := range words[lo:hi] {
			card += bits.OnesCount64(w)
			runs += bits.OnesCount64(w &^ (w<<1 | carry)) // bits set whose lower neighbour is not
			carry = w >> 63
		}
		if card == 0 {
			continue
		}
		cs = append(cs, roaringContainer{key: uint16(lo / wordsPerContainer), kind: kindFor(card, runs), card: card, runs: runs, lo: lo, hi: hi})
	}
	e.cs = cs
	return cs
}

// appendWordsBodies appends the bodies of the containers wordsContainers(words) made.
func (e *roaringEncoder) appendWordsBodies(dst []byte, words []uint64) []byte {
	cs := e.cs
	for i := range cs {
		c := &cs[i]
		ws := words[c.lo:c.hi]
		switch c.kind {
		case roaringArrayKind:
			for k, w := range ws {
				for ; w != 0; w &= w - 1 {
					dst = binary.LittleEndian.AppendUint16(dst, uint16(k<<6+bits.TrailingZeros64(w)))
				}
			}
		case roaringRunKind:
			dst = binary.LittleEndian.AppendUint16(dst, uint16(c.runs))
			// Walk the runs: a run starts at a set bit and ends before the next clear bit.
			n := len(ws) << 6
			for v := 0; v < n; {
				start := nextBit(ws, v, false)
				if start >= n {
					break
				}
				end := nextBit(ws, start, true) // the first clear bit after start
				dst = binary.LittleEndian.AppendUint16(dst, uint16(start))
				dst = binary.LittleEndian.AppendUint16(dst, uint16(end-1-start))
				v = end
			}
		default:
			for _, w := range ws {
				dst = binary.LittleEndian.AppendUint64(dst, w)
			}
			for range wordsPerContainer - len(ws) {
				dst = binary.LittleEndian.AppendUint64(dst, 0)
			}
		}
	}
	return dst
}

// nextBit returns the first bit at or after from that is set (clear: false) or clear (clear:
// true), or len(ws)*64 when there is none.
func nextBit(ws []uint64, from int, clear bool) int {
	k := from >> 6
	if k >= len(ws) {
		return len(ws) << 6
	}
	w := ws[k]
	if clear {
		w = ^w
	}
	w &= ^uint64(0) << (from & 63)
	for w == 0 {
		k++
		if k == len(ws) {
			return len(ws) << 6
		}
		w = ws[k]
		if clear {
			w = ^w
		}
	}
	return k<<6 + bits.TrailingZeros64(w)
}

// roaringSize returns the bytes of the serialization of the containers cs: what
// appendRoaringHeader and the bodies append.
func roaringSize(cs []roaringContainer) int {
	n, hasRun, size := len(cs), false, 0
	for i := range cs {
		hasRun = hasRun || cs[i].kind == roaringRunKind
		size += cs[i].bodySize()
	}
	if !hasRun {
		return size + 8 + 8*n
	}
	size += 4 + (n+7)/8 + 4*n
	if n >= roaringNoOffsetMax {
		size += 4 * n
	}
	return size
}

// appendRoaringHeader appends the cookie, the run flags, the keys and cardinalities and the
// offsets of the containers cs.
func appendRoaringHeader(dst []byte, cs []roaringContainer) []byte {
	hasRun := false
	for i := range cs {
		if cs[i].kind == roaringRunKind {
			hasRun = true
			break
		}
	}
	n := len(cs)
	preamble := 8
	if hasRun {
		preamble = 4 + (n+7)/8
		dst = binary.LittleEndian.AppendUint16(dst, roaringCookieRun)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(n-1))
		flags := len(dst)
		dst = append(dst, make([]byte, (n+7)/8)...)
		for i := range cs {
			if cs[i].kind == roaringRunKind {
				dst[flags+i/8] |= 1 << (i % 8)
			}
		}
	} else {
		dst = binary.LittleEndian.AppendUint32(dst, roaringCookieNoRun)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	}
	for i := range cs {
		dst = binary.LittleEndian.AppendUint16(dst, cs[i].key)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(cs[i].card-1))
	}
	if !hasRun || n >= roaringNoOffsetMax {
		off := preamble + 8*n
		for i := range cs {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(off))
			off += cs[i].bodySize()
		}
	}
	return dst
}

// strictlyIncreasing reports whether vals is strictly increasing, and if not, where it stops.
func strictlyIncreasing(vals []uint32) (int, bool) {
	for i := 1; i < len(vals); i++ {
		if vals[i] <= vals[i-1] {
			return i, false
		}
	}
	return 0, true
}
