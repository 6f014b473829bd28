package columns

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/fse"
	"github.com/klauspost/compress/huff0"
)

// The planes form (version 4) of n unsigned values of width w (1..64 bits): the values split
// into p = ceil(w/8) byte planes, plane j holding byte j of every value (plane 0 the low bytes),
// each plane stored in the smallest of
//
//	raw       0 | n bytes
//	constant  1 | the byte                          (all n bytes equal)
//	huffman   2 | size uvarint | huff0 4-stream block with its table (n bytes)
//	fse       3 | size uvarint | fse block with its table (n bytes)
//
// Bit-packing keeps the values' widths but destroys their byte patterns; the planes let an
// entropy coder see the skew of each byte (the low byte of small deltas, the rare high byte of
// exponential metrics, the Zipf ranks of dictionary ids). A plane may hold at most
// maxPlaneBytes values, below huff0's block limit.
const (
	planeRaw      byte = 0
	planeConstant byte = 1
	planeHuff     byte = 2
	planeFSE      byte = 3

	maxPlaneBytes = maxChunkRows
	// minPlaneBytes is the fewest values worth entropy coding: below it the tables cost more
	// than they save.
	minPlaneBytes = 64
	// fseTry: fse is tried for a plane huffman codes below 8/fseTry bits a byte; fseGain: it
	// is kept when it saves more than 1/fseGain of the bytes.
	fseTry  = 3
	fseGain = 8
)

var _ = [1]struct{}{}[maxPlaneBytes/(huff0.BlockSizeMax+1)] // a plane fits one huff0 block

// planeCoder holds an encoder's scratch; one goroutine uses it at a time.
type planeCoder struct {
	u64   []uint64 // the values being coded
	plane []byte
	out   []byte
	hs    huff0.Scratch
	fs    fse.Scratch
}

func newPlaneCoder() *planeCoder {
	pc := &planeCoder{}
	pc.hs.Reuse = huff0.ReusePolicyNone
	return pc
}

// planeCount returns the planes of values of width w.
func planeCount(w int) int { return (w + 7) / 8 }

// appendPlanes appends vals (each below 2^w, w in 1..64) in the planes form and reports
// whether it did; it declines (returning dst unchanged) for too few or too many values, or
// when the planes would not be smaller than limit bytes.
func appendPlanes[T unsigned](pc *planeCoder, dst []byte, vals []T, w, limit int) ([]byte, bool) {
	n := len(vals)
	if n < minPlaneBytes || n > maxPlaneBytes || w < 1 || w > 64 {
		return dst, false
	}
	start := len(dst)
	if cap(pc.plane) < n {
		pc.plane = make([]byte, n)
	}
	plane := pc.plane[:n]
	for j := range planeCount(w) {
		shift := uint(8 * j)
		for i, v := range vals {
			plane[i] = byte(uint64(v) >> shift)
		}
		dst = pc.appendPlane(dst, plane)
		if len(dst)-start >= limit {
			return dst[:start], false
		}
	}
	return dst, true
}

// appendPlane appends one plane in the smallest of its forms.
func (pc *planeCoder) appendPlane(dst, plane []byte) []byte {
	best, bestSize := planeRaw, 1+len(plane)
	var bestOut []byte
	out, _, err := huff0.Compress4X(plane, &pc.hs)
	switch {
	case errors.Is(err, huff0.ErrUseRLE):
		return append(dst, planeConstant, plane[0])
	case err == nil:
		if s := 1 + uvarintLen(uint64(len(out))) + len(out); s < bestSize {
			pc.out = append(pc.out[:0], out...)
			best, bestSize, bestOut = planeHuff, s, pc.out
		}
	}
	// FSE codes below one bit a byte where huffman cannot, but decodes several times slower:
	// it is tried only for planes huffman finds skewed, and kept only when it saves a good
	// share.
	if best == planeHuff && bestSize < len(plane)/fseTry {
		out, err := fse.Compress(plane, &pc.fs)
		if err == nil {
			if s := 1 + uvarintLen(uint64(len(out))) + len(out); s < bestSize-bestSize/fseGain {
				best, bestOut = planeFSE, out
			}
		}
	}
	dst = append(dst, best)
	if best == planeRaw {
		return append(dst, plane...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(bestOut)))
	return append(dst, bestOut...)
}

