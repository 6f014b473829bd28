package peers

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/segfmt"
)

// TestBitmapEstimates breaks down the bitmap indexes of the generated table (one segment of
// WRITEOUT_PEERS_BITMAPS rows, e.g. 3000000) and estimates candidate encodings on the real
// bitmaps (issue 14 bar 3, "bitmap index" in bench/RESULTS.md):
//
//	roaring   the portable roaring serialization the segment stores (version 2)
//	for-gaps  per roaring container: key u16, card u16, w u8, gaps bit-packed at w bits
//	huff0     per bitmap: gaps over the row range as byte planes, each plane huff0 (or raw)
//	zstd, s2  each bitmap's roaring bytes compressed, kept when smaller
//	ef        per bitmap: Elias-Fano over the row range (tag, n uvarint, l u8, lows, highs)
//
// and the time to decode every bitmap of a dimension into its rows (one pass; the machine
// may be shared: ratios only). Also the segment's parts as written.
func TestBitmapEstimates(t *testing.T) {
	n := 0
	if s := os.Getenv("WRITEOUT_PEERS_BITMAPS"); s != "" {
		_, err := fmt.Sscan(s, &n)
		require.NoError(t, err)
	}
	if n == 0 {
		t.Skip("set WRITEOUT_PEERS_BITMAPS=rows (e.g. 3000000)")
	}
	ev := Generate(n)
	dir := t.TempDir()
	path := filepath.Join(dir, "t.seg")
	size, err := WriteSegment(path, ev)
	require.NoError(t, err)
	seg, err := columns.Open(path)
	require.NoError(t, err)
	defer seg.Close()
	t.Logf("segment %d rows: %d bytes (%.2f MiB)", n, size, float64(size)/(1<<20))
	var bmTotal int64
	for _, p := range seg.Info().Parts {
		t.Logf("part %-3s %-10s %-16s %10d", p.Column, p.Kind, p.Encoding, p.Length)
		if p.Kind == segfmt.PartBitmaps {
			bmTotal += p.Length
		}
	}
	t.Logf("bitmap parts: %d bytes (%.2f MiB)", bmTotal, float64(bmTotal)/(1<<20))

	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	require.NoError(t, err)
	defer enc.Close()
	total := map[string]int{}
	for d := range 3 {
		rowsOf := map[string][]uint32{}
		for i := range ev {
			v := [3]string{ev[i].D1, ev[i].D2, ev[i].D3}[d]
			rowsOf[v] = append(rowsOf[v], uint32(i))
		}
		keys := make([]string, 0, len(rowsOf))
		for k := range rowsOf {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		sizes := map[string]int{}
		var arrays, bitmapsC, runsC, entries int
		var decode = map[string]time.Duration{}
		var raw [][]byte
		var efs [][]byte
		var hufs [][]byte
		for _, k := range keys {
			rows := rowsOf[k]
			entries += len(rows)
			bm := roaring.BitmapOf(rows...)
			bm.RunOptimize()
			st := bm.Stats()
			arrays += int(st.ArrayContainers)
			bitmapsC += int(st.BitmapContainers)
			runsC += int(st.RunContainers)
			var buf bytes.Buffer
			_, err := bm.WriteTo(&buf)
			require.NoError(t, err)
			rb := buf.Bytes()
			raw = append(raw, rb)
			sizes["roaring"] += len(rb)
			sizes["for-gaps"] += forGapsSize(rows)
			hb := huffPlanes(rows)
			hufs = append(hufs, hb)
			sizes["huff0"] += min(len(hb), len(rb))
			z := enc.EncodeAll(rb, nil)
			sizes["zstd"] += min(len(z), len(rb))
			sizes["s2"] += min(len(s2.Encode(nil, rb)), len(rb))
			e := appendEF(nil, rows, uint32(n))
			efs = append(efs, e)
			sizes["ef"] += min(len(e), len(rb))
		}
		out := make([]uint32, 0, n)
		piece := make([]uint32, 4096)
		start := time.Now()
		for _, rb := range raw {
			bm := roaring.New()
			_, err := bm.ReadFrom(bytes.NewReader(rb))
			require.NoError(t, err)
			out = out[:0]
			it := bm.ManyIterator()
			for {
				k := it.NextMany(piece)
				if k == 0 {
					break
				}
				out = append(out, piece[:k]...)
			}
		}
		decode["roaring"] = time.Since(start)
		start = time.Now()
		for i, e := range efs {
			out = decodeEF(out[:0], e)
			if i == 0 {
				require.Equal(t, rowsOf[keys[0]], out)
			}
		}
		decode["ef"] = time.Since(start)
		start = time.Now()
		for i, h := range hufs {
			out = decodeHuffPlanes(t, out[:0], h)
			if i == 0 {
				require.Equal(t, rowsOf[keys[0]], out)
			}
		}
		decode["huff0"] = time.Since(start)
		t.Logf("d%d: %d values, %d entries; containers: %d array, %d bitmap, %d run", d+1, len(keys), entries, arrays, bitmapsC, runsC)
		for _, f := range []string{"roaring", "for-gaps", "huff0", "zstd", "s2", "ef"} {
			t.Logf("d%d %-8s %10d bytes %6.2f bits/entry decode %v", d+1, f, sizes[f], 8*float64(sizes[f])/float64(entries), decode[f])
			total[f] += sizes[f]
		}
	}
	for _, f := range []string{"roaring", "for-gaps", "huff0", "zstd", "s2", "ef"} {
		t.Logf("all %-8s %10d bytes (%.2f MiB)", f, total[f], float64(total[f])/(1<<20))
	}
}

// forGapsSize is the size of rows as roaring containers whose values are gaps bit-packed at
// the container's widest gap: key u16, card-1 u16, w u8, then the packed gaps.
func forGapsSize(rows []uint32) int {
	size := 4 // count
	for lo := 0; lo < len(rows); {
		hi := lo
		for hi < len(rows) && rows[hi]>>16 == rows[lo]>>16 {
			hi++
		}
		maxGap, prev := uint32(0), uint32(0)
		for i, v := range rows[lo:hi] {
			g := v & 0xffff
			if i > 0 {
				g = v - prev - 1
			}
			maxGap = max(maxGap, g)
			prev = v
		}
		w := bits.Len32(maxGap)
		size += 5 + ((hi-lo)*w+7)/8
		lo = hi
	}
	return size
}

// huffPlanes: n uvarint | planes u8 | per plane: form u8 (0 raw, 1 huff0, 2 constant) |
// length uvarint | bytes; the planes are the gaps' bytes, low first.
func huffPlanes(rows []uint32) []byte {
	gaps := make([]uint32, len(rows))
	maxGap := uint32(0)
	for i, v := range rows {
		g := v
		if i > 0 {
			g = v - rows[i-1] - 1
		}
		gaps[i] = g
		maxGap = max(maxGap, g)
	}
	planes := (bits.Len32(maxGap) + 7) / 8
	dst := binary.AppendUvarint(nil, uint64(len(rows)))
	dst = append(dst, byte(planes))
	plane := make([]byte, len(rows))
	var s huff0.Scratch
	for p := range planes {
		for i, g := range gaps {
			plane[i] = byte(g >> (8 * p))
		}
		c, _, err := huff0.Compress1X(plane, &s)
		switch {
		case err == nil && len(c) < len(plane):
			dst = append(dst, 1)
			dst = binary.AppendUvarint(dst, uint64(len(c)))
			dst = append(dst, c...)
		case err == huff0.ErrUseRLE:
			dst = append(dst, 2, plane[0])
		default:
			dst = append(dst, 0)
			dst = append(dst, plane...)
		}
	}
	return dst
}

func decodeHuffPlanes(t *testing.T, out []uint32, b []byte) []uint32 {
	n, k := binary.Uvarint(b)
	b = b[k:]
	planes := int(b[0])
	b = b[1:]
	gaps := make([]uint32, n)
	var s huff0.Scratch
	for p := range planes {
		var plane []byte
		switch b[0] {
		case 1:
			l, k := binary.Uvarint(b[1:])
			c := b[1+k : 1+k+int(l)]
			b = b[1+k+int(l):]
			sc, rest, err := huff0.ReadTable(c, &s)
			require.NoError(t, err)
			plane, err = sc.Decompress1X(rest)
			require.NoError(t, err)
		case 2:
			plane = bytes.Repeat(b[1:2], int(n))
			b = b[2:]
		default:
			plane = b[1 : 1+n]
			b = b[1+n:]
		}
		for i := range gaps {
			gaps[i] |= uint32(plane[i]) << (8 * p)
		}
	}
	v := uint32(0)
	for i, g := range gaps {
		if i == 0 {
			v = g
		} else {
			v += g + 1
		}
		out = append(out, v)
	}
	return out
}

// appendEF: 1 | n uvarint | l u8 | n lows at l bits | highs: bit high(i)+i set, in
// ceil((n + limit>>l + 1)/8) bytes.
func appendEF(dst []byte, rows []uint32, limit uint32) []byte {
	n := len(rows)
	l := 0
	if n > 0 && int(limit)/n > 1 {
		l = bits.Len32(limit/uint32(n)) - 1
	}
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = append(dst, byte(l))
	lows := make([]byte, (n*l+7)/8+8)
	for i, v := range rows {
		pos := i * l
		x := binary.LittleEndian.Uint64(lows[pos/8:])
		x |= uint64(v&(1<<l-1)) << (pos % 8)
		binary.LittleEndian.PutUint64(lows[pos/8:], x)
	}
	dst = append(dst, lows[:(n*l+7)/8]...)
	hb := (n + int(limit>>l) + 1 + 7) / 8
	highs := make([]byte, hb)
	for i, v := range rows {
		p := int(v>>l) + i
		highs[p/8] |= 1 << (p % 8)
	}
	return append(dst, highs...)
}

func decodeEF(out []uint32, b []byte) []uint32 {
	n, k := binary.Uvarint(b[1:])
	b = b[1+k:]
	l := int(b[0])
	b = b[1:]
	lb := (int(n)*l + 7) / 8
	lows, highs := b[:lb], b[lb:]
	mask := uint64(1)<<l - 1
	i := 0
	for w := 0; w < len(highs) && i < int(n); w += 8 {
		var x uint64
		if w+8 <= len(highs) {
			x = binary.LittleEndian.Uint64(highs[w:])
		} else {
			var tmp [8]byte
			copy(tmp[:], highs[w:])
			x = binary.LittleEndian.Uint64(tmp[:])
		}
		for ; x != 0; x &= x - 1 {
			p := w*8 + bits.TrailingZeros64(x)
			high := uint32(p - i)
			pos := i * l
			var lo uint64
			if l > 0 {
				var tmp [8]byte
				copy(tmp[:], lows[pos/8:])
				lo = binary.LittleEndian.Uint64(tmp[:]) >> (pos % 8) & mask
			}
			out = append(out, high<<l|uint32(lo))
			i++
		}
	}
	return out
}
