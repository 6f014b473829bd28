package columns

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// The version 4 forms of one bitmap in a bitmap index part (segfmt.EncRoaringTableV4; see doc.go,
// "Version 4 encodings: bitmap index"). The form follows from the bitmap's bytes:
//
//	no bytes               the empty bitmap
//	first byte efTag       Elias-Fano: efTag | n uvarint (n >= 1) | l u8 |
//	                       lows: the n values' low l bits packed (bitpack's bit stream) in
//	                       ceil(n*l/8) bytes, padding bits 0 |
//	                       highs: for value i (from 0), the bit (v_i >> l) + i set, in bytes
//	                       up to the one holding the last set bit (which is not 0)
//	any other first byte   the portable roaring serialization, as in version 2 (its cookies
//	                       begin with byte 0x3a or 0x3b)
//
// l is floor(log2((last+1)/n)) (0 when that is below 1, at most 31), from the values alone, so
// every path writes the same bytes for the same rows (the decoder checks it); the writer keeps
// Elias-Fano only when it is
// smaller than the roaring form; the rows of a segment's time-ordered events cost about
// log2(rows/n) + 2 bits each this way, against 16 in a roaring array container.
const (
	efTag    = 1
	efMaxLow = 31 // a low part is below 32 bits
)

// efLowBits is the writer's l for n values of which the last is last.
func efLowBits(n int, last uint32) int {
	u := (uint64(last) + 1) / uint64(n)
	if u <= 1 {
		return 0
	}
	return min(bits.Len64(u)-1, efMaxLow)
}

// efSize returns the bytes of the Elias-Fano form of n >= 1 values, the last being last.
func efSize(n int, last uint32) int {
	l := efLowBits(n, last)
	return 1 + uvarintLen(uint64(n)) + 1 + (n*l+7)/8 + (n+int(last>>l)+7)/8
}

// efPacker appends the Elias-Fano form of values given in increasing order. The lows are
// stored a 64-bit word at a time through an accumulator, and so are the highs: values increase,
// so their high bits are set in increasing positions, and a word of them is stored once, when
// the next value's bit falls in a later word.
type efPacker struct {
	dst   []byte
	l     uint
	mask  uint32
	low   int    // where the next lows word goes
	highs int    // where the highs start
	acc   uint64 // lows not stored yet, nacc bits of them
	nacc  uint
	hw    int    // the highs word hacc holds
	hacc  uint64 // the highs bits of word hw set so far
	i     int
}

// beginEF appends the header of the Elias-Fano form of n >= 1 values, the last being last, and
// room for the rest; add the values, then finish.
func beginEF(dst []byte, n int, last uint32) efPacker {
	l := efLowBits(n, last)
	dst = appendEFHeader(dst, n, l)
	low := len(dst)
	highs := low + (n*l+7)/8
	end := highs + (n+int(last>>l)+7)/8
	// Zeroed room for the lows and highs, and 8 bytes past them (addAll stores the highs word
	// it is filling whole, also when it is the last).
	dst = slices.Grow(dst, end+8-len(dst))
	dst = dst[:end+8]
	clear(dst[low:])
	return efPacker{dst: dst, l: uint(l), mask: 1<<l - 1, low: low, highs: highs}
}

// appendEFHeader appends the header of the Elias-Fano form of n values of l low bits.
func appendEFHeader(dst []byte, n, l int) []byte {
	dst = append(dst, efTag)
	dst = binary.AppendUvarint(dst, uint64(n))
	return append(dst, byte(l))
}

// add adds v, above the values added before.
func (p *efPacker) add(v uint32) {
	one := [1]uint32{v}
	p.addAll(one[:])
}

// addAll adds vals, increasing and above the values added before, in two passes (each with
// few enough variables to stay in registers): the lows, then the highs.
func (p *efPacker) addAll(vals []uint32) {
	p.addLows(vals)
	p.addHighs(vals)
}

