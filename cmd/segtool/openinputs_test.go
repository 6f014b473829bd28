package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/internal/s3test"
	"github.com/writeout/writeout/merger/ingest"
)

// TestOpenInputs: segments given as files and objects open in the order given, objects up to
// openParallel at once; a missing one fails the open with an error naming it, and every
// segment opened is handed back to be closed.
func TestOpenInputs(t *testing.T) {
	ctx := context.Background()
	srv, err := s3test.Start("seg")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL", srv.URL)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testsecret")
	dir := t.TempDir()
	var paths []string
	var rows []int
	for k := range 40 {
		p := filepath.Join(dir, fmt.Sprintf("s%02d.seg", k))
		n := 100 + 7*k
		_, err := genSegment(ctx, p, genSource{schema: "basic", seed: gen.BasicSeed + int64(k), rows: n}, false, 0, ingest.Options{})
		require.NoError(t, err)
		if k%3 != 0 {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, srv.Put("seg", filepath.Base(p), data))
			p = "s3://seg/" + filepath.Base(p)
		}
		paths, rows = append(paths, p), append(rows, n)
	}
	segs, closers, err := openInputs(ctx, paths, &s3Flags{})
	require.NoError(t, err)
	require.Len(t, closers, len(paths))
	for i, sg := range segs {
		require.Equal(t, rows[i], sg.Rows(), paths[i])
	}
	for _, c := range closers {
		require.NoError(t, c())
	}

	bad := append(append([]string(nil), paths[:20]...), "s3://seg/nope.seg")
	bad = append(bad, paths[20:]...)
	segs, closers, err = openInputs(ctx, bad, &s3Flags{})
	require.Error(t, err)
	require.ErrorContains(t, err, "nope.seg")
	require.Nil(t, segs)
	require.Len(t, closers, len(paths), "every segment that opened is handed back")
	for _, c := range closers {
		require.NoError(t, c())
	}
}
