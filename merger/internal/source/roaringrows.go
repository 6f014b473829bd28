package source

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// errRoaring marks serialized roaring bytes that do not decode.
var errRoaring = errors.New("malformed roaring bitmap")

// Cookies and limits of the portable roaring serialization (RoaringFormatSpec).
const (
	roaringCookieNoRun      = 12346
	roaringCookieRun        = 12347
	roaringNoOffsetMax      = 4
	roaringArrayMax         = 4096
	roaringBitmapContainerB = 8192
)

// AppendRoaringRows appends the values of a bitmap in the portable roaring serialization (as
// roaring's WriteTo writes it) to dst, in increasing order, without building a bitmap.
func AppendRoaringRows(dst []uint32, b []byte, limit uint64) ([]uint32, error) {
	d := roaringDecoder{out: dst}
	err := d.decode(b, limit)
	return d.out, err
}

// EachRoaringRows hands sink the values of a serialized bitmap in increasing order, in pieces
// of at most len(buf).
func EachRoaringRows(b []byte, limit uint64, buf []uint32, sink RowSink) error {
	d := roaringDecoder{out: buf[:0], piece: len(buf), sink: sink}
	if err := d.decode(b, limit); err != nil {
		return err
	}
	if len(d.out) > 0 {
		return sink.Rows(d.out)
	}
	return nil
}

// roaringDecoder decodes the portable roaring serialization, checking everything it reads:
// lengths, increasing keys and values, runs inside their container, cardinalities, every
// value below the limit, and that the bytes hold nothing more.
type roaringDecoder struct {
	out   []uint32
	piece int // when positive, out goes to sink every piece values
	sink  RowSink
	err   error
}

// put adds v to out; a full piece goes to the sink. piece 0 never equals len(out) after an
// append, so without a sink out just grows.
func (d *roaringDecoder) put(v uint32) {
	d.out = append(d.out, v)
	if len(d.out) == d.piece {
		d.flush()
	}
}

func (d *roaringDecoder) flush() {
	if d.err == nil {
		d.err = d.sink.Rows(d.out)
	}
	d.out = d.out[:0]
}

func (d *roaringDecoder) decode(b []byte, limit uint64) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errRoaring}, args...)...)
	}
	if len(b) < 4 {
		return bad("%d bytes", len(b))
	}
	cookie := binary.LittleEndian.Uint32(b)
	pos := 4
	var size int
	var runFlags []byte
	hasOffsets := true
	switch {
	case cookie&0xffff == roaringCookieRun:
		size = int(cookie>>16) + 1
		n := (size + 7) / 8
		if len(b) < pos+n {
			return bad("truncated run flags")
		}
		runFlags = b[pos : pos+n]
		pos += n
		hasOffsets = size >= roaringNoOffsetMax
	case cookie == roaringCookieNoRun:
		if len(b) < 8 {
			return bad("truncated size")
		}
		size = int(binary.LittleEndian.Uint32(b[4:]))
		pos = 8
	default:
		return bad("unknown cookie %#x", cookie)
	}
	if size > 1<<16 || len(b) < pos+4*size {
		return bad("%d containers in %d bytes", size, len(b))
	}
	header := b[pos : pos+4*size]
	pos += 4 * size
	if hasOffsets {
		if len(b) < pos+4*size {
			return bad("truncated offsets")
		}
		pos += 4 * size // containers follow in order: the offsets are implied
	}
	prevKey := -1
	for i := 0; i < size; i++ {
		if d.err != nil {
			return d.err
		}
		key := int(binary.LittleEndian.Uint16(header[4*i:]))
		card := int(binary.LittleEndian.Uint16(header[4*i+2:])) + 1
		if key <= prevKey {
			return bad("container keys not increasing")
		}
		prevKey = key
		base := uint32(key) << 16
		if uint64(base) >= limit {
			return bad("value %d not below %d", base, limit)
		}
		isRun := runFlags != nil && runFlags[i/8]&(1<<(i%8)) != 0
		switch {
		case isRun:
			if len(b) < pos+2 {
				return bad("truncated run container")
			}
			nruns := int(binary.LittleEndian.Uint16(b[pos:]))
			pos += 2
			if len(b) < pos+4*nruns {
				return bad("truncated runs")
			}
			next, total := 0, 0
			for r := 0; r < nruns; r++ {
				start := int(binary.LittleEndian.Uint16(b[pos+4*r:]))
				length := int(binary.LittleEndian.Uint16(b[pos+4*r+2:])) + 1
				if start < next || start+length > 1<<16 {
					return bad("runs overlap or leave their container")
				}
				if uint64(base)+uint64(start+length) > limit {
					return bad("value %d not below %d", uint64(base)+uint64(start+length-1), limit)
				}
				for v := start; v < start+length; v++ {
					d.put(base | uint32(v))
				}
				next, total = start+length+1, total+length
			}
			if total != card {
				return bad("runs hold %d values, the header says %d", total, card)
			}
			pos += 4 * nruns
		case card <= roaringArrayMax:
			if len(b) < pos+2*card {
				return bad("truncated array container")
			}
			last := int(binary.LittleEndian.Uint16(b[pos+2*(card-1):]))
			if uint64(base)+uint64(last) >= limit {
				return bad("value %d not below %d", uint64(base)+uint64(last), limit)
			}
			prev := -1
			for k := 0; k < card; k++ {
				v := int(binary.LittleEndian.Uint16(b[pos+2*k:]))
				if v <= prev {
					return bad("array container not increasing")
				}
				prev = v
				d.put(base | uint32(v))
			}
			pos += 2 * card
		default:
			if len(b) < pos+roaringBitmapContainerB {
				return bad("truncated bitmap container")
			}
			n := 0
			for w := 0; w < 1024; w++ {
				word := binary.LittleEndian.Uint64(b[pos+8*w:])
				for word != 0 {
					v := base | uint32(w*64+bits.TrailingZeros64(word))
					if uint64(v) >= limit {
						return bad("value %d not below %d", v, limit)
					}
					d.put(v)
					word &= word - 1
					n++
				}
			}
			if n != card {
				return bad("bitmap container holds %d values, the header says %d", n, card)
			}
			pos += roaringBitmapContainerB
		}
	}
	if d.err != nil {
		return d.err
	}
	if pos != len(b) {
		return bad("%d trailing bytes", len(b)-pos)
	}
	return nil
}
