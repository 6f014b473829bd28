// Package segsurgery takes a segment file apart and puts it back together, for tests that make
// checksum-consistent faults: a byte of a part's decoded content changed, the part re-encoded
// (a compressed chunk recompressed with its own codec) and every offset and CRC recomputed, so
// that the file opens and its checksums agree with the fault. The layouts are columns/doc.go's.
// It checks only what it needs to take a well-formed file apart; it is not a reader.
package segsurgery

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/writeout/writeout/internal/segfmt"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const magic = "WOSEG"

// File is a segment file taken apart: the footer's fields and every part's bytes.
type File struct {
	Version        byte
	Rows           uint64
	IvStart, IvEnd int64
	Schema         []byte // JSON
	Parts          []Part
}

// Part is one part: its footer entry (offset, length and CRC are recomputed by Assemble) and
// its bytes as stored.
type Part struct {
	Column int // 0 __time, then dimensions, then metrics, in schema order
	Kind   segfmt.PartKind
	Enc    segfmt.Encoding
	Data   []byte
}

var errShape = errors.New("segsurgery: not a well-formed segment")

// Parse takes b apart. The parts' bytes are copies.
func Parse(b []byte) (*File, error) {
	n := len(b)
	if n < len(magic)*2+9 || string(b[n-len(magic):]) != magic {
		return nil, errShape
	}
	flen := int(binary.LittleEndian.Uint32(b[n-len(magic)-4:]))
	fstart := n - len(magic) - 8 - flen
	if fstart < len(magic)+1 || flen < 25 {
		return nil, errShape
	}
	fb := b[fstart : fstart+flen]
	f := &File{Version: fb[0], Rows: binary.LittleEndian.Uint64(fb[1:]),
		IvStart: int64(binary.LittleEndian.Uint64(fb[9:])), IvEnd: int64(binary.LittleEndian.Uint64(fb[17:]))}
	rest := fb[25:]
	sl, k := binary.Uvarint(rest)
	if k <= 0 || sl > uint64(len(rest)-k) {
		return nil, errShape
	}
	f.Schema = append([]byte(nil), rest[k:k+int(sl)]...)
	rest = rest[k+int(sl):]
	np, k := binary.Uvarint(rest)
	if k <= 0 {
		return nil, errShape
	}
	rest = rest[k:]
	for range np {
		c, k := binary.Uvarint(rest)
		if k <= 0 || len(rest)-k < 22 {
			return nil, errShape
		}
		rest = rest[k:]
		off := binary.LittleEndian.Uint64(rest[2:])
		length := binary.LittleEndian.Uint64(rest[10:])
		if off > uint64(fstart) || length > uint64(fstart)-off {
			return nil, errShape
		}
		f.Parts = append(f.Parts, Part{Column: int(c), Kind: segfmt.PartKind(rest[0]), Enc: segfmt.Encoding(rest[1]),
			Data: append([]byte(nil), b[off:off+length]...)})
		rest = rest[22:]
	}
	if len(rest) != 0 {
		return nil, errShape
	}
	return f, nil
}

// Assemble puts the file back together, parts back to back in order, with every offset and
// CRC (the parts' and the footer's) recomputed.
func (f *File) Assemble() []byte {
	out := append([]byte(magic), f.Version)
	type entry struct {
		off, n int
		crc    uint32
	}
	ents := make([]entry, len(f.Parts))
	for i, p := range f.Parts {
		ents[i] = entry{len(out), len(p.Data), crc32.Checksum(p.Data, castagnoli)}
		out = append(out, p.Data...)
	}
	var fb []byte
	fb = append(fb, f.Version)
	fb = binary.LittleEndian.AppendUint64(fb, f.Rows)
	fb = binary.LittleEndian.AppendUint64(fb, uint64(f.IvStart))
	fb = binary.LittleEndian.AppendUint64(fb, uint64(f.IvEnd))
	fb = binary.AppendUvarint(fb, uint64(len(f.Schema)))
	fb = append(fb, f.Schema...)
	fb = binary.AppendUvarint(fb, uint64(len(f.Parts)))
	for i, p := range f.Parts {
		fb = binary.AppendUvarint(fb, uint64(p.Column))
		fb = append(fb, byte(p.Kind), byte(p.Enc))
		fb = binary.LittleEndian.AppendUint64(fb, uint64(ents[i].off))
		fb = binary.LittleEndian.AppendUint64(fb, uint64(ents[i].n))
		fb = binary.LittleEndian.AppendUint32(fb, ents[i].crc)
	}
	out = append(out, fb...)
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(fb, castagnoli))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(fb)))
	return append(out, magic...)
}

