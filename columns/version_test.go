package columns

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/writeout/writeout/internal/segfmt"
)

// TestFooterVersion4 pins the rule of version 4: a part may use the version 4 encoding of its
// kind only in a version 4 segment, and a version 4 segment has at least one such part (its
// metric nulls parts optional).
func TestFooterVersion4(t *testing.T) {
	const fake segfmt.Encoding = 250 // stands in for a version 4 encoding of segfmt.EncLongChunks
	real := encodingsV4[segfmt.EncLongChunks]
	encodingsV4[segfmt.EncLongChunks] = fake
	t.Cleanup(func() { encodingsV4[segfmt.EncLongChunks] = real }) // not delete: later tests write long-chunks-v4

	s, rows := goldenRows()
	good := writeColumns(t, s, rows, writerOptions{Compression: CompressionNone, ChunkRows: 3})
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	require.Equal(t, uint8(versionNoNulls), seg.f.version, "no part uses a version 4 encoding")

	decode := footerEditor(t, seg)
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

// TestFooterVersion5 pins the rule of version 5: an ids part may be id-chunks-v5 only in a
// version 5 segment, a version 5 segment has at least one version 5 part, and its other parts
// may be in version 4 encodings or not. A reader of version 4 refuses version 5 (ErrVersion).
func TestFooterVersion5(t *testing.T) {
	s, rows := deltaRows(seedFor(t, 0), 3000, 100)
	good := writeRows(t, s, rows, writerOptions{Compression: CompressionZstd, StoreIDs: true})
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	require.Equal(t, uint8(versionV5), seg.f.version)
	idx := partWith(t, seg, segfmt.EncIDChunksV5)

	decode := footerEditor(t, seg)
	_, err = decode(func(f *footer) {})
	require.NoError(t, err)

	_, err = decode(func(f *footer) { f.version = versionV4 })
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "encoding id-chunks-v5, want id-chunks")

	_, err = decode(func(f *footer) { f.parts[idx].Encoding = segfmt.EncIDChunksV4 })
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "version 5 without a part in a version 5 encoding")

	// Only for an ids part.
	_, err = decode(func(f *footer) { f.parts[0].Encoding = segfmt.EncIDChunksV5 })
	require.ErrorIs(t, err, ErrCorrupt)

	// A reader of versions up to 4 (this one, told so) refuses the file with ErrVersion.
	fb, err := appendFooter(nil, seg.f)
	require.NoError(t, err)
	last := seg.f.parts[len(seg.f.parts)-1]
	fb[0] = maxVersion + 1
	_, err = decodeFooter(fb, last.Offset+last.Length)
	require.ErrorIs(t, err, ErrVersion)
}

// footerEditor returns a function that decodes seg's footer after edit changed a copy of it.
func footerEditor(t *testing.T, seg *Segment) func(edit func(f *footer)) (*footer, error) {
	return func(edit func(f *footer)) (*footer, error) {
		f := *seg.f
		f.parts = append([]segfmt.PartInfo(nil), seg.f.parts...)
		edit(&f)
		fb, err := appendFooter(nil, &f)
		require.NoError(t, err)
		last := f.parts[len(f.parts)-1]
		return decodeFooter(fb, last.Offset+last.Length)
	}
}

// goldenFile writes got to testdata/name under -update, and returns the file's bytes and the
// segment opened from it (closed when the test ends). A golden test then checks what the
// segment reads and that got is the file's bytes.
func goldenFile(t *testing.T, name string, got []byte) ([]byte, *Segment) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	seg, err := Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = seg.Close() })
	return want, seg
}

// partWith returns the index in seg's footer of the last part in encoding enc (one must be).
func partWith(t *testing.T, seg *Segment, enc segfmt.Encoding) int {
	idx := -1
	for i, p := range seg.f.parts {
		if p.Encoding == enc {
			idx = i
		}
	}
	require.GreaterOrEqual(t, idx, 0, "no part in %s", enc)
	return idx
}
