package columns

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/medium"
)

// EachBitmapRows hands out exactly the rows Bitmap decodes, for mapped and ReaderAt segments,
// with the bitmap index in roaring (Compression none) and in the version 4 forms; bitmapBytes
// is what Bitmap decodes.
func TestEachBitmapRowsMatchBitmap(t *testing.T) {
	for _, comp := range []Compression{CompressionNone, CompressionDefault} {
		t.Run("compression="+comp.String(), func(t *testing.T) { testEachBitmapRowsMatchBitmap(t, comp) })
	}
}

func testEachBitmapRowsMatchBitmap(t *testing.T, comp Compression) {
	schema := Schema{Dimensions: []Dimension{{Name: "d"}, {Name: "m", MultiValue: true}, {Name: "raw", Raw: true}}}
	w, err := newRowsWriter(schema, writerOptions{Compression: comp})
	require.NoError(t, err)
	vals := []string{"a", "b", "c", "dd"}
	for i := range 3000 {
		var d []string
		if i%7 != 0 {
			d = []string{vals[i%len(vals)]}
		}
		require.NoError(t, w.AddRow(Row{Time: int64(i), Dims: [][]string{d, {vals[i%3], vals[(i+1)%4]}, {"x"}}}))
	}
	path := filepath.Join(t.TempDir(), "s.seg")
	_, err = w.Finish(path, PublishOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
	require.NoError(t, err)

	mapped, err := Open(path)
	require.NoError(t, err)
	defer func() { _ = mapped.Close() }()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	readAt, err := NewSegment(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	for _, seg := range []*Segment{mapped, readAt} {
		for _, name := range []string{"d", "m"} {
			col, err := seg.Dim(name)
			require.NoError(t, err)
			for id := range uint32(col.Cardinality()) {
				want, err := col.Bitmap(id)
				require.NoError(t, err)
				raw, err := col.bitmapBytes(id)
				require.NoError(t, err)
				require.Equal(t, comp != CompressionNone, col.bms.v4)
				got := roaring.New()
				if col.bms.v4 {
					got, err = decodeBitmap4(raw, seg.Rows())
				} else {
					_, err = got.FromUnsafeBytes(raw)
				}
				require.NoError(t, err)
				require.True(t, want.Equals(got), "column %s id %d", name, id)
				for _, piece := range []int{0, 1, 100, 5000} {
					var rows []uint32
					require.NoError(t, col.EachBitmapRows(id, make([]uint32, piece), func(rs []uint32) error {
						require.LessOrEqual(t, len(rs), max(piece, 4096))
						rows = append(rows, rs...)
						return nil
					}))
					require.Equal(t, want.ToArray(), rows, "column %s id %d piece %d", name, id, piece)
				}
			}
			_, err = col.bitmapBytes(uint32(col.Cardinality()))
			require.ErrorContains(t, err, "out of range")
			err = col.EachBitmapRows(uint32(col.Cardinality()), nil, func([]uint32) error { return nil })
			require.ErrorContains(t, err, "out of range")
			stop := errors.New("stop")
			require.Same(t, stop, col.EachBitmapRows(1, nil, func([]uint32) error { return stop }))
		}
	}
	col, err := mapped.Dim("d")
	require.NoError(t, err)
	require.NoError(t, mapped.Close())
	_, err = col.bitmapBytes(0)
	require.ErrorIs(t, err, medium.ErrClosed)
	require.ErrorIs(t, col.EachBitmapRows(0, nil, func([]uint32) error { return nil }), medium.ErrClosed)
}

// EachBitmapRows checks the bytes: a bitmap holding a row past the segment's rows, or trailing
// bytes, is corrupt, and names the column and part.
func TestEachBitmapRowsCorrupt(t *testing.T) {
	schema := Schema{Dimensions: []Dimension{{Name: "d"}}}
	w, err := newRowsWriter(schema, writerOptions{})
	require.NoError(t, err)
	for i := range 100 {
		require.NoError(t, w.AddRow(Row{Time: int64(i), Dims: [][]string{{"v"}}}))
	}
	var buf bytes.Buffer
	_, err = w.FinishTo(&buf)
	require.NoError(t, err)
	seg, err := newSegmentBytes(buf.Bytes())
	require.NoError(t, err)
	col, err := seg.Dim("d")
	require.NoError(t, err)
	raw, err := col.bitmapBytes(0)
	require.NoError(t, err)
	vals, rest, err := decodeRoaring(nil, raw, 100)
	require.NoError(t, err)
	require.Empty(t, rest)
	require.Len(t, vals, 100)
	_, _, err = decodeRoaring(nil, raw, 99)
	require.ErrorIs(t, err, ErrCorrupt, "row 99 is past a 99-row limit")

	// Corrupt the bitmap in place: a bitmap of rows 0..100 where the segment has 100 rows.
	var enc roaringEncoder
	bad := enc.appendRows(nil, append(append([]uint32(nil), vals...), 100))
	require.Len(t, bad, len(raw), "a run container of one more row is as long")
	copy(raw, bad)
	err = col.EachBitmapRows(0, nil, func([]uint32) error { return nil })
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, `columns: column "d" part bitmaps: bitmap 0: roaring: value`)
}
