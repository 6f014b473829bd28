package merger

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/internal/s3test"
)

const s3Bucket = "segments"

// s3Inputs starts a test S3 server, generates n basic segments of rows each, puts them in
// the bucket as in/basic-I.seg, and returns the server, a client, the local segments and
// their bytes.
func s3Inputs(t *testing.T, n, rows int) (*s3test.Server, *objstore.Client, []*columns.Segment, [][]byte) {
	t.Helper()
	srv, err := s3test.Start(s3Bucket)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
	require.NoError(t, err)
	dir := t.TempDir()
	var segs []*columns.Segment
	var data [][]byte
	for i := range n {
		seg := genSegment(t, dir, gen.BasicSeed+int64(i), rows)
		b, err := os.ReadFile(seg.Name())
		require.NoError(t, err)
		require.NoError(t, srv.Put(s3Bucket, fmt.Sprintf("in/basic-%d.seg", i), b))
		segs, data = append(segs, seg), append(data, b)
	}
	return srv, c, segs, data
}

// openS3 opens the inputs in/basic-I.seg from the server.
func openS3(t *testing.T, ctx context.Context, c *objstore.Client, keys ...string) []*columns.Segment {
	t.Helper()
	var out []*columns.Segment
	for _, k := range keys {
		s, err := c.OpenSegment(ctx, s3Bucket, k, objstore.ReaderOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		out = append(out, s.Segment)
	}
	return out
}

func inputKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("in/basic-%d.seg", i)
	}
	return keys
}

// TestMergeS3 is issue 15's bars 1 and 2: five generated segments of 75,000 basic rows in a
// real S3-protocol server (gofakes3 over HTTP on loopback), merged from s3:// into s3://; the
// output object equals the local merge of the same inputs byte for byte, and the server saw
// at most 1.1x the inputs' bytes fetched, in at most 4 GETs per part on average.
func TestMergeS3(t *testing.T) {
	rows := 75_000
	if testing.Short() || raceEnabled {
		rows = 5_000
	}
	srv, c, local, data := s3Inputs(t, 5, rows)
	ctx := context.Background()

	dst := filepath.Join(t.TempDir(), "local.seg")
	lres := mustMerge(t, local, dst, Options{})
	want, err := os.ReadFile(dst)
	require.NoError(t, err)

	srv.ResetCounts()
	inputs := openS3(t, ctx, c, inputKeys(5)...)
	up, err := c.NewUpload(s3Bucket, "out/merged.seg", objstore.UploadOptions{})
	require.NoError(t, err)
	res, err := MergeTo(ctx, inputs, up, Options{})
	require.NoError(t, err)
	assert.Equal(t, "s3://segments/out/merged.seg", res.Info.Path)
	assert.Equal(t, lres.RowsOut, res.RowsOut)
	assert.Equal(t, int64(len(want)), res.Bytes)
	got, err := srv.Get(s3Bucket, "out/merged.seg")
	require.NoError(t, err)
	require.Equal(t, len(want), len(got))
	require.True(t, bytes.Equal(want, got), "the object equals the local merge byte for byte")

	gets, fetched := srv.Gets()
	var size int64
	parts := 0
	for i, in := range inputs {
		size += int64(len(data[i]))
		parts += len(in.Info().Parts)
	}
	ratio := float64(fetched) / float64(size)
	perPart := float64(gets) / float64(parts)
	t.Logf("inputs: 5 x %d rows, %d bytes, %d parts; fetched %d bytes (%.3fx) in %d GETs (%.3f per part); output %d bytes in %d parts",
		rows, size, parts, fetched, ratio, gets, perPart, len(got), len(srv.PartSizes(srv.Uploads()[0])))
	assert.LessOrEqual(t, ratio, 1.1, "bytes fetched / inputs' size")
	assert.LessOrEqual(t, perPart, 4.0, "GETs per part")
	for i, n := range srv.PartSizes(srv.Uploads()[0]) {
		if i < len(srv.PartSizes(srv.Uploads()[0]))-1 {
			assert.GreaterOrEqual(t, n, int64(objstore.MinPartSize), "part %d", i+1)
		}
	}
}

