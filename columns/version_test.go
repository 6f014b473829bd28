package columns

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/writeout/writeout/internal/segfmt"
)

// TestFooterVersion4 pins the rule of version 4: a part may use the version 4 encoding of its
// kind only in a version 4 segment, and a version 4 segment has at least one such part (its
// metric nulls parts optional).
func TestFooterVersion4(t *testing.T) {
	const fake segfmt.Encoding = 250 // stands in for a version 4 encoding of segfmt.EncLongChunks
	encodingsV4[segfmt.EncLongChunks] = fake
	t.Cleanup(func() { delete(encodingsV4, segfmt.EncLongChunks) })

	s, rows := goldenRows()
	good := writeColumns(t, s, rows, writerOptions{Compression: CompressionNone, ChunkRows: 3})
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	require.Equal(t, uint8(versionNoNulls), seg.f.version, "no part uses a version 4 encoding")

	decode := func(edit func(f *footer)) (*footer, error) {
		f := *seg.f
		f.parts = append([]segfmt.PartInfo(nil), seg.f.parts...)
		edit(&f)
		fb, err := appendFooter(nil, &f)
		require.NoError(t, err)
		last := f.parts[len(f.parts)-1]
		return decodeFooter(fb, last.Offset+last.Length)
	}
	toV4 := func(f *footer) { f.parts[0].Encoding = fake } // __time values

	f, err := decode(func(f *footer) { f.version = versionV4; toV4(f) })
	require.NoError(t, err)
	require.Equal(t, fake, f.parts[0].Encoding)

	_, err = decode(func(f *footer) { f.version = versionNoNulls; toV4(f) })
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, `column "__time" part values: encoding encoding250, want long-chunks`)

	_, err = decode(func(f *footer) { f.version = versionNulls; toV4(f) })
	require.ErrorIs(t, err, ErrCorrupt)

	_, err = decode(func(f *footer) { f.version = versionV4 })
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "version 4 without a part in a version 4 encoding")

	// A version 4 encoding stands only for the part kind it replaces.
	_, err = decode(func(f *footer) { f.version = versionV4; toV4(f); f.parts[1].Encoding = fake })
	require.ErrorIs(t, err, ErrCorrupt)
}
