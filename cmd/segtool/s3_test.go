package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/s3test"
	"github.com/writeout/writeout/merger"
)

// s3Bucket is the bucket of the scripts' S3 server.
const s3Bucket = "segments"

type s3ServerKey struct{}

// setupS3 starts an S3-protocol server (gofakes3 over HTTP on 127.0.0.1, in this test
// process) for a script, stopped when the script ends, and points the AWS_* variables of the
// script's segtool processes at it.
func setupS3(env *testscript.Env) error {
	srv, err := s3test.Start(s3Bucket)
	if err != nil {
		return err
	}
	env.Defer(srv.Close)
	env.Values[s3ServerKey{}] = srv
	env.Setenv("S3URL", srv.URL)
	env.Setenv("AWS_ENDPOINT_URL", srv.URL)
	env.Setenv("AWS_REGION", "us-east-1")
	env.Setenv("AWS_ACCESS_KEY_ID", "test")
	env.Setenv("AWS_SECRET_ACCESS_KEY", "testsecret")
	return nil
}

func scriptServer(ts *testscript.TestScript) *s3test.Server {
	return ts.Value(s3ServerKey{}).(*s3test.Server)
}

// cmdS3Put stores a file as an object: s3put FILE s3://BUCKET/KEY.
func cmdS3Put(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: s3put FILE s3://BUCKET/KEY")
	}
	data, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	bucket, key, err := objstore.ParseURL(args[1])
	ts.Check(err)
	ts.Check(scriptServer(ts).Put(bucket, key, data))
}

// cmdS3Get writes an object to a file: s3get s3://BUCKET/KEY FILE; with !, the object must
// not exist.
func cmdS3Get(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 && !(neg && len(args) == 1) {
		ts.Fatalf("usage: s3get s3://BUCKET/KEY FILE, or ! s3get s3://BUCKET/KEY")
	}
	bucket, key, err := objstore.ParseURL(args[0])
	ts.Check(err)
	ok, err := scriptServer(ts).Exists(bucket, key)
	ts.Check(err)
	if neg {
		if ok {
			ts.Fatalf("%s exists", args[0])
		}
		return
	}
	if !ok {
		ts.Fatalf("%s does not exist", args[0])
	}
	data, err := scriptServer(ts).Get(bucket, key)
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), data, 0o644))
}

// The progress bar's description shows the bytes moved, redrawn by refresh while no merge
// progress comes (during the upload).
func TestPhaseBarTransfer(t *testing.T) {
	var buf bytes.Buffer
	moved := ""
	p := newPhaseBar(&buf, func() string { return moved })
	p.update(merger.Progress{Phase: 1, Phases: 1, Step: merger.StepRows, RowsDone: 10, RowsTotal: 10})
	require.NotContains(t, buf.String(), "uploaded")
	moved = "fetched 1.0 MiB, uploaded 8.0 MiB"
	time.Sleep(150 * time.Millisecond) // past the bar's throttle
	p.refresh()
	require.Contains(t, buf.String(), "merging, fetched 1.0 MiB, uploaded 8.0 MiB")
	p.finish(true)
}

// exampleS3 starts an S3 server for an example that names s3:// objects: bucket "seg" holds
// every segment of dir (the fixtures) under its file name but out (the example's --out), and
// the returned variables point segtool at it.
func exampleS3(t *testing.T, dir, out string) []string {
	t.Helper()
	srv, err := s3test.Start("seg")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	require.NoError(t, err)
	for _, p := range segs {
		if "s3://seg/"+filepath.Base(p) == out {
			continue
		}
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, srv.Put("seg", filepath.Base(p), data))
	}
	return []string{"AWS_ENDPOINT_URL=" + srv.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=testsecret"}
}