// addLows adds the low bits of vals. A full lows word lies inside the lows (its bits are
// values' low bits): it is stored whole, at p.low, which needs room for a word per 64 bits of
// vals' lows.
func (p *efPacker) addLows(vals []uint32) {
	if l := p.l; l > 0 {
		// As putAll: narrow lows are first joined into groups of 8, 4 or 2 (side by side in
		// one word, as the stream has them), so that the accumulator takes a group at a time.
		dst, mask, low, acc, nacc := p.dst, p.mask, p.low, p.acc, p.nacc
		vs := vals
		switch {
		case l <= 8:
			for ; len(vs) >= 8; vs = vs[8:] {
				g := uint64(vs[0]&mask) | uint64(vs[1]&mask)<<l | uint64(vs[2]&mask)<<(2*l) | uint64(vs[3]&mask)<<(3*l) |
					uint64(vs[4]&mask)<<(4*l) | uint64(vs[5]&mask)<<(5*l) | uint64(vs[6]&mask)<<(6*l) | uint64(vs[7]&mask)<<(7*l)
				low, acc, nacc = putBits(dst, low, acc, nacc, g, 8*l)
			}
		case l <= 16:
			for ; len(vs) >= 4; vs = vs[4:] {
				g := uint64(vs[0]&mask) | uint64(vs[1]&mask)<<l | uint64(vs[2]&mask)<<(2*l) | uint64(vs[3]&mask)<<(3*l)
				low, acc, nacc = putBits(dst, low, acc, nacc, g, 4*l)
			}
		default:
			for ; len(vs) >= 2; vs = vs[2:] {
				g := uint64(vs[0]&mask) | uint64(vs[1]&mask)<<l
				low, acc, nacc = putBits(dst, low, acc, nacc, g, 2*l)
			}
		}
		for _, v := range vs {
			low, acc, nacc = putBits(dst, low, acc, nacc, uint64(v&mask), l)
		}
		p.low, p.acc, p.nacc = low, acc, nacc
	}
}

// addHighs adds the high bits of vals. The highs word holding a value's bit is stored whole
// after every value (a word past the end goes into the 8 spare bytes), so that no branch asks
// whether the next value's bit falls in a later word.
func (p *efPacker) addHighs(vals []uint32) {
	highs, l, hw, hacc, i := p.dst[p.highs:], p.l&31, p.hw, p.hacc, p.i
	for _, v := range vals {
		b := int(v>>l) + i
		if w := b >> 6; w != hw { // about one value in 32 (two bits a value): predicted
			binary.LittleEndian.PutUint64(highs[hw<<3:], hacc)
			hw, hacc = w, 0
		}
		hacc |= 1 << (b & 63)
		i++
	}
	binary.LittleEndian.PutUint64(highs[hw<<3:], hacc) // the word being filled, stored whole
	p.hw, p.hacc, p.i = hw, hacc, i
}

func (p *efPacker) finish() []byte {
	p.endLows()
	return p.dst[:len(p.dst)-8]
}

// endLows stores the lows not stored yet, ending the lows at p.low.
func (p *efPacker) endLows() {
	for ; p.nacc > 0; p.nacc -= min(p.nacc, 8) {
		p.dst[p.low] = byte(p.acc)
		p.low++
		p.acc >>= 8
	}
}

// efLow returns the l bits at bit pos of lows (which holds them).
func efLow(lows []byte, pos int, l uint) uint64 {
	var x uint64
	for j := min(len(lows), pos>>3+8) - 1; j >= pos>>3; j-- {
		x = x<<8 | uint64(lows[j])
	}
	return x >> (pos & 7) & (1<<l - 1)
}

// appendEFRows appends the Elias-Fano form of rows (at least one, strictly increasing).
func appendEFRows(dst []byte, rows []uint32) []byte {
	p := beginEF(dst, len(rows), rows[len(rows)-1])
	p.addAll(rows)
	return p.finish()
}

// appendEFWords appends the Elias-Fano form of the bitset words, which hold n >= 1 values,
// the last being last.
func appendEFWords(dst []byte, words []uint64, n int, last uint32) []byte {
	p := beginEF(dst, n, last)
	var block [256]uint32
	k := 0
	for j, w := range words {
		for ; w != 0; w &= w - 1 {
			if k == len(block) {
				p.addAll(block[:])
				k = 0
			}
			block[k] = uint32(j<<6 + bits.TrailingZeros64(w))
			k++
		}
	}
	p.addAll(block[:k])
	return p.finish()
}

// lastBit returns the highest set bit of the bitset words, which must hold one.
func lastBit(words []uint64) uint32 {
	k := len(words) - 1
	for words[k] == 0 {
		k--
	}
	return uint32(k<<6 + 63 - bits.LeadingZeros64(words[k]))
}

// eachStored decodes the stored bitmap that fills b (in a version 4 form when v4), handing fn
// its values piece by piece, as each does.
func (d *roaringDecoder) eachStored(b []byte, v4 bool, limit uint64, fn func([]uint32) error) error {
	if err := d.decodeStored(b, v4, limit, fn); err != nil {
		return err
	}
	if len(d.out) > 0 {
		d.flush(fn)
	}
	return d.fnErr
}

// decodeStored decodes the stored bitmap that fills b (in a version 4 form when v4) into d.
func (d *roaringDecoder) decodeStored(b []byte, v4 bool, limit uint64, fn func([]uint32) error) error {
	if v4 && len(b) == 0 {
		return nil
	}
	if v4 && b[0] == efTag {
		return d.decodeEF(b, limit, fn)
	}
	n, err := d.decode(b, limit, fn)
	if err == nil && n != len(b) {
		err = corruptf("roaring: %d trailing bytes", len(b)-n)
	}
	return err
}