// Chunked reports whether a part of encoding e is chunked (columns/doc.go, "Chunked parts").
func Chunked(e segfmt.Encoding) bool {
	switch e {
	case segfmt.EncLongChunks, segfmt.EncDoubleChunks, segfmt.EncBlobChunks, segfmt.EncIDChunks,
		segfmt.EncMultiIDChunks, segfmt.EncLongChunksV4, segfmt.EncDoubleChunksV4, segfmt.EncIDChunksV4, segfmt.EncIDChunksV5,
		segfmt.EncIDChunksDerived:
		return true
	case segfmt.EncFrontCoded, segfmt.EncRoaringTable, segfmt.EncRoaring, segfmt.EncRoaringTableV4:
	}
	return false
}

// Codecs of a chunk frame.
const (
	CodecNone = 0
	CodecZstd = 1
	CodecS2   = 2
)

// ChunkedPart is a chunked part decoded: each chunk's codec and raw (decompressed) bytes, and
// the bytes after the chunks (index, trailer and, for id-chunks-v4, the rank table) as stored.
type ChunkedPart struct {
	Codecs []byte
	Raws   [][]byte
	Tail   []byte
}

// ParseChunked decodes a chunked part whose last tail bytes follow its trailer (the rank table
// of an id-chunks-v4 part, else 0).
func ParseChunked(data []byte, tail int) (*ChunkedPart, error) {
	if len(data) < 12+tail {
		return nil, errShape
	}
	body := data[:len(data)-tail]
	n := int(binary.LittleEndian.Uint32(body[len(body)-12:]))
	idxOff := len(body) - 12 - n*16
	if n < 0 || idxOff < 0 {
		return nil, errShape
	}
	c := &ChunkedPart{Tail: append([]byte(nil), data[idxOff:]...)}
	for i := range n {
		lo := int(binary.LittleEndian.Uint64(body[idxOff+i*16:]))
		hi := idxOff
		if i+1 < n {
			hi = int(binary.LittleEndian.Uint64(body[idxOff+(i+1)*16:]))
		}
		if lo < 0 || lo >= hi || hi > idxOff {
			return nil, errShape
		}
		codec, raw, err := decodeFrame(body[lo:hi])
		if err != nil {
			return nil, fmt.Errorf("chunk %d: %w", i, err)
		}
		c.Codecs = append(c.Codecs, codec)
		c.Raws = append(c.Raws, raw)
	}
	return c, nil
}

func decodeFrame(fr []byte) (byte, []byte, error) {
	codec := fr[0]
	if codec == CodecNone {
		return codec, append([]byte(nil), fr[1:]...), nil
	}
	size, k := binary.Uvarint(fr[1:])
	if k <= 0 {
		return 0, nil, errShape
	}
	comp := fr[1+k:]
	var raw []byte
	var err error
	switch codec {
	case CodecZstd:
		raw, err = zstdDec.DecodeAll(comp, nil)
	case CodecS2:
		raw, err = s2.Decode(nil, comp)
	default:
		return 0, nil, errShape
	}
	if err == nil && uint64(len(raw)) != size {
		err = errShape
	}
	return codec, raw, err
}

var (
	zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false))
	zstdDec, _ = zstd.NewReader(nil)
)

