package main

import (
	"bytes"
	"context"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/s3test"
)

// TestLocationUsageErrors: every command that reads or writes a segment takes a malformed or
// unsupported URL (s3:/b/k, S3://b/k, gs://b/k) as a usage error, exit 2, and writes nothing
// anywhere (no local directory named after the scheme).
func TestLocationUsageErrors(t *testing.T) {
	dir := t.TempDir()
	mustSegtool(t, "gen", "--schema", "basic", "--rows", "100", "--durability", "none", "--out", filepath.Join(dir, "in"))
	seg := filepath.Join(dir, "in", "basic-0000.seg")
	work := filepath.Join(dir, "work")
	require.NoError(t, os.Mkdir(work, 0o755))
	t.Chdir(work)
	bad := map[string]string{
		"s3:/b/k":  "want s3://bucket/key",
		"S3://b/k": "the scheme in lower case",
		"gs://b/k": `scheme "gs" not supported`,
	}
	for loc, msg := range bad {
		for _, args := range [][]string{
			{"gen", "--schema", "basic", "--rows", "10", "--out", loc},
			{"dump", loc},
			{"query", loc},
			{"inspect", loc},
			{"verify", loc},
			{"export", "--format", "parquet", "--out", "x.parquet", loc},
			{"export", "--format", "parquet", "--out", loc, seg},
			{"merge", "--out", "m.seg", seg, loc},
			{"merge", "--out", loc, seg},
		} {
			name := strings.Join(args, " ")
			code, _, errs := segtool(t, args...)
			require.Equal(t, 2, code, "%s: %s", name, errs)
			require.Contains(t, errs, msg, name)
		}
	}
	ents, err := os.ReadDir(work)
	require.NoError(t, err)
	require.Empty(t, ents, "nothing written")
}

// TestMergeMissingOutputBucket: a merge into a bucket that does not exist fails (exit 1) before
// it fetches any input byte, with or without --replace, and says which bucket.
func TestMergeMissingOutputBucket(t *testing.T) {
	dir := t.TempDir()
	mustSegtool(t, "gen", "--schema", "basic", "--rows", "2000", "--durability", "none", "--out", dir)
	data, err := os.ReadFile(filepath.Join(dir, "basic-0000.seg"))
	require.NoError(t, err)
	srv := startSeg(t)
	require.NoError(t, srv.Put("seg", "in.seg", data))
	useS3(t, srv.URL)
	for _, replace := range []bool{false, true} {
		srv.ResetCounts()
		args := []string{"merge", "--out", "s3://nosuch/out.seg", "s3://seg/in.seg"}
		if replace {
			args = append(args, "--replace")
		}
		code, _, errs := segtool(t, args...)
		require.Equal(t, 1, code, errs)
		require.Contains(t, errs, `bucket "nosuch" does not exist`)
		_, fetched := srv.Gets()
		require.Zero(t, fetched, "replace %v: input bytes fetched", replace)
	}
	require.Empty(t, srv.Uploads())
}

// TestMergeInputChanged: an input object replaced after the merge read its footer fails the
// merge (exit 1) with "changed while reading", not as a corrupt segment, and no output is left.
func TestMergeInputChanged(t *testing.T) {
	dir := t.TempDir()
	mustSegtool(t, "gen", "--schema", "basic", "--rows", "20000", "--segments", "2", "--durability", "none", "--out", dir)
	a, err := os.ReadFile(filepath.Join(dir, "basic-0000.seg"))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "basic-0001.seg"))
	require.NoError(t, err)
	srv := startSeg(t)
	require.NoError(t, srv.Put("seg", "in.seg", a))
	useS3(t, srv.URL)
	var gets atomic.Int32
	srv.OnRequest(func(r *http.Request) {
		// The second GET of the input, after its footer: another segment in its place.
		if r.Method == http.MethodGet && r.URL.Path == "/seg/in.seg" && gets.Add(1) == 2 {
			assert.NoError(t, srv.Put("seg", "in.seg", b))
		}
	})
	out := filepath.Join(dir, "out.seg")
	code, _, errs := segtool(t, "merge", "--out", out, "s3://seg/in.seg")
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "changed while reading")
	require.NotContains(t, errs, "corrupt")
	require.GreaterOrEqual(t, gets.Load(), int32(2))
	_, err = os.Stat(out)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// TestMergeVerifyInputsFetchOnce: --verify-inputs of s3:// inputs fetches each input byte once
