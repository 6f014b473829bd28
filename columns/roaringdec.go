package columns

import (
	"encoding/binary"
	"math/bits"
)

// The decoder of the portable roaring serialization (the format roaringenc.go writes, and
// roaring's WriteTo): it hands out the values straight from the bytes, in increasing order,
// without building a roaring.Bitmap, and checks everything it reads: lengths, increasing keys
// and values, runs inside their container, cardinalities, every value below a limit.

// decodeRoaring appends the values of the serialized bitmap at the front of src to dst, in
// increasing order, and returns the rest of src. Every value must be below limit. Bad bytes
// give an error wrapping ErrCorrupt.
func decodeRoaring(dst []uint32, src []byte, limit uint64) ([]uint32, []byte, error) {
	d := roaringDecoder{out: dst}
	n, err := d.decode(src, limit, nil)
	if err != nil {
		return d.out, src, err
	}
	return d.out, src[n:], nil
}

// roaringDecoder decodes one serialized bitmap into out, or, with a positive piece, hands fn
// the values in pieces of that many (the last one shorter). fn is passed down as an argument,
// not kept in the struct, so that it does not escape: a method value costs no allocation.
type roaringDecoder struct {
	out   []uint32
	piece int   // when positive, out goes to fn every piece values
	fnErr error // the first error fn returned: decoding stops there
}

// put adds v to out; a full piece goes to fn. piece 0 never equals len(out) after an append, so
// without fn out just grows.
func (d *roaringDecoder) put(v uint32, fn func([]uint32) error) {
	d.out = append(d.out, v)
	if len(d.out) == d.piece {
		d.flush(fn)
	}
}

func (d *roaringDecoder) flush(fn func([]uint32) error) {
	if d.fnErr == nil {
		d.fnErr = fn(d.out)
	}
	d.out = d.out[:0]
}

// each decodes the bitmap at the front of src, handing fn its values piece by piece; it
// returns the bytes the bitmap took. The error is fn's first, as it returned it, or one
// wrapping ErrCorrupt.
func (d *roaringDecoder) each(src []byte, limit uint64, fn func([]uint32) error) (int, error) {
	n, err := d.decode(src, limit, fn)
	if err != nil {
		return 0, err
	}
	if len(d.out) > 0 {
		d.flush(fn)
	}
	return n, d.fnErr
}

// roaringHeader parses the front of a serialized roaring bitmap: its container headers (4 bytes
// each: key, cardinality - 1), its run flags (nil without runs), the position just past the
// headers, and whether container offsets follow them.
func roaringHeader(b []byte) (header, runFlags []byte, pos int, hasOffsets bool, err error) {
	if len(b) < 4 {
		return nil, nil, 0, false, corruptf("roaring: %d bytes", len(b))
	}
	cookie := binary.LittleEndian.Uint32(b)
	pos = 4
	var size int
	hasOffsets = true
	switch {
	case cookie&0xffff == roaringCookieRun:
		size = int(cookie>>16) + 1
		n := (size + 7) / 8
		if len(b) < pos+n {
			return nil, nil, 0, false, corruptf("roaring: truncated run flags")
		}
		runFlags = b[pos : pos+n]
		pos += n
		hasOffsets = size >= roaringNoOffsetMax
	case cookie == roaringCookieNoRun:
		if len(b) < 8 {
			return nil, nil, 0, false, corruptf("roaring: truncated size")
		}
		size = int(binary.LittleEndian.Uint32(b[4:]))
		pos = 8
	default:
		return nil, nil, 0, false, corruptf("roaring: unknown cookie %#x", cookie)
	}
	if size > 1<<16 || len(b) < pos+4*size {
		return nil, nil, 0, false, corruptf("roaring: %d containers in %d bytes", size, len(b))
	}
	return b[pos : pos+4*size], runFlags, pos + 4*size, hasOffsets, nil
}

// decode reads one bitmap from the front of b and returns its length in bytes.
func (d *roaringDecoder) decode(b []byte, limit uint64, fn func([]uint32) error) (int, error) {
	header, runFlags, pos, hasOffsets, err := roaringHeader(b)
	if err != nil {
		return 0, err
	}
	size := len(header) / 4
	if hasOffsets {
		if len(b) < pos+4*size {
			return 0, corruptf("roaring: truncated offsets")
		}
		pos += 4 * size // containers follow in order: the offsets are implied
	}
	prevKey := -1
	for i := 0; i < size; i++ {
		if d.fnErr != nil {
			return 0, d.fnErr
		}
		key := int(binary.LittleEndian.Uint16(header[4*i:]))
		card := int(binary.LittleEndian.Uint16(header[4*i+2:])) + 1
		if key <= prevKey {
			return 0, corruptf("roaring: container keys not increasing")
		}
		prevKey = key
		base := uint32(key) << 16
		if uint64(base) >= limit {
			return 0, corruptf("roaring: value %d not below %d", base, limit)
		}
		isRun := runFlags != nil && runFlags[i/8]&(1<<(i%8)) != 0
		switch {
		case isRun:
			if len(b) < pos+2 {
				return 0, corruptf("roaring: truncated run container")
			}
			nruns := int(binary.LittleEndian.Uint16(b[pos:]))
			pos += 2
			if len(b) < pos+4*nruns {
				return 0, corruptf("roaring: truncated runs")
			}
			next, total := 0, 0
			for r := 0; r < nruns; r++ {
				start := int(binary.LittleEndian.Uint16(b[pos+4*r:]))
				length := int(binary.LittleEndian.Uint16(b[pos+4*r+2:])) + 1
				if start < next || start+length > 1<<16 {
					return 0, corruptf("roaring: runs overlap or leave their container")
				}
				if uint64(base)+uint64(start+length) > limit {
					return 0, corruptf("roaring: value %d not below %d", uint64(base)+uint64(start+length-1), limit)
				}
				for v := start; v < start+length; v++ {
					d.put(base|uint32(v), fn)
				}
				next, total = start+length+1, total+length
			}
			if total != card {
				return 0, corruptf("roaring: runs hold %d values, the header says %d", total, card)
			}
			pos += 4 * nruns
		case card <= roaringArrayMax:
			if len(b) < pos+2*card {
				return 0, corruptf("roaring: truncated array container")
			}
			last := int(binary.LittleEndian.Uint16(b[pos+2*(card-1):]))
			if uint64(base)+uint64(last) >= limit {
				return 0, corruptf("roaring: value %d not below %d", uint64(base)+uint64(last), limit)
			}
			prev := -1
			for k := 0; k < card; k++ {
				v := int(binary.LittleEndian.Uint16(b[pos+2*k:]))
				if v <= prev {
					return 0, corruptf("roaring: array container not increasing")
				}
				prev = v
				d.put(base|uint32(v), fn)
			}
			pos += 2 * card
		default:
			if len(b) < pos+roaringBitmapBytes {
				return 0, corruptf("roaring: truncated bitmap container")
			}
			n := 0
			for w := 0; w < wordsPerContainer; w++ {
				word := binary.LittleEndian.Uint64(b[pos+8*w:])
				for word != 0 {
					v := base | uint32(w*64+bits.TrailingZeros64(word))
					if uint64(v) >= limit {
						return 0, corruptf("roaring: value %d not below %d", v, limit)
					}
					d.put(v, fn)
					word &= word - 1
					n++
				}
			}
			if n != card {
				return 0, corruptf("roaring: bitmap container holds %d values, the header says %d", n, card)
			}
			pos += roaringBitmapBytes
		}
	}
	if d.fnErr != nil {
		return 0, d.fnErr
	}
	return pos, nil
}
