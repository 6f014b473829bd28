package columns

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Compression is the codec applied to each chunk of a chunked part. A chunk is stored
// compressed only when that makes it smaller; its first byte says which codec it uses, so a
// reader needs no option.
type Compression uint8

// The compressions. The zero value is the default, CompressionDefault.
const (
	CompressionDefault Compression = iota // s2 (see writerOptions)
	CompressionNone
	CompressionZstd
	CompressionS2
)

// String returns the name as the CLI spells it.
func (c Compression) String() string {
	switch c {
	case CompressionDefault:
		return "default"
	case CompressionNone:
		return "none"
	case CompressionZstd:
		return "zstd"
	case CompressionS2:
		return "s2"
	}
	return fmt.Sprintf("Compression(%d)", uint8(c))
}

// CompressionNames lists the compressions ParseCompression takes, as the CLI spells them.
const CompressionNames = "none, s2 or zstd"

// ParseCompression parses "none", "s2", "zstd" or "default" (or ""), in any case. Anything
// else is an error wrapping ErrInvalid.
func ParseCompression(s string) (Compression, error) {
	switch strings.ToLower(s) {
	case "", "default":
		return CompressionDefault, nil
	case "none":
		return CompressionNone, nil
	case "zstd":
		return CompressionZstd, nil
	case "s2":
		return CompressionS2, nil
	}
	return 0, fmt.Errorf("columns: unknown compression %q (want %s): %w", s, CompressionNames, ErrInvalid)
}

// Chunk codec bytes, the first byte of every chunk.
const (
	codecNone byte = 0
	codecZstd byte = 1
	codecS2   byte = 2
)

// Size limits. A blob chunk (raw strings, sketches) is closed once it holds blobChunkTarget
// bytes; one value may be at most MaxValueBytes, so that no chunk decodes to more than
// maxChunkBytes. Readers reject larger claims before allocating.
const (
	blobChunkTarget = 1 << 20
	// MaxValueBytes is the largest raw string or sketch one row may hold.
	MaxValueBytes = 16 << 20
	maxChunkBytes = blobChunkTarget + MaxValueBytes + 64<<10
)

var (
	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	zstdDec  *zstd.Decoder
	zstdErr  error
)

// zstdCodec returns the process-wide zstd encoder and decoder; EncodeAll and DecodeAll are safe
// for concurrent use.
func zstdCodec() (*zstd.Encoder, *zstd.Decoder, error) {
	zstdOnce.Do(func() {
		zstdEnc, zstdErr = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderCRC(false), // every part has a CRC-32C already
			zstd.WithZeroFrames(true),
			zstd.WithLowerEncoderMem(true))
		if zstdErr != nil {
			return
		}
		zstdDec, zstdErr = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxMemory(maxChunkBytes),
			zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderLowmem(true))
	})
	return zstdEnc, zstdDec, zstdErr
}

// appendChunk appends a chunk frame holding raw: the codec byte, and for a compressed chunk the
// raw length (uvarint) and the compressed bytes. It compresses with c and keeps the result only
// when it is smaller than storing raw as is.
//
//	codec u8 | [raw length uvarint | compressed]   or   0 | raw
func appendChunk(dst, raw []byte, c Compression) ([]byte, error) {
	start := len(dst)
	switch c {
	case CompressionZstd:
		enc, _, err := zstdCodec()
		if err != nil {
			return dst, fmt.Errorf("columns: zstd: %w", err)
		}
		dst = append(dst, codecZstd)
		dst = binary.AppendUvarint(dst, uint64(len(raw)))
		dst = enc.EncodeAll(raw, dst)
	case CompressionS2:
		dst = append(dst, codecS2)
		dst = binary.AppendUvarint(dst, uint64(len(raw)))
		head := len(dst)
		dst = grow(dst, s2.MaxEncodedLen(len(raw)))
		enc := s2.Encode(dst[head:], raw)
		dst = dst[:head+len(enc)]
	case CompressionNone, CompressionDefault:
		// stored raw below (the writer resolves the default before it gets here)
	}
	if len(dst)-start > 0 && len(dst)-start < 1+len(raw) {
		return dst, nil
	}
	dst = append(dst[:start], codecNone)
	return append(dst, raw...), nil
}

// maxFrame bounds the bytes appendChunk writes for raw bytes of length n: the codec byte, the
// raw length, and the larger of what s2 may write (its MaxEncodedLen) and zstd's bound (a few
// bytes per 128 KiB block past n). A chunk never passes maxChunkBytes, well within both.
func maxFrame(n int) int {
	return 1 + binary.MaxVarintLen64 + max(s2.MaxEncodedLen(n), n+n>>8+64)
}

// decodeBuf returns buf, or a larger one when it holds fewer than size bytes: a quarter more
// than size, so that a cursor over chunks of slightly varying sizes (blob chunks end where
// their bytes pass a target) does not allocate anew at every larger one.
//
// The larger one comes from bytePool, and buf, when given, goes back to it: buf's owner must
// hold no other view of it.
func decodeBuf(buf []byte, size int) []byte {
	if cap(buf) >= size {
		return buf[:cap(buf)]
	}
	bytePool.Put(buf)
	out := bytePool.Get(size + size/4)
	return out[:cap(out)]
}

// decodeChunk returns the raw bytes of the chunk frame src, decompressing into buf (reused when
// large enough) or, for an uncompressed chunk, returning a view of src. A raw length over maxRaw
// is rejected before anything is allocated.
func decodeChunk(buf, src []byte, maxRaw int) (raw, newBuf []byte, err error) {
	if len(src) < 1 {
		return nil, buf, corruptf("chunk: empty")
	}
	codec := src[0]
	if codec == codecNone {
		return src[1:], buf, nil
	}
	n, k := binary.Uvarint(src[1:])
	if k <= 0 || n > uint64(min(maxRaw, maxChunkBytes)) {
		return nil, buf, corruptf("chunk: bad raw length (at most %d)", min(maxRaw, maxChunkBytes))
	}
	comp := src[1+k:]
	size := int(n)
	switch codec {
	case codecZstd:
		_, dec, err := zstdCodec()
		if err != nil {
			return nil, buf, fmt.Errorf("columns: zstd: %w", err)
		}
		buf = decodeBuf(buf, size)
		var out []byte
		err = safely("zstd", func() error {
			var err error
			out, err = dec.DecodeAll(comp, buf[:0:size])
			return err
		})
		if err != nil {
			return nil, buf, corruptf("chunk: zstd: %v", err)
		}
		if len(out) != size {
			return nil, buf, corruptf("chunk: zstd: %d bytes decoded, want %d", len(out), size)
		}
		return out, buf, nil
	case codecS2:
		dl, err := s2.DecodedLen(comp)
		if err != nil || dl != size {
			return nil, buf, corruptf("chunk: s2: decoded length %d, want %d (%v)", dl, size, err)
		}
		buf = decodeBuf(buf, size)
		var out []byte
		err = safely("s2", func() error {
			var err error
			out, err = s2.Decode(buf[:size], comp)
			return err
		})
		if err != nil {
			return nil, buf, corruptf("chunk: s2: %v", err)
		}
		if len(out) != size {
			return nil, buf, corruptf("chunk: s2: %d bytes decoded, want %d", len(out), size)
		}
		return out, buf, nil
	}
	return nil, buf, corruptf("chunk: unknown codec %d", codec)
}