// (the check and the merge read one local copy, removed after), and merges the same bytes as
// the local merge.
func TestMergeVerifyInputsFetchOnce(t *testing.T) {
	dir := t.TempDir()
	mustSegtool(t, "gen", "--schema", "basic", "--rows", "30000", "--segments", "2", "--durability", "none", "--out", dir)
	srv := startSeg(t)
	var size int64
	for _, n := range []string{"basic-0000.seg", "basic-0001.seg"} {
		data, err := os.ReadFile(filepath.Join(dir, n))
		require.NoError(t, err)
		require.NoError(t, srv.Put("seg", n, data))
		size += int64(len(data))
	}
	useS3(t, srv.URL)
	local := filepath.Join(dir, "local.seg")
	mustSegtool(t, "merge", "--quiet", "--durability", "none", "--out", local,
		filepath.Join(dir, "basic-0000.seg"), filepath.Join(dir, "basic-0001.seg"))
	tmp := filepath.Join(dir, "tmp")
	require.NoError(t, os.Mkdir(tmp, 0o755))
	srv.ResetCounts()
	out := filepath.Join(dir, "out.seg")
	mustSegtool(t, "merge", "--quiet", "--durability", "none", "--verify-inputs", "--tmp-dir", tmp, "--out", out,
		"s3://seg/basic-0000.seg", "s3://seg/basic-0001.seg")
	_, fetched := srv.Gets()
	require.Equal(t, size, fetched, "bytes fetched, against the inputs' sizes")
	want, err := os.ReadFile(local)
	require.NoError(t, err)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "the local merge's bytes")
	ents, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, ents, "copies removed")

	// A corrupt input fails the check, and its copy is removed too.
	bad := append([]byte(nil), want...)
	bad[len(bad)/2] ^= 1
	require.NoError(t, srv.Put("seg", "bad.seg", bad))
	code, _, errs := segtool(t, "merge", "--quiet", "--verify-inputs", "--tmp-dir", tmp, "--out", filepath.Join(dir, "x.seg"), "s3://seg/bad.seg")
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "verify s3://seg/bad.seg")
	ents, err = os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, ents, "copies removed")
}

// TestMergeS3Stalled: a service that stops answering after an input's footer was read fails
// the merge (exit 1) within the request deadline times the tries, naming the request, and
// leaves no output; one killed mid-body and back 1 s later merges the right bytes.
func TestMergeS3Stalled(t *testing.T) {
	dir := t.TempDir()
	mustSegtool(t, "gen", "--schema", "basic", "--rows", "20000", "--durability", "none", "--out", dir)
	in := filepath.Join(dir, "basic-0000.seg")
	data, err := os.ReadFile(in)
	require.NoError(t, err)
	srv := startSeg(t)
	require.NoError(t, srv.Put("seg", "in.seg", data))
	p, err := s3test.NewProxy(srv.URL)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	useS3(t, p.URL)
	var gets atomic.Int32
	srv.OnRequest(func(r *http.Request) {
		if r.Method == http.MethodGet && gets.Add(1) == 2 { // after the footer
			p.Stall()
		}
	})
	out := filepath.Join(dir, "out.seg")
	start := time.Now()
	code, _, errs := segtool(t, "merge", "--s3-request-timeout", "300ms", "--out", out, "s3://seg/in.seg")
	took := time.Since(start)
	p.Resume()
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "get bytes")
	require.Contains(t, errs, "deadline exceeded")
	require.Less(t, took, 8*time.Second, "4 x 300 ms and the waits between")
	_, err = os.Stat(out)
	require.ErrorIs(t, err, fs.ErrNotExist)

	srv.OnRequest(nil)
	local := filepath.Join(dir, "local.seg")
	mustSegtool(t, "merge", "--quiet", "--durability", "none", "--out", local, in)
	p.KillAfter(64<<10, time.Second)
	mustSegtool(t, "merge", "--quiet", "--durability", "none", "--out", out, "s3://seg/in.seg")
	want, err := os.ReadFile(local)
	require.NoError(t, err)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
}

