package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/s3test"
)

// TestS3MergeTiming is issue 15's bar 4 as a measurement (WRITEOUT_BIG=1 only: it takes a
// minute): the wall time of segtool merge s3:// -> s3:// of 5 x 75,000 basic rows against
// the test server on loopback, and of the local merge of the same files, each run
// WRITEOUT_S3_RUNS times (default 5), alternating, with the medians logged. Both run the
// default flags (tmpfile medium; the local output fdatasynced). The server runs in this
// process, on the same cores.
func TestS3MergeTiming(t *testing.T) {
	if os.Getenv("WRITEOUT_BIG") != "1" {
		t.Skip("set WRITEOUT_BIG=1 to measure")
	}
	runs := 5
	if v := os.Getenv("WRITEOUT_S3_RUNS"); v != "" {
		_, err := fmt.Sscan(v, &runs)
		require.NoError(t, err)
	}
	dir := t.TempDir()
	bin := segtoolBinary(t)
	out, err := exec.Command(bin, "gen", "--schema", "basic", "--rows", "75000", "--segments", "5", "--seed", "9999", "--out", dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	srv, err := s3test.Start(s3Bucket)
	require.NoError(t, err)
	defer srv.Close()
	var local, remote []string
	for i := range 5 {
		p := filepath.Join(dir, fmt.Sprintf("basic-%04d.seg", i))
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		k := fmt.Sprintf("s3://%s/in/basic-%04d.seg", s3Bucket, i)
		require.NoError(t, srv.Put(s3Bucket, fmt.Sprintf("in/basic-%04d.seg", i), b))
		local, remote = append(local, p), append(remote, k)
	}
	env := append(os.Environ(), "AWS_ENDPOINT_URL="+srv.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=testsecret")
	run := func(args ...string) time.Duration {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		el := time.Since(start)
		require.NoError(t, err, "%s", out)
		return el
	}
	var tl, ts []time.Duration
	for i := range runs {
		dst := filepath.Join(dir, "local.seg")
		tl = append(tl, run(append([]string{"merge", "--quiet", "--out", dst}, local...)...))
		require.NoError(t, os.Remove(dst))
		ts = append(ts, run(append([]string{"merge", "--quiet", "--replace", "--out", "s3://" + s3Bucket + "/out/merged.seg"}, remote...)...))
		t.Logf("run %d: local %v, s3 %v", i+1, tl[i].Round(time.Millisecond), ts[i].Round(time.Millisecond))
	}
	ml, ms := median(tl), median(ts)
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("median of %d: local %v, s3->s3 %v: %.2fx (loadavg %s)", runs, ml.Round(time.Millisecond), ms.Round(time.Millisecond), float64(ms)/float64(ml), load)
	require.LessOrEqual(t, float64(ms), 2*float64(ml), "s3 merge within 2x of the local merge")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
