package location

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/s3test"
	"github.com/writeout/writeout/medium"
)

func TestParse(t *testing.T) {
	ok := func(s, want string, s3 bool) {
		t.Helper()
		l, err := Parse(s)
		require.NoError(t, err, s)
		require.Equal(t, want, l.String(), s)
		require.Equal(t, s3, l.IsS3(), s)
	}
	ok("a.seg", "a.seg", false)
	ok("/tmp/x/a.seg", "/tmp/x/a.seg", false)
	ok("dir/s3.seg", "dir/s3.seg", false)
	ok("c:x", "c:x", false)
	ok("s3://b/k.seg", "s3://b/k.seg", true)
	ok("s3://bkt/dir/k.seg", "s3://bkt/dir/k.seg", true)
	bad := func(s, msg string) {
		t.Helper()
		_, err := Parse(s)
		require.ErrorIs(t, err, ErrInvalid, s)
		require.ErrorContains(t, err, msg, s)
	}
	bad("", "empty")
	bad("s3:/b/k", "want s3://bucket/key")
	bad("s3:b/k", "want s3://bucket/key")
	bad("S3://b/k", "lower case")
	bad("s3://b", "want s3://bucket/key")
	bad("s3://b/", "want s3://bucket/key")
	bad("s3:///k", "want s3://bucket/key")
	bad("gs://b/k", `scheme "gs" not supported`)
	bad("http://host/k", `scheme "http" not supported`)
	bad("file:///tmp/a", `scheme "file" not supported`)
}

func write(data []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(data); return err }
}

func TestFileOutput(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.seg")
	l, err := Parse(path)
	require.NoError(t, err)
	out, err := l.Output(OutputOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
	require.NoError(t, err)
	require.Equal(t, path, out.Name())
	require.NoError(t, out.Check(ctx))
	require.NoError(t, out.Publish(ctx, write([]byte("one"))))
	require.Equal(t, int64(3), out.(*File).Info.Size)
	require.ErrorIs(t, out.Check(ctx), fs.ErrExist)
	require.ErrorIs(t, out.Publish(ctx, write([]byte("two"))), fs.ErrExist)
	// A failed write leaves the file as it was.
	boom := errors.New("boom")
	re, err := l.Output(OutputOptions{Replace: true})
	require.NoError(t, err)
	require.ErrorIs(t, re.Publish(ctx, func(w io.Writer) error { _, _ = w.Write([]byte("x")); return boom }), boom)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "one", string(got))
	src := filepath.Join(t.TempDir(), "src")
	require.NoError(t, os.WriteFile(src, []byte("three"), 0o644))
	require.NoError(t, PublishFile(ctx, re, src))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "three", string(got))
}

func TestS3Output(t *testing.T) {
	ctx := context.Background()
	srv, err := s3test.Start("bkt")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
	require.NoError(t, err)
	l, err := Parse("s3://bkt/dir/k.seg")
	require.NoError(t, err)
	_, err = l.Output(OutputOptions{})
	require.ErrorIs(t, err, ErrInvalid, "no client")
	out, err := l.Output(OutputOptions{S3: c})
	require.NoError(t, err)
	require.Equal(t, "s3://bkt/dir/k.seg", out.Name())
	require.NoError(t, out.Check(ctx))
	src := filepath.Join(t.TempDir(), "src")
	data := bytes.Repeat([]byte("0123456789"), 1<<20) // 10 MiB: two parts
	require.NoError(t, os.WriteFile(src, data, 0o644))
	require.NoError(t, PublishFile(ctx, out, src))
	got, err := srv.Get("bkt", "dir/k.seg")
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.ErrorIs(t, out.Check(ctx), fs.ErrExist)
	require.ErrorIs(t, PublishFile(ctx, out, src), fs.ErrExist)
	// A failed write leaves no object.
	l2, err := Parse("s3://bkt/failed.seg")
	require.NoError(t, err)
	out2, err := l2.Output(OutputOptions{S3: c})
	require.NoError(t, err)
	boom := errors.New("boom")
	require.ErrorIs(t, out2.Publish(ctx, func(w io.Writer) error { _, _ = w.Write(data); return boom }), boom)
	ok, err := srv.Exists("bkt", "failed.seg")
	require.NoError(t, err)
	require.False(t, ok)
	pending, err := c.PendingUploads(ctx, "bkt", "")
	require.NoError(t, err)
	require.Empty(t, pending, "the failed upload is aborted")
}