// TestMergeS3Failures is issue 15's bar 3: a merge cancelled in the middle of its upload
// leaves no object and no pending multipart upload; a flipped byte in an input object fails
// the merge naming the key and the part; an existing output without Replace fails with
// nothing changed. None leaves a local file.
func TestMergeS3Failures(t *testing.T) {
	rows := 20_000
	if testing.Short() || raceEnabled {
		rows = 5_000
	}
	srv, c, _, data := s3Inputs(t, 3, rows)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the merge's stages
	noTrace := func(key string) {
		t.Helper()
		ok, err := srv.Exists(s3Bucket, key)
		require.NoError(t, err)
		assert.False(t, ok, "no object %s", key)
		pending, err := c.PendingUploads(context.Background(), s3Bucket, "")
		require.NoError(t, err)
		assert.Empty(t, pending, "no pending upload")
		left, err := os.ReadDir(tmp)
		require.NoError(t, err)
		assert.Empty(t, left, "no local file")
	}

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		inputs := openS3(t, context.Background(), c, inputKeys(3)...)
		up, err := c.NewUpload(s3Bucket, "out/cancelled.seg", objstore.UploadOptions{PartSize: objstore.MinPartSize})
		require.NoError(t, err)
		parts := 0
		srv.OnRequest(func(r *http.Request) {
			if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") != "" {
				parts++
				cancel() // the upload is under way: a part is arriving
			}
		})
		defer srv.OnRequest(nil)
		_, err = MergeTo(ctx, inputs, up, Options{})
		require.ErrorIs(t, err, context.Canceled)
		require.Positive(t, parts, "cancelled during the upload")
		noTrace("out/cancelled.seg")
	})

	t.Run("flipped byte", func(t *testing.T) {
		seg, err := columns.NewSegment(bytes.NewReader(data[1]), int64(len(data[1])))
		require.NoError(t, err)
		p := seg.Info().Parts[len(seg.Info().Parts)/2]
		bad := bytes.Clone(data[1])
		bad[p.Offset+p.Length/2] ^= 1
		require.NoError(t, srv.Put(s3Bucket, "in/bad.seg", bad))
		for _, skip := range []bool{false, true} {
			inputs := openS3(t, context.Background(), c, "in/basic-0.seg", "in/bad.seg", "in/basic-2.seg")
			up, err := c.NewUpload(s3Bucket, "out/bad.seg", objstore.UploadOptions{})
			require.NoError(t, err)
			_, err = MergeTo(context.Background(), inputs, up, Options{SkipChecksums: skip})
			require.ErrorIs(t, err, columns.ErrCorrupt)
			require.ErrorContains(t, err, "s3://segments/in/bad.seg")
			require.ErrorContains(t, err, fmt.Sprintf("%q", p.Column))
			require.ErrorContains(t, err, p.Kind.String())
			t.Logf("SkipChecksums %v: %v", skip, err)
			noTrace("out/bad.seg")
		}
	})

	t.Run("exists", func(t *testing.T) {
		require.NoError(t, srv.Put(s3Bucket, "out/there.seg", []byte("old")))
		uploads := len(srv.Uploads())
		srv.ResetCounts()
		inputs := openS3(t, context.Background(), c, inputKeys(3)...)
		opened, _ := srv.Gets()
		up, err := c.NewUpload(s3Bucket, "out/there.seg", objstore.UploadOptions{})
		require.NoError(t, err)
		_, err = MergeTo(context.Background(), inputs, up, Options{})
		require.ErrorIs(t, err, fs.ErrExist)
		require.ErrorContains(t, err, "s3://segments/out/there.seg")
		got, err := srv.Get(s3Bucket, "out/there.seg")
		require.NoError(t, err)
		assert.Equal(t, "old", string(got))
		assert.Len(t, srv.Uploads(), uploads, "no part sent")
		gets, _ := srv.Gets()
		assert.Equal(t, opened, gets, "nothing read past the open: it failed before the work")
		pending, err := c.PendingUploads(context.Background(), s3Bucket, "")
		require.NoError(t, err)
		assert.Empty(t, pending)

		up, err = c.NewUpload(s3Bucket, "out/there.seg", objstore.UploadOptions{Replace: true})
		require.NoError(t, err)
		_, err = MergeTo(context.Background(), inputs, up, Options{})
		require.NoError(t, err)
		got, err = srv.Get(s3Bucket, "out/there.seg")
		require.NoError(t, err)
		local, err := columns.NewSegment(bytes.NewReader(got), int64(len(got)))
		require.NoError(t, err)
		require.NoError(t, local.Verify())
	})
}
