package columns

import (
	"path/filepath"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/medium"
)

// BitmapBytes hands out exactly the bytes Bitmap decodes, for mapped and ReaderAt segments.
func TestBitmapBytesMatchBitmap(t *testing.T) {
	schema := Schema{Dimensions: []Dimension{{Name: "d"}, {Name: "m", MultiValue: true}, {Name: "raw", Raw: true}}}
	w, err := NewWriter(schema, WriterOptions{})
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

	seg, err := Open(path)
	require.NoError(t, err)
	defer seg.Close()
	for _, name := range []string{"d", "m"} {
		col, err := seg.Dim(name)
		require.NoError(t, err)
		for id := range uint32(col.Cardinality()) {
			want, err := col.Bitmap(id)
			require.NoError(t, err)
			raw, err := col.BitmapBytes(id)
			require.NoError(t, err)
			got := roaring.New()
			_, err = got.FromUnsafeBytes(raw)
			require.NoError(t, err)
			require.True(t, want.Equals(got), "column %s id %d", name, id)
		}
		_, err = col.BitmapBytes(uint32(col.Cardinality()))
		require.ErrorContains(t, err, "out of range")
	}
	col, err := seg.Dim("d")
	require.NoError(t, err)
	require.NoError(t, seg.Close())
	_, err = col.BitmapBytes(0)
	require.ErrorIs(t, err, medium.ErrClosed)
}
