package ingest

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/s3test"
)

// An s3:// Out is published as merge publishes one (merger/location): each segment is one
// object holding the bytes a local Out gets, and a failed Run leaves no object and no local
// file.
func TestRunS3Out(t *testing.T) {
	ctx := context.Background()
	srv, err := s3test.Start("segs")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
	require.NoError(t, err)
	sp, err := ParseSpec([]byte(hourSpec))
	require.NoError(t, err)
	dir := t.TempDir()
	in := func() []Input {
		return []Input{csvInput("a.csv", hourCSV), {Name: "b.ndjson", Reader: strings.NewReader(hourNDJSON)}}
	}

	local := filepath.Join(dir, "local.seg")
	_, err = Run(ctx, sp, in(), Options{Out: local, Durability: noSync, RowsPerSegment: 3})
	require.NoError(t, err)

	tmp := t.TempDir()
	res, err := Run(ctx, sp, in(), Options{Out: "s3://segs/day/h.seg", S3: c, RowsPerSegment: 3, TmpDir: tmp})
	require.NoError(t, err)
	require.Len(t, res.Segments, 2)
	for k, s := range res.Segments {
		require.Equal(t, SegmentName("s3://segs/day/h.seg", k), s.Path)
		want, err := os.ReadFile(SegmentName(local, k))
		require.NoError(t, err)
		got, err := srv.Get("segs", strings.TrimPrefix(s.Path, "s3://segs/"))
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "segment %d", k)
		require.Equal(t, int64(len(want)), s.Bytes)
	}
	require.Empty(t, dirNames(t, tmp), "staged outputs and runs removed")

	// An existing object fails the Run before any input is read, unless Replace.
	_, err = Run(ctx, sp, []Input{{Name: "x.csv", open: func() (io.ReadCloser, error) { panic("read") }}},
		Options{Out: "s3://segs/day/h.seg", S3: c, RowsPerSegment: 3, TmpDir: tmp})
	require.ErrorIs(t, err, fs.ErrExist)
	_, err = Run(ctx, sp, in(), Options{Out: "s3://segs/day/h.seg", S3: c, RowsPerSegment: 3, TmpDir: tmp, Replace: true})
	require.NoError(t, err)

	// A row that fails the Run: no object, nothing left in TmpDir.
	_, err = Run(ctx, sp, []Input{csvInput("bad.csv", hourCSV+"nope,x,,,1,u\n")}, Options{Out: "s3://segs/bad.seg", S3: c, TmpDir: tmp})
	require.ErrorIs(t, err, ErrRow)
	ok, err := srv.Exists("segs", "bad.seg")
	require.NoError(t, err)
	require.False(t, ok)
	require.Empty(t, dirNames(t, tmp))

	// Without a client, or with a malformed location: invalid, before any work.
	_, err = Run(ctx, sp, in(), Options{Out: "s3://segs/x.seg"})
	require.ErrorIs(t, err, ErrInvalid)
	for _, bad := range []string{"s3:/segs/x.seg", "S3://segs/x.seg", "gs://segs/x.seg", "s3://segs"} {
		_, err = Run(ctx, sp, in(), Options{Out: bad, S3: c})
		require.ErrorIs(t, err, ErrInvalid, bad)
	}
}
