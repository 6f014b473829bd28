package columns

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/segfmt"
)

func isChunkedEncoding(e segfmt.Encoding) bool {
	switch e {
	case segfmt.EncLongChunks, segfmt.EncDoubleChunks, segfmt.EncBlobChunks, segfmt.EncIDChunks, segfmt.EncMultiIDChunks,
		segfmt.EncLongChunksV4, segfmt.EncDoubleChunksV4, segfmt.EncIDChunksV4, segfmt.EncIDChunksV5, segfmt.EncIDChunksDerived:
		return true
	case segfmt.EncFrontCoded, segfmt.EncRoaringTable, segfmt.EncRoaring, segfmt.EncRoaringTableV4:
		return false
	}
	return false
}

// TestPartCodecs writes one segment per compression and checks that PartCodecs finds every
// chunked part (a version 4 ids part, with its rank table, included), counts each of its chunks
// once, by the codec the writer was given or none, and says no for the other parts.
func TestPartCodecs(t *testing.T) {
	s := allSchema()
	g := newRowGen(seedFor(t, 0), s)
	rows := make([]Row, 5*256+3)
	for i := range rows {
		rows[i] = g.next()
	}
	for _, opts := range []writerOptions{{Compression: CompressionNone}, {Compression: CompressionS2},
		{Compression: CompressionZstd}, {Compression: CompressionZstd, StoreIDs: true}} {
		comp := opts.Compression
		opts.ChunkRows = 256
		t.Run(fmt.Sprintf("compression=%s/store-ids=%v", comp, opts.StoreIDs), func(t *testing.T) {
			seg, err := newSegmentBytes(writeRows(t, s, rows, opts))
			require.NoError(t, err)
			var total ChunkCodecs
			v4, derived := false, false
			for i, p := range seg.Info().Parts {
				c, ok, err := seg.PartCodecs(i)
				require.NoError(t, err, "%s %s", p.Column, p.Kind)
				require.Equal(t, isChunkedEncoding(p.Encoding), ok, "%s %s %s", p.Column, p.Kind, p.Encoding)
				if !ok {
					require.Zero(t, c)
					continue
				}
				v4 = v4 || p.Encoding == segfmt.EncIDChunksV4 || p.Encoding == segfmt.EncIDChunksV5
				derived = derived || p.Encoding == segfmt.EncIDChunksDerived
				ix := seg.chunkIndexOf(&seg.f.parts[i])
				require.Equal(t, ix.chunks(), c.Chunks(), "%s %s", p.Column, p.Kind)
				require.Positive(t, c.Chunks())
				total.None += c.None
				total.S2 += c.S2
				total.Zstd += c.Zstd
			}
			switch comp {
			case CompressionNone:
				require.Zero(t, total.S2+total.Zstd)
			case CompressionS2:
				require.Zero(t, total.Zstd)
				require.Positive(t, total.S2)
			case CompressionDefault:
				t.Fatal("not written with the default")
			case CompressionZstd:
				require.Zero(t, total.S2)
				require.Positive(t, total.Zstd)
				if opts.StoreIDs {
					require.True(t, v4, "no id-chunks-v4 part: the rank table's offset is not exercised")
				} else {
					require.True(t, derived, "no id-chunks-derived part")
				}
			}
			_, _, err = seg.PartCodecs(len(seg.Info().Parts))
			require.ErrorIs(t, err, ErrInvalid)
			require.NoError(t, seg.Close())
			_, _, err = seg.PartCodecs(0)
			require.ErrorIs(t, err, ErrState)
		})
	}
}

func TestPartCodecsCorrupt(t *testing.T) {
	s := allSchema()
	g := newRowGen(seedFor(t, 0), s)
	rows := make([]Row, 300)
	for i := range rows {
		rows[i] = g.next()
	}
	data := writeRows(t, s, rows, writerOptions{ChunkRows: 256, Compression: CompressionZstd})
	seg, err := newSegmentBytes(data)
	require.NoError(t, err)
	p := seg.Info().Parts[0] // __time values, chunk 0
	damaged := append([]byte(nil), data...)
	damaged[p.Offset] = 9
	seg, err = newSegmentBytes(damaged)
	require.NoError(t, err)
	_, ok, err := seg.PartCodecs(0)
	require.True(t, ok)
	require.ErrorIs(t, err, ErrCorrupt, "the part's CRC is checked first")
}

func TestChunkCodecsString(t *testing.T) {
	f := func(c ChunkCodecs, want string) {
		t.Helper()
		assert.Equal(t, want, c.String(), fmt.Sprintf("%+v", c))
	}
	f(ChunkCodecs{}, "-")
	f(ChunkCodecs{Zstd: 3}, "zstd")
	f(ChunkCodecs{S2: 1}, "s2")
	f(ChunkCodecs{None: 2}, "none")
	f(ChunkCodecs{Zstd: 12, None: 3}, "zstd:12+none:3")
	f(ChunkCodecs{Zstd: 1, None: 3}, "none:3+zstd:1")
	f(ChunkCodecs{Zstd: 1, S2: 2, None: 3}, "none:3+s2:2+zstd:1")
}
