package columns

import (
	"encoding/binary"
	"math/bits"
)

// Bit packing: n unsigned values of width w bits (0..64) stored as one little-endian bit stream,
// value i in bits [i*w, (i+1)*w). The stream takes packedSize(n, w) = ceil(n*w/8) bytes; its
// unused high bits in the last byte are zero. Width 0 stores nothing (all values zero).

// packedSize returns the bytes appendPacked writes for n values of width bits.
func packedSize(n, width int) int { return int((uint64(n)*uint64(width) + 7) / 8) }

// bitWidth returns the number of bits needed for max (0 for 0).
func bitWidth(max uint64) int { return bits.Len64(max) }

type unsigned interface{ ~uint32 | ~uint64 }

type word interface{ ~uint32 | ~uint64 | ~int64 }

// appendPacked appends vals packed at width bits. Every value must fit in width bits.
func appendPacked[T unsigned](dst []byte, vals []T, width int) []byte {
	if width == 0 || len(vals) == 0 {
		return dst
	}
	bw := startBits(dst, len(vals), width)
	putAll(&bw, vals)
	return bw.finish()
}

// putAll adds vals, each of which fits in b.w bits. Narrow values are first joined into groups
// of 2, 4 or 8 (the bits they take in the stream, side by side in one word), so that the
// accumulator takes a group at a time.
func putAll[T unsigned](b *bitWriter, vals []T) {
	buf, pos, acc, nbits, w := b.buf, b.pos, b.acc, b.nbits, b.w
	// Past 8 bits, the shifts inside a group are masked below 64 (& 63): they then need no
	// test for 64 or more, which Go makes of a shift by a count it cannot bound (values of
	// 17 to 32 bits packed 25-36% faster; up to 8 bits, the compiler bounds them itself).
	switch {
	case w <= 8:
		for ; len(vals) >= 8; vals = vals[8:] {
			g := uint64(vals[0]) | uint64(vals[1])<<w | uint64(vals[2])<<(2*w) | uint64(vals[3])<<(3*w) |
				uint64(vals[4])<<(4*w) | uint64(vals[5])<<(5*w) | uint64(vals[6])<<(6*w) | uint64(vals[7])<<(7*w)
			pos, acc, nbits = putBits(buf, pos, acc, nbits, g, 8*w)
		}
	case w <= 16:
		for ; len(vals) >= 4; vals = vals[4:] {
			g := uint64(vals[0]) | uint64(vals[1])<<(w&63) | uint64(vals[2])<<(2*w&63) | uint64(vals[3])<<(3*w&63)
			pos, acc, nbits = putBits(buf, pos, acc, nbits, g, 4*w)
		}
	case w <= 32:
		for ; len(vals) >= 2; vals = vals[2:] {
			g := uint64(vals[0]) | uint64(vals[1])<<(w&63)
			pos, acc, nbits = putBits(buf, pos, acc, nbits, g, 2*w)
		}
	}
	for _, v := range vals {
		pos, acc, nbits = putBits(buf, pos, acc, nbits, uint64(v), w)
	}
	b.pos, b.acc, b.nbits = pos, acc, nbits
}

// putBits adds v, of width w (1..64), to the accumulator acc holding nbits (below 64) bits;
// a full word is stored at buf[pos:]. It returns the new pos, acc and nbits.
func putBits(buf []byte, pos int, acc uint64, nbits uint, v uint64, w uint) (int, uint64, uint) {
	acc |= v << (nbits & 63) // nbits is below 64
	nbits += w
	if nbits >= 64 {
		binary.LittleEndian.PutUint64(buf[pos:], acc)
		pos += 8
		nbits -= 64
		acc = v >> (w - nbits) // 0 when nbits is 0: v fits in w bits (Go shifts by 64 give 0)
	}
	return pos, acc, nbits
}

// bitWriter packs values of width w (1..64) into a buffer sized for all of them beforehand:
// full 64-bit words are stored in place, with no append per word. Hot loops copy its fields
// to locals (as appendPacked does) and store them back before finish.
type bitWriter struct {
	buf   []byte // len: the stream's end rounded up to a whole word past pos's last store
	start int    // where the stream begins in buf
	size  int    // the stream's bytes, packedSize(n, w)
	pos   int    // where the next full word goes
	acc   uint64 // bits not stored yet, nbits of them
	nbits uint
	w     uint
}

// startBits returns a writer that appends n values of width bits (1..64) to dst.
func startBits(dst []byte, n, width int) bitWriter {
	start := len(dst)
	size := packedSize(n, width)
	// Room for every full word and one more store of the last, partial word.
	buf := grow(dst, (size+7)&^7+8)
	return bitWriter{buf: buf, start: start, size: size, pos: start, w: uint(width)}
}

// finish stores the partial word and returns dst with the stream appended (its unused high
// bits zero).
func (b *bitWriter) finish() []byte {
	binary.LittleEndian.PutUint64(b.buf[b.pos:], b.acc)
	return b.buf[:b.start+b.size]
}

// packer appends values of width w to dst, one at a time (w may be 0: nothing is written).
type packer struct {
	dst   []byte
	acc   uint64
	nbits uint
	w     uint
}