// TestSweepS3: sweep s3://BUCKET/PREFIX aborts the pending multipart uploads under PREFIX
// started more than --older-than ago (what a merge killed outright leaves), keeps younger
// ones and those outside PREFIX, and never touches an object.
func TestSweepS3(t *testing.T) {
	srv := startSeg(t)
	useS3(t, srv.URL)
	require.NoError(t, srv.Put("seg", "out/done.seg", []byte("an object")))
	mc, err := minio.NewCore(strings.TrimPrefix(srv.URL, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4("test", "testsecret", ""), Region: "us-east-1"})
	require.NoError(t, err)
	ctx := context.Background()
	for _, k := range []string{"out/a.seg", "out/b.seg", "other/c.seg"} {
		_, err := mc.NewMultipartUpload(ctx, "seg", k, minio.PutObjectOptions{})
		require.NoError(t, err)
	}
	list := func(prefix string) []string {
		res, err := mc.ListMultipartUploads(ctx, "seg", prefix, "", "", "", 1000)
		require.NoError(t, err)
		var keys []string
		for _, u := range res.Uploads {
			keys = append(keys, u.Key)
		}
		return keys
	}
	require.ElementsMatch(t, []string{"out/a.seg", "out/b.seg", "other/c.seg"}, list(""))

	// Younger than --older-than (default 1h): kept, and said so.
	code, stdout, errs := segtool(t, "sweep", "s3://seg/out/")
	require.Equal(t, 0, code, errs)
	require.Contains(t, stdout, "0 pending upload(s) aborted under s3://seg/out/")
	require.Contains(t, errs, "kept upload")
	require.Len(t, list(""), 3)

	// Older than 0s: aborted, under the prefix only.
	stdout = mustSegtool(t, "sweep", "--older-than", "0s", "s3://seg/out/")
	require.Contains(t, stdout, "of s3://seg/out/a.seg")
	require.Contains(t, stdout, "2 pending upload(s) aborted")
	require.Equal(t, []string{"other/c.seg"}, list(""))
	ok, err := srv.Exists("seg", "out/done.seg")
	require.NoError(t, err)
	require.True(t, ok, "objects are never touched")

	code, _, errs = segtool(t, "sweep", "S3://seg/out/")
	require.Equal(t, 2, code, errs)
}

// TestMergeS3SIGTERMInStall: SIGTERM to a merge whose upload's service has stalled ends the
// process within 5 s (the abort waits 3 s at most), exit 1, saying that the abort failed and
// the upload is left pending, and how to remove it; no object appears, and once the service
// answers again the abort reaches it: no upload is left.
func TestMergeS3SIGTERMInStall(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGTERM on Windows")
	}
	dir := t.TempDir()
	mustSegtool(t, "gen", "--schema", "basic", "--rows", "200000", "--durability", "none", "--out", dir)
	srv := startSeg(t)
	p, err := s3test.NewProxy(srv.URL)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	stalled := make(chan struct{})
	var once sync.Once
	srv.OnRequest(func(r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") != "" {
			once.Do(func() { p.Stall(); close(stalled) })
		}
	})
	cmd := exec.Command(segtoolBinary(t), "merge", "--quiet", "--out", "s3://seg/out/x.seg", filepath.Join(dir, "basic-0000.seg"))
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL="+p.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=testsecret")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	select {
	case <-stalled:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("no part was put")
	}
	time.Sleep(200 * time.Millisecond)
	sent := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	werr := cmd.Wait()
	took := time.Since(sent)
	var ee *exec.ExitError
	require.ErrorAs(t, werr, &ee, stderr.String())
	require.Equal(t, 1, ee.ExitCode(), stderr.String())
	require.Less(t, took, 5*time.Second, stderr.String())
	require.Contains(t, stderr.String(), "left pending", "the abort's failure is reported")
	p.Resume()
	ok, err := srv.Exists("seg", "out/x.seg")
	require.NoError(t, err)
	require.False(t, ok, "no object")
	// The abort sent into the stall reaches the service once it answers again (as the
	// kernel of a server stopped with SIGSTOP holds it): no upload is left, with no sweep.
	c, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ups, err := c.PendingUploads(context.Background(), "seg", "out/")
		return err == nil && len(ups) == 0
	}, 5*time.Second, 50*time.Millisecond, "an upload left pending")
}

