package s3test_test

import (
	"context"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/s3test"
)

// TestIgnoreConditionalWrites: the server honours If-None-Match: * as S3 does, and with
// IgnoreConditionalWrites replaces the object instead.
func TestIgnoreConditionalWrites(t *testing.T) {
	srv, err := s3test.Start("bkt")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.PutIfAbsent(ctx, "bkt", "k", []byte("first")))
	require.ErrorIs(t, c.PutIfAbsent(ctx, "bkt", "k", []byte("second")), fs.ErrExist)
	srv.IgnoreConditionalWrites()
	require.NoError(t, c.PutIfAbsent(ctx, "bkt", "k", []byte("third")))
	got, err := srv.Get("bkt", "k")
	require.NoError(t, err)
	require.Equal(t, "third", string(got))
}