// planeDecoder holds a decoder's scratch; one goroutine uses it at a time.
type planeDecoder struct {
	u64   []uint64 // decoded values
	plane []byte
	hs    huff0.Scratch
	fs    fse.Scratch
}

func newPlaneDecoder() *planeDecoder { return &planeDecoder{} }

// decodePlanes appends the n values of width w of the planes form at the front of src to dst
// and returns the rest of src. Bad bytes give an error wrapping ErrCorrupt.
func decodePlanes[T unsigned](pd *planeDecoder, dst []T, src []byte, n, w int) ([]T, []byte, error) {
	if n < 0 || n > maxPlaneBytes || w < 1 || w > 8*int(sizeOf[T]()) {
		return dst, src, corruptf("planes: %d values of width %d", n, w)
	}
	start := len(dst)
	dst = grow(dst, n)
	out := dst[start:]
	planes := planeCount(w)
	for j := range planes {
		var plane []byte
		var err error
		plane, src, err = pd.plane1(src, n)
		if err != nil {
			return dst[:start], src, fmt.Errorf("plane %d: %w", j, err)
		}
		if j == planes-1 && w%8 != 0 {
			// The top plane holds only w%8 bits of each value.
			var or byte
			for _, b := range plane {
				or |= b
			}
			if or>>uint(w%8) != 0 {
				return dst[:start], src, corruptf("planes: a value wider than %d bits", w)
			}
		}
		shift := uint(8 * j)
		switch {
		case j == 0 && plane == nil:
			clear(out)
		case j == 0:
			for i, b := range plane {
				out[i] = T(b)
			}
		case plane == nil: // a zero plane
		default:
			for i, b := range plane {
				out[i] |= T(b) << shift
			}
		}
	}
	return dst, src, nil
}

func sizeOf[T unsigned]() uintptr {
	var z T
	if uint64(^z) == 1<<32-1 {
		return 4
	}
	return 8
}

// plane1 decodes one plane of n bytes at the front of src. A constant plane is applied to
// pd.plane and returned as nil when zero.
func (pd *planeDecoder) plane1(src []byte, n int) (plane, rest []byte, err error) {
	if len(src) < 1 {
		return nil, src, corruptf("missing plane")
	}
	mode := src[0]
	src = src[1:]
	switch mode {
	case planeRaw:
		if len(src) < n {
			return nil, src, corruptf("raw plane of %d bytes, have %d", n, len(src))
		}
		return src[:n], src[n:], nil
	case planeConstant:
		if len(src) < 1 {
			return nil, src, corruptf("missing constant")
		}
		if src[0] == 0 {
			return nil, src[1:], nil
		}
		pd.plane = grow(pd.plane[:0], n)
		for i := range pd.plane {
			pd.plane[i] = src[0]
		}
		return pd.plane, src[1:], nil
	case planeHuff, planeFSE:
		size, k := binary.Uvarint(src)
		if k <= 0 || size > uint64(len(src)-k) {
			return nil, src, corruptf("coded plane size past the end")
		}
		block := src[k : k+int(size)]
		rest = src[k+int(size):]
		var out []byte
		err := safely("plane", func() error {
			var err error
			if mode == planeHuff {
				pd.hs.MaxDecodedSize = n
				var s *huff0.Scratch
				s, block, err = huff0.ReadTable(block, &pd.hs)
				if err != nil {
					return err
				}
				out, err = s.Decompress4X(block, n)
				return err
			}
			pd.fs.DecompressLimit = n
			out, err = fse.Decompress(block, &pd.fs)
			return err
		})
		if err != nil {
			return nil, src, corruptf("coded plane: %v", err)
		}
		if len(out) != n {
			return nil, src, corruptf("coded plane of %d bytes, want %d", len(out), n)
		}
		return out, rest, nil
	}
	return nil, src, corruptf("unknown plane form %d", mode)
}

// planesFor reports whether a writer of chunks compressed with c uses the version 4 chunk
// forms (the planes form, ranked ids), wherever they make a chunk smaller: under zstd, the
// choice for size. Never under CompressionNone, which means no coding beyond bit-packing; and
// not under s2, the default, the choice for speed: the version 4 forms make chunks smaller,
// but a cursor scan of a column in them costs about three times the CPU, and a merge about a
// third more (BenchmarkEventRead; bench/RESULTS.md has the measurements).
func planesFor(c Compression) bool {
	switch c {
	case CompressionZstd:
		return true
	case CompressionNone, CompressionS2, CompressionDefault:
	}
	return false
}