// Encode frames the chunks again, each with its own codec (compressed whatever the size),
// and writes the index with the new offsets, keeping the first rows, the trailer and what
// follows it from Tail.
func (c *ChunkedPart) Encode() []byte {
	var out []byte
	offs := make([]int, len(c.Raws))
	for i, raw := range c.Raws {
		offs[i] = len(out)
		out = append(out, c.Codecs[i])
		switch c.Codecs[i] {
		case CodecZstd:
			out = binary.AppendUvarint(out, uint64(len(raw)))
			out = zstdEnc.EncodeAll(raw, out)
		case CodecS2:
			out = binary.AppendUvarint(out, uint64(len(raw)))
			out = append(out, s2.Encode(nil, raw)...)
		default:
			out = append(out, raw...)
		}
	}
	tail := append([]byte(nil), c.Tail...)
	for i := range c.Raws {
		binary.LittleEndian.PutUint64(tail[i*16:], uint64(offs[i]))
	}
	return append(out, tail...)
}

// RawLen is the length of the part's decoded content: the chunks' raw bytes, then the tail.
func (c *ChunkedPart) RawLen() int {
	n := len(c.Tail)
	for _, r := range c.Raws {
		n += len(r)
	}
	return n
}

// Xor changes byte pos of the decoded content (the chunks' raw bytes back to back, then the
// tail) by x.
func (c *ChunkedPart) Xor(pos int, x byte) {
	for _, r := range c.Raws {
		if pos < len(r) {
			r[pos] ^= x
			return
		}
		pos -= len(r)
	}
	c.Tail[pos] ^= x
}

// RankTableSize is the bytes of the rank table of an id-chunks-v4 part for a dictionary of
// card ids: card ids packed at the ids' width.
func RankTableSize(card int) int {
	w := 0
	if card > 1 {
		w = bits.Len64(uint64(card - 1))
	}
	return (card*w + 7) / 8
}

// DictCardinality is the cardinality (null included) a dictionary part's trailer states.
func DictCardinality(data []byte) int {
	if len(data) < 6 {
		return 0
	}
	tr := data[len(data)-6:]
	card := int(binary.LittleEndian.Uint32(tr))
	if tr[4]&1 != 0 {
		card++
	}
	return card
}

// Decoded is one part's decoded content: the bytes a fault changes.
type Decoded struct {
	chunked *ChunkedPart // nil for a part stored as is (dictionary, bitmaps, nulls)
	data    []byte
}

// Decode decodes part i of f.
func (f *File) Decode(i int) (*Decoded, error) {
	p := f.Parts[i]
	if !Chunked(p.Enc) {
		return &Decoded{data: p.Data}, nil
	}
	tail := 0
	if p.Enc == segfmt.EncIDChunksV4 || p.Enc == segfmt.EncIDChunksV5 {
		for _, q := range f.Parts {
			if q.Column == p.Column && q.Kind == segfmt.PartDictionary {
				tail = RankTableSize(DictCardinality(q.Data))
			}
		}
	}
	c, err := ParseChunked(p.Data, tail)
	if err != nil {
		return nil, fmt.Errorf("segsurgery: part %d (column %d %s): %w", i, p.Column, p.Kind, err)
	}
	return &Decoded{chunked: c}, nil
}

// Len is the length of the decoded content.
func (d *Decoded) Len() int {
	if d.chunked != nil {
		return d.chunked.RawLen()
	}
	return len(d.data)
}

// Faulted returns a copy of the file whose part i has byte pos of its decoded content xored
// with x, re-encoded, with every offset and CRC recomputed. d is part i decoded, and is left
// as it was.
func (f *File) Faulted(i int, d *Decoded, pos int, x byte) []byte {
	g := *f
	g.Parts = append([]Part(nil), f.Parts...)
	if d.chunked == nil {
		data := append([]byte(nil), d.data...)
		data[pos] ^= x
		g.Parts[i].Data = data
		return g.Assemble()
	}
	d.chunked.Xor(pos, x)
	g.Parts[i].Data = d.chunked.Encode()
	d.chunked.Xor(pos, x)
	return g.Assemble()
}