// useS3 points the segtool runs of t at the S3 server at url (the environment variables
// segtool reads, restored after t).
func useS3(t *testing.T, url string) {
	t.Helper()
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": url, "AWS_REGION": "us-east-1",
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "testsecret"} {
		t.Setenv(k, v)
	}
}

// TestGenS3RemovesOnFailure: a gen to s3:// whose upload fails midway (an object appeared
// meanwhile in the place of its second segment) removes the objects it uploaded before, and
// leaves the one that appeared alone.
func TestGenS3RemovesOnFailure(t *testing.T) {
	srv := startSeg(t)
	useS3(t, srv.URL)
	var once sync.Once
	srv.OnRequest(func(r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/seg/gen/basic-0001.seg" && r.URL.Query().Has("uploads") {
			once.Do(func() { assert.NoError(t, srv.Put("seg", "gen/basic-0001.seg", []byte("another's"))) })
		}
	})
	code, _, errs := segtool(t, "gen", "--schema", "basic", "--rows", "2000", "--segments", "3", "--out", "s3://seg/gen")
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "exists")
	ok, err := srv.Exists("seg", "gen/basic-0000.seg")
	require.NoError(t, err)
	require.False(t, ok, "the first segment's object removed")
	got, err := srv.Get("seg", "gen/basic-0001.seg")
	require.NoError(t, err)
	require.Equal(t, "another's", string(got), "the object that appeared is left alone")
	ok, err = srv.Exists("seg", "gen/basic-0002.seg")
	require.NoError(t, err)
	require.False(t, ok)
}

// startSeg starts a test S3 server holding the bucket "seg", stopped after t.
func startSeg(t *testing.T) *s3test.Server {
	t.Helper()
	srv, err := s3test.Start("seg")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}

// TestSweepS3KilledMergeMinIO: a merge into s3:// killed outright (SIGKILL, mid-upload) on a
// service that lists pending uploads by exact key only, as MinIO does, leaves its upload
// and the upload's marker; a sweep of the output's prefix finds the upload through the
// marker, aborts it and removes the marker, leaving nothing under the prefix. With
// --s3-upload-markers never, the same sweep finds nothing (MinIO's listing), which is what
// the marker is for.
func TestSweepS3KilledMergeMinIO(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGKILL on Windows")
	}
	dir := t.TempDir()
	mustSegtool(t, "gen", "--schema", "basic", "--rows", "200000", "--durability", "none", "--out", dir)
	for _, markers := range []string{"auto", "never"} {
		t.Run(markers, func(t *testing.T) {
			srv := startSeg(t)
			srv.LikeMinIO()
			useS3(t, srv.URL)
			parts := make(chan struct{})
			var once sync.Once
			srv.OnRequest(func(r *http.Request) {
				if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "1" {
					once.Do(func() { close(parts) })
				}
			})
			cmd := exec.Command(segtoolBinary(t), "merge", "--quiet", "--s3-upload-markers", markers, "--out", "s3://seg/out/x.seg",
				filepath.Join(dir, "basic-0000.seg"))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			select {
			case <-parts:
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				t.Fatal("no part was put")
			}
			require.NoError(t, cmd.Process.Kill())
			_ = cmd.Wait()

			code, stdout, errs := segtool(t, "sweep", "--older-than", "0s", "s3://seg/out/")
			require.Equal(t, 0, code, errs)
			c, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
			require.NoError(t, err)
			left, err := c.PendingUploads(context.Background(), "seg", "out/x.seg")
			require.NoError(t, err)
			keys, err := srv.Keys("seg", "out/")
			require.NoError(t, err)
			if markers == "never" {
				require.Contains(t, stdout, "0 pending upload(s) aborted under s3://seg/out/")
				require.Len(t, left, 1, "MinIO lists it for its exact key only")
				require.Empty(t, keys)
				return
			}
			require.Contains(t, stdout, "aborted upload ")
			require.Contains(t, stdout, "1 pending upload(s) aborted under s3://seg/out/")
			require.Empty(t, left, "the killed merge's upload is aborted")
			require.Empty(t, keys, "and its marker removed")
		})
	}
}
