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
	p := packer{dst: dst, w: uint(width)}
	for _, x := range vals {
		p.put(uint64(x))
	}
	return p.flush()
}

// packer appends values of width w to dst, one at a time.
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
	unpack(out, src[:size], uint(width))
	return dst, src[size:], nil
}

// unpack decodes len(out) values of width w from src, which holds exactly packedSize bytes.
func unpack[T word](out []T, src []byte, w uint) {
	if w == 0 {
		clear(out)
		return
	}
	mask := ^uint64(0)
	if w < 64 {
		mask = 1<<w - 1
	}
	var acc uint64
	var have uint
	pos := 0
	for i := range out {
		if have >= w {
			out[i] = T(acc & mask)
			acc >>= w
			have -= w
			continue
		}
		var next uint64
		if pos+8 <= len(src) {
			next = binary.LittleEndian.Uint64(src[pos:])
		} else {
			for k := len(src) - 1; k >= pos; k-- {
				next = next<<8 | uint64(src[k])
			}
		}
		pos += 8
		out[i] = T((acc | next<<have) & mask)
		acc = next >> (w - have)
		have = 64 - (w - have)
	}
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
