package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/parquet-go/parquet-go/format"
)

// What a Parquet page's compressed bytes decode to, checked against its header before
// parquet-go's decoders trust them (see parquet_check.go).

// maxRatio is the most a page of codec c can grow when decompressed (of its compressed
// bytes), 0 for no bound but maxPageBytes: snappy writes at most 64 bytes with a copy of 3;
// LZ4 adds 255 bytes of length per byte; deflate reaches 1032:1; a zstd RLE block 2^17
// bytes from 4; brotli has no small bound.
func maxRatio(c format.CompressionCodec) int64 {
	switch c {
	case format.Uncompressed:
		return 1
	case format.Snappy:
		return 22
	case format.Lz4Raw:
		return 256
	case format.Gzip:
		return 1033
	case format.Zstd:
		return 1 << 15
	case format.Brotli, format.LZO, format.Lz4:
	}
	return 0
}

// checkCompressed checks what the n compressed bytes at off say they decode to against
// expect, the bytes they must decode to, where the codec's decoder would trust them.
func (f *pqFile) checkCompressed(w *pageWindow, codec format.CompressionCodec, off, n, expect int64) error {
	switch codec {
	case format.Snappy: // a preamble: the decoded length, which the decoder allocates
		b, err := w.at(off, int(min(n, 10)), 64<<10)
		if err != nil {
			return err
		}
		v, k := binary.Uvarint(b)
		if k <= 0 || v != uint64(expect) {
			return fmt.Errorf("snappy data of %d bytes, the page header says %d", v, expect)
		}
	case format.Lz4Raw: // parquet-go doubles its buffer for as long as a block does not decode
		b, err := w.at(off, int(n), 64<<10)
		if err != nil {
			return err
		}
		got, err := lz4BlockSize(b, expect)
		if err != nil {
			return err
		}
		if got != expect {
			return fmt.Errorf("LZ4 data of %d bytes, the page header says %d", got, expect)
		}
	case format.Zstd: // a frame's content size, which the decoder allocates
		b, err := w.at(off, int(min(n, 18)), 64<<10)
		if err != nil {
			return err
		}
		if fcs, ok := zstdContentSize(b); ok && fcs > uint64(expect) {
			return fmt.Errorf("zstd data of %d bytes, the page header says %d", fcs, expect)
		}
	case format.Gzip: // its decoder grows its buffer until the stream ends: count what it gives
		b, err := w.at(off, int(n), 64<<10)
		if err != nil {
			return err
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("gzip data: %w", err)
		}
		if f.scratch == nil {
			f.scratch = make([]byte, 32<<10)
		}
		got, err := io.CopyBuffer(io.Discard, io.LimitReader(zr, expect+1), f.scratch)
		if err != nil {
			return fmt.Errorf("gzip data: %w", err)
		}
		if got != expect {
			return fmt.Errorf("gzip data of %s bytes, the page header says %d", atLeast(got, expect), expect)
		}
	case format.Uncompressed, format.Brotli, format.LZO, format.Lz4:
		// Brotli streams into a buffer that grows until the stream ends: bounded by
		// maxPageBytes only, as no decoder of it is at hand to count what it gives.
	}
	return nil
}

// atLeast writes got, the bytes read with a limit of expect+1: "over expect" when it is.
func atLeast(got, expect int64) string {
	if got > expect {
		return fmt.Sprintf("over %d", expect)
	}
	return fmt.Sprint(got)
}

// zstdContentSize returns the content size in the header of the zstd frame at the start of b,
// when it has one.
func zstdContentSize(b []byte) (uint64, bool) {
	if len(b) < 5 || binary.LittleEndian.Uint32(b) != 0xFD2FB528 {
		return 0, false
	}
	fhd := b[4]
	single := fhd>>5&1 == 1
	i := 5
	if !single {
		i++ // the window descriptor
	}
	i += [4]int{0, 1, 2, 4}[fhd&3] // the dictionary id
	size := [4]int{0, 2, 4, 8}[fhd>>6]
	if fhd>>6 == 0 && single {
		size = 1
	}
	if size == 0 || i+size > len(b) {
		return 0, false
	}
	switch size {
	case 1:
		return uint64(b[i]), true
	case 2:
		return uint64(binary.LittleEndian.Uint16(b[i:])) + 256, true
	case 4:
		return uint64(binary.LittleEndian.Uint32(b[i:])), true
	}
	return binary.LittleEndian.Uint64(b[i:]), true
}

// lz4BlockSize returns the bytes the LZ4 block src decodes to, reading its sequences without
// decoding them, or an error when it is not a block the decoder reads (github.com/pierrec/lz4
// reads a block whose last sequence is literals only or ends with a match) or decodes to
// more than limit bytes. An empty block is empty.
func lz4BlockSize(src []byte, limit int64) (int64, error) {
	var n int64
	i := 0
	length := func(l int64) (int64, error) { // a length of 15 goes on in bytes of 255
		for {
			if i >= len(src) {
				return 0, errors.New("LZ4 block ends inside a length")
			}
			c := src[i]
			i++
			if l += int64(c); l > limit {
				return 0, fmt.Errorf("LZ4 data of over %d bytes, the page header says %d", limit, limit)
			}
			if c != 255 {
				return l, nil
			}
		}
	}
	for i < len(src) {
		tok := src[i]
		i++
		lit := int64(tok >> 4)
		var err error
		if lit == 15 {
			if lit, err = length(lit); err != nil {
				return 0, err
			}
		}
		if lit > int64(len(src)-i) {
			return 0, errors.New("LZ4 literals past the end of the block")
		}
		i += int(lit)
		if n += lit; n > limit {
			return 0, fmt.Errorf("LZ4 data of over %d bytes, the page header says %d", limit, limit)
		}
		if i == len(src) && tok&15 == 0 {
			break // the last sequence: literals only
		}
		if len(src)-i < 2 {
			return 0, errors.New("LZ4 block ends inside a sequence")
		}
		offset := int64(src[i]) | int64(src[i+1])<<8
		i += 2
		if offset == 0 || offset > n {
			return 0, fmt.Errorf("LZ4 match at offset %d after %d bytes", offset, n)
		}
		ml := int64(tok & 15)
		if ml == 15 {
			if ml, err = length(ml); err != nil {
				return 0, err
			}
		}
		if n += ml + 4; n > limit {
			return 0, fmt.Errorf("LZ4 data of over %d bytes, the page header says %d", limit, limit)
		}
	}
	return n, nil
}
