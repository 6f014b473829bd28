package table

import (
	"context"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/s3test"
)

// TestAppendFromS3: segments given as s3:// objects are checked and copied into a table on
// disk and into a table on S3, each object fetched once; a damaged object, a missing one, or
// no client fails the append before anything is copied.
func TestAppendFromS3(t *testing.T) {
	ctx := context.Background()
	srv, err := s3test.Start("src", "bkt")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
	require.NoError(t, err)
	a, b := segBytes(t, 71, 300, day, false), segBytes(t, 72, 200, day+3600_000, false)
	require.NoError(t, c.Put(ctx, "src", "in/a.seg", a))
	require.NoError(t, c.Put(ctx, "src", "in/b.seg", b))
	bad := append([]byte(nil), b...)
	bad[len(bad)/3] ^= 0x40
	require.NoError(t, c.Put(ctx, "src", "in/bad.seg", bad))

	for _, loc := range []string{"/t", "s3://bkt/t/"} {
		t.Run(loc, func(t *testing.T) {
			fsys := afero.NewMemMapFs()
			tb, err := Create(ctx, loc, Options{Fs: fsys, S3: c})
			require.NoError(t, err)
			gets0, bytes0 := srv.Gets()
			v, err := tb.Append(ctx, []string{"s3://src/in/a.seg", "s3://src/in/b.seg"})
			require.NoError(t, err)
			require.Equal(t, 2, v)
			gets1, bytes1 := srv.Gets()
			if loc == "/t" {
				// Only the sources were read: each object's bytes once.
				require.Equal(t, int64(len(a)+len(b)), bytes1-bytes0, "bytes fetched (%d GETs)", gets1-gets0)
			}
			require.Equal(t, int64(500), tableTotals(t, tb).rows)

			for _, p := range []string{"s3://src/in/bad.seg", "s3://src/in/nope.seg"} {
				before := listSegments(t, tb)
				_, err = tb.Append(ctx, []string{"s3://src/in/a.seg", p})
				require.Error(t, err, p)
				require.Equal(t, before, listSegments(t, tb), "%s: nothing copied", p)
			}
			e, err := tb.Snapshot(ctx, 0)
			require.NoError(t, err)
			require.Equal(t, 2, e.Version)
		})
	}
	tb, err := Create(ctx, "/u", Options{Fs: afero.NewMemMapFs()})
	require.NoError(t, err)
	_, err = tb.Append(ctx, []string{"s3://src/in/a.seg"})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "no S3 client")
}