// decodeEF hands out the values of the Elias-Fano form that fills b, checking that there are
// exactly n, strictly increasing, each below limit, and that the form is the one the writer
// gives for them (n a minimal uvarint, l the writer's, lows padding bits 0, the highs ending
// with the byte of the last set bit): so a bitmap has one form, and damage that still decodes
// gives other rows, which Verify catches against the ids.
func (d *roaringDecoder) decodeEF(b []byte, limit uint64, fn func([]uint32) error) error {
	if len(b) < 3 || b[0] != efTag {
		return corruptf("elias-fano: %d bytes", len(b))
	}
	n64, k := binary.Uvarint(b[1:])
	if k <= 0 || n64 == 0 || n64 > limit || n64 > 1<<32 || k != uvarintLen(n64) {
		return corruptf("elias-fano: bad count (limit %d)", limit)
	}
	pos := 1 + k
	if pos >= len(b) {
		return corruptf("elias-fano: truncated header")
	}
	l := uint(b[pos])
	pos++
	if l > efMaxLow {
		return corruptf("elias-fano: %d low bits", l)
	}
	n := int(n64)
	lowBytes := (n64*uint64(l) + 7) / 8
	if uint64(len(b)-pos) <= lowBytes {
		return corruptf("elias-fano: %d values of %d low bits in %d bytes", n, l, len(b)-pos)
	}
	lows := b[pos : pos+int(lowBytes)]
	highs := b[pos+int(lowBytes):]
	if highs[len(highs)-1] == 0 {
		return corruptf("elias-fano: highs end in a zero byte")
	}
	if pad := uint(n64*uint64(l)) & 7; pad != 0 && lows[len(lows)-1]>>pad != 0 {
		return corruptf("elias-fano: low padding bits set")
	}
	// Exactly n highs bits set, the last one at most maxHigh+n-1: every high is at most maxHigh
	// (they do not decrease), so high<<l does not overflow.
	var ones uint64
	for j := 0; j+8 <= len(highs); j += 8 {
		ones += uint64(bits.OnesCount64(binary.LittleEndian.Uint64(highs[j:])))
	}
	for _, c := range highs[len(highs)&^7:] {
		ones += uint64(bits.OnesCount8(c))
	}
	if ones != n64 {
		return corruptf("elias-fano: %d values, the header says %d", ones, n)
	}
	maxHigh := (limit - 1) >> l
	top := uint64(len(highs)-1)*8 + uint64(7-bits.LeadingZeros8(highs[len(highs)-1]))
	if top-(n64-1) > maxHigh {
		return corruptf("elias-fano: value %d.. not below %d", (top-(n64-1))<<l, limit)
	}
	mask := uint64(1)<<l - 1
	// Every value is below limit when the last one is (they increase: checked as they come).
	if last := (top-(n64-1))<<l | efLow(lows, (n-1)*int(l), l); last >= limit {
		return corruptf("elias-fano: value %d not below %d", last, limit)
	}
	out := d.out
	if d.piece == 0 {
		out = slices.Grow(out, n)
	}
	// The lows are read in order through acc, which holds nacc of them, refilled 4 bytes at a
	// time (a byte at a time at the end).
	var acc uint64
	var nacc uint
	lp := 0
	i, next := 0, uint64(0) // next: the least value the next may be
	for w := 0; w < len(highs); w += 8 {
		var x uint64
		if w+8 <= len(highs) {
			x = binary.LittleEndian.Uint64(highs[w:])
		} else {
			for j := len(highs) - 1; j >= w; j-- {
				x = x<<8 | uint64(highs[j])
			}
		}
		for ; x != 0; x &= x - 1 {
			// (Shifts are masked with 63, which they are below, so that they compile to
			// plain shifts.)
			if nacc < l {
				if lp+4 <= len(lows) {
					acc |= uint64(binary.LittleEndian.Uint32(lows[lp:])) << (nacc & 63)
					lp, nacc = lp+4, nacc+32
				} else {
					for ; nacc < l; lp, nacc = lp+1, nacc+8 {
						acc |= uint64(lows[lp]) << (nacc & 63)
					}
				}
			}
			v := uint64(w<<3+bits.TrailingZeros64(x)-i)<<(l&63) | acc&mask
			acc >>= l & 63
			nacc -= l
			if v < next {
				d.out = out
				return corruptf("elias-fano: values not increasing")
			}
			next = v + 1
			out = append(out, uint32(v))
			i++
			if len(out) == d.piece {
				d.out = out
				d.flush(fn)
				if d.fnErr != nil {
					return d.fnErr
				}
				out = d.out
			}
		}
	}
	d.out = out
	prev := next - 1
	if want := efLowBits(n, uint32(prev)); int(l) != want {
		return corruptf("elias-fano: %d low bits, the writer's are %d", l, want)
	}
	return d.fnErr
}