func (p *packer) put(v uint64) {
	p.acc |= v << p.nbits
	if p.nbits+p.w >= 64 {
		p.dst = binary.LittleEndian.AppendUint64(p.dst, p.acc)
		p.acc = v >> (64 - p.nbits) // 0 when nbits is 0: Go shifts by 64 give 0
		p.nbits = p.nbits + p.w - 64
	} else {
		p.nbits += p.w
	}
}

func (p *packer) flush() []byte {
	for ; p.nbits > 0; p.nbits -= min(p.nbits, 8) {
		p.dst = append(p.dst, byte(p.acc))
		p.acc >>= 8
	}
	return p.dst
}

// decodePacked appends n values of width bits decoded from the front of src to dst and returns
// the rest of src. It fails with ErrCorrupt when src is too short, the width is over 64 or
// over 32 for 32-bit values.
func decodePacked[T unsigned](dst []T, src []byte, n, width int) ([]T, []byte, error) {
	if width < 0 || width > 64 || n < 0 {
		return dst, src, corruptf("bit packing: width %d, count %d", width, n)
	}
	size := packedSize(n, width)
	if size > len(src) {
		return dst, src, corruptf("bit packing: %d values of %d bits need %d bytes, have %d", n, width, size, len(src))
	}
	var zero T
	if uint64(^zero) == 1<<32-1 && width > 32 {
		return dst, src, corruptf("bit packing: width %d too wide for 32-bit values", width)
	}
	start := len(dst)
	dst = grow(dst, n)
	out := dst[start : start+n]
	unpack(out, src[:size], uint(width), 0)
	return dst, src[size:], nil
}

// unpack decodes len(out) values of width w from src, which holds exactly packedSize bytes,
// each plus base (modulo 2^64, then converted to T: a frame of reference's base is added in
// the loop that writes the values, not in a pass after it). Values are read from the word at their first byte (and the byte after that word, for widths
// over 57), several at once when they fit, so the loop carries no state from one step to the
// next; the last few values, whose word would run past src, are read a byte at a time.
func unpack[T word](out []T, src []byte, w uint, base uint64) {
	if w == 0 {
		for i := range out {
			out[i] = T(base)
		}
		return
	}
	mask := ^uint64(0) >> (64 - w)
	i, bit := 0, uint(0)
	// Values i.. start in byte bit/8 at bit bit%8 <= 7: the 8 bytes there hold k values of w
	// bits when k*w+7 <= 64, which the loops below take at once while those bytes exist.
	switch {
	case w <= 7:
		for ; i+8 <= len(out) && int(bit>>3)+8 <= len(src); i += 8 {
			x := binary.LittleEndian.Uint64(src[bit>>3:]) >> (bit & 7)
			o := out[i : i+8 : i+8]
			o[0], o[1], o[2], o[3] = T(x&mask+base), T(x>>w&mask+base), T(x>>(2*w)&mask+base), T(x>>(3*w)&mask+base)
			o[4], o[5], o[6], o[7] = T(x>>(4*w)&mask+base), T(x>>(5*w)&mask+base), T(x>>(6*w)&mask+base), T(x>>(7*w)&mask+base)
			bit += 8 * w
		}
	case w <= 14:
		for ; i+4 <= len(out) && int(bit>>3)+8 <= len(src); i += 4 {
			x := binary.LittleEndian.Uint64(src[bit>>3:]) >> (bit & 7)
			o := out[i : i+4 : i+4]
			o[0], o[1], o[2], o[3] = T(x&mask+base), T(x>>w&mask+base), T(x>>(2*w)&mask+base), T(x>>(3*w)&mask+base)
			bit += 4 * w
		}
	case w <= 28:
		for ; i+2 <= len(out) && int(bit>>3)+8 <= len(src); i += 2 {
			x := binary.LittleEndian.Uint64(src[bit>>3:]) >> (bit & 7)
			o := out[i : i+2 : i+2]
			o[0], o[1] = T(x&mask+base), T(x>>w&mask+base)
			bit += 2 * w
		}
	}
	if w <= 57 {
		for ; i < len(out) && int(bit>>3)+8 <= len(src); i++ {
			out[i] = T(binary.LittleEndian.Uint64(src[bit>>3:])>>(bit&7)&mask + base)
			bit += w
		}
	} else {
		for ; i < len(out) && int(bit>>3)+9 <= len(src); i++ {
			k, s := bit>>3, bit&7
			out[i] = T((binary.LittleEndian.Uint64(src[k:])>>s|uint64(src[k+8])<<(64-s))&mask + base)
			bit += w
		}
	}
	for ; i < len(out); i++ {
		k, s := int(bit>>3), bit&7
		lo := loadTail(src, k)
		out[i] = T((lo>>s|loadTail(src, k+8)<<(64-s))&mask + base)
		bit += w
	}
}

// loadTail returns the little-endian word at src[k:], the bytes past the end of src read as 0.
func loadTail(src []byte, k int) uint64 {
	var x uint64
	for j := min(len(src), k+8) - 1; j >= k; j-- {
		x = x<<8 | uint64(src[j])
	}
	return x
}

// grow returns s with length len(s)+n, reusing its capacity when it can.
func grow[T any](s []T, n int) []T {
	if need := len(s) + n; need <= cap(s) {
		return s[:need]
	}
	out := make([]T, len(s)+n, len(s)+n+len(s)/4)
	copy(out, s)
	return out
}
