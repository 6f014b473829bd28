package columns

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// dropRecorder is a ReaderAt that is a PageDropper, recording the ranges dropped.
type dropRecorder struct {
	*bytes.Reader
	dropped [][2]int64
}

func (d *dropRecorder) DropPages(off, n int64) error {
	d.dropped = append(d.dropped, [2]int64{off, n})
	return nil
}

// TestNewSegmentPageDropper: a segment over a ReaderAt that can drop the pages it holds
// (columns.PageDropper, an object store reader's mapped cache) releases them through it:
// ReleasePages drops the whole range; over a plain ReaderAt it does nothing.
func TestNewSegmentPageDropper(t *testing.T) {
	seg, d, data, _ := dropperSegment(t, 1000)
	require.NoError(t, seg.ReleasePages())
	require.Equal(t, [][2]int64{{0, int64(len(data))}}, d.dropped)
	require.NoError(t, seg.verifyChecksums())
	require.NoError(t, seg.Close())

	plain, err := NewSegment(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	require.NoError(t, plain.ReleasePages())
	require.NoError(t, plain.Close())
}

// TestPartCheckDropsPieces: the read path's check of a large part of a segment over a
// PageDropper gives each piece back once hashed (the mapped cache of an s3:// input would
// otherwise hold the whole part), and the rows still read right.
func TestPartCheckDropsPieces(t *testing.T) {
	saved := crcViaFileMin
	crcViaFileMin = 1 << 10 // every part past 1 KiB is large
	t.Cleanup(func() { crcViaFileMin = saved })
	seg, d, data, rows := dropperSegment(t, 8000)
	defer func() { require.NoError(t, seg.Close()) }()
	rr := seg.RowReader()
	var r Row
	for i, want := range rows {
		require.NoError(t, rr.Read(i, &r))
		requireRowEqual(t, seg.Schema(), i, want, r)
	}
	require.NotEmpty(t, d.dropped, "pieces given back")
	for _, dr := range d.dropped {
		if dr == [2]int64{0, int64(len(data))} {
			continue // a structural check's release (TestStructuralCheckReleases)
		}
		require.LessOrEqual(t, dr[1], int64(crcPiece))
	}
}

// TestStructuralCheckReleases: a column's first read runs its structural check, which reads
// its parts whole (a dimension's ids, and the header of each of its bitmaps); once passed,
// the check gives the segment's pages back, once, and the rows still read right.
func TestStructuralCheckReleases(t *testing.T) {
	seg, d, data, rows := dropperSegment(t, 8000)
	defer func() { require.NoError(t, seg.Close()) }()
	whole := [2]int64{0, int64(len(data))}
	dc, err := seg.Dim("page") // checks the dictionary
	require.NoError(t, err)
	require.Equal(t, [][2]int64{whole}, d.dropped, "released once the dictionary was checked")
	cur := dc.Cursor()
	defer cur.Release()
	_, ids, _, err := cur.Chunk(0)
	require.NoError(t, err)
	require.NotEmpty(t, ids)
	require.Equal(t, [][2]int64{whole, whole}, d.dropped, "released once the ids were checked")
	_, _, _, err = cur.Chunk(len(rows) - 1)
	require.NoError(t, err)
	require.Len(t, d.dropped, 2, "checked and released once")

	rr := seg.RowReader()
	var r Row
	for i, want := range rows {
		require.NoError(t, rr.Read(i, &r))
		requireRowEqual(t, seg.Schema(), i, want, r)
	}
	require.Len(t, d.dropped, len(seg.structs), "one release a structural check")
}

// dropperSegment writes a segment of n rows (writeReleaseSegment) and opens it over a
// dropRecorder holding its bytes: the segment, the recorder, the bytes and the rows written.
func dropperSegment(t *testing.T, n int) (*Segment, *dropRecorder, []byte, []Row) {
	t.Helper()
	path, rows := writeReleaseSegment(t, n)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	d := &dropRecorder{Reader: bytes.NewReader(data)}
	seg, err := NewSegment(d, int64(len(data)))
	require.NoError(t, err)
	return seg, d, data, rows
}
