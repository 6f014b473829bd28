package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/s3test"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

const bucket = "segments"

// start starts a test server and a client of it.
func start(t *testing.T) (*s3test.Server, *objstore.Client) {
	t.Helper()
	srv, err := s3test.Start(bucket)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
	require.NoError(t, err)
	return srv, c
}

// segmentBytes writes a segment of n rows with a dictionary, a multi-value and a raw
// dimension and two metrics, in chunks of chunkRows rows.
func segmentBytes(t *testing.T, seed uint64, n, chunkRows int) []byte {
	t.Helper()
	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "page"}, {Name: "tags", MultiValue: true}, {Name: "text", Raw: true}},
		Metrics: []columns.Metric{
			{Name: "added", Aggregator: agg.LongSum},
			{Name: "delta", Aggregator: agg.DoubleSum},
		},
	}
	b, err := merger.NewBuilder(schema, merger.BuilderOptions{})
	require.NoError(t, err)
	defer b.Close()
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range n {
		row := columns.Row{
			Time: int64(i * 10),
			Dims: [][]string{{fmt.Sprintf("p%d", rng.IntN(500))}, {fmt.Sprintf("t%d", rng.IntN(20)), "x"},
				{strings.Repeat(string(rune('a'+rng.IntN(26))), 1+rng.IntN(40))}},
			Metrics: []columns.Value{{Long: rng.Int64N(1000)}, {Double: rng.Float64()}},
		}
		require.NoError(t, b.Add(row))
	}
	dst := filepath.Join(t.TempDir(), "in.seg")
	_, err = b.Persist(context.Background(), dst, merger.PersistOptions{ChunkRows: chunkRows, Durability: medium.Durability{Sync: medium.SyncNone}})
	require.NoError(t, err)
	data, err := os.ReadFile(dst)
	require.NoError(t, err)
	return data
}

func TestParseURL(t *testing.T) {
	f := func(in, bucket, key string, ok bool) {
		t.Helper()
		b, k, err := objstore.ParseURL(in)
		if !ok {
			require.ErrorIs(t, err, objstore.ErrInvalid, in)
			return
		}
		require.NoError(t, err, in)
		assert.Equal(t, bucket, b)
		assert.Equal(t, key, k)
		assert.Equal(t, in, objstore.URL(b, k))
	}
	f("s3://b/k.seg", "b", "k.seg", true)
	f("s3://b/dir/sub/k.seg", "b", "dir/sub/k.seg", true)
	f("s3://b/", "", "", false)
	f("s3://b", "", "", false)
	f("s3:///k", "", "", false)
	f("s3://b/dir/", "", "", false)
	f("/local/path.seg", "", "", false)
	f("S3://b/k", "", "", false)
}

func TestNewConfig(t *testing.T) {
	for _, bad := range []string{"ftp://h", "http://", "http://h/path", "://x"} {
		_, err := objstore.New(objstore.Config{Endpoint: bad})
		require.ErrorIs(t, err, objstore.ErrInvalid, bad)
	}
	for _, good := range []string{"", "http://127.0.0.1:9000", "https://s3.example.com", "s3.example.com:443"} {
		_, err := objstore.New(objstore.Config{Endpoint: good})
		require.NoError(t, err, good)
	}
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "eu-west-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "id")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	assert.Equal(t, objstore.Config{Endpoint: "http://127.0.0.1:1", Region: "eu-west-1", AccessKey: "id", SecretKey: "secret"}, objstore.ConfigFromEnv())
}

// The reader returns the object's bytes for reads of any size at any offset, fetching each
// byte once.
func TestReaderReadAt(t *testing.T) {
	srv, c := start(t)
	data := make([]byte, 3<<20+12345)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	require.NoError(t, srv.Put(bucket, "blob", data))
	r, err := c.NewReader(context.Background(), bucket, "blob", objstore.ReaderOptions{RangeSize: 256 << 10})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	require.Equal(t, int64(len(data)), r.Size())
	// A plan of parts of assorted sizes.
	var parts []segfmt.PartInfo
	for off := int64(100); off < int64(len(data))-1000; {
		n := min(int64(1+rng.IntN(300<<10)), int64(len(data))-1000-off)
		parts = append(parts, segfmt.PartInfo{Offset: off, Length: n})
		off += n
	}
	require.NoError(t, r.Plan(parts))
	require.ErrorIs(t, r.Plan(parts), objstore.ErrInvalid, "planned twice")
	for range 500 {
		off := rng.Int64N(int64(len(data)))
		p := make([]byte, rng.IntN(100<<10))
		n, err := r.ReadAt(p, off)
		want := data[off:min(off+int64(len(p)), int64(len(data)))]
		require.Equal(t, len(want), n)
		if len(want) < len(p) {
			require.ErrorIs(t, err, io.EOF)
		} else {
			require.NoError(t, err)
		}
		require.True(t, bytes.Equal(want, p[:n]), "bytes at %d+%d", off, len(p))
	}
	_, err = r.ReadAt(make([]byte, 1), int64(len(data)))
	require.ErrorIs(t, err, io.EOF)
	_, err = r.ReadAt(make([]byte, 1), -1)
	require.ErrorIs(t, err, objstore.ErrInvalid)
	// Every byte fetched at most once.
	gets, got := srv.Gets()
	rg, rb := r.Stats()
	assert.Equal(t, gets, rg)
	assert.Equal(t, got, rb)
	assert.LessOrEqual(t, got, int64(len(data)))
	t.Logf("%d reads: %d GETs, %d bytes of %d", 500, gets, got, len(data))
}

// TestReaderChangedObject: an object replaced after a reader opened it fails the reader's next
// GET with ErrChanged (the GETs carry the ETag seen at open, If-Match), never with the new
// object's bytes; bytes cached before the change still read.
func TestReaderChangedObject(t *testing.T) {
	srv, c := start(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	require.NoError(t, srv.Put(bucket, "blob", data))
	r, err := c.NewReader(context.Background(), bucket, "blob", objstore.ReaderOptions{RangeSize: 64 << 10, ReadAhead: -1})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	p := make([]byte, 100)
	_, err = r.ReadAt(p, 0)
	require.NoError(t, err)
	other := bytes.Repeat([]byte("x"), len(data))
	require.NoError(t, srv.Put(bucket, "blob", other))
	_, err = r.ReadAt(p, 900<<10)
	require.ErrorIs(t, err, objstore.ErrChanged)
	require.ErrorContains(t, err, "changed while reading")
	_, err = r.ReadAt(p[:90], 10) // within the first read's bytes
	require.NoError(t, err, "cached bytes")
	require.Equal(t, data[10:100], p[:90])
}

// TestReaderDropPages: DropPages takes the cache mapping's pages out of the resident set; the
// bytes read again are the same, from the cache (no GET), and an OpenSegment's ReleasePages
// goes through it.
func TestReaderDropPages(t *testing.T) {
	srv, c := start(t)
	data := randomBytes(2<<20, 7)
	require.NoError(t, srv.Put(bucket, "blob", data))
	r, err := c.NewReader(context.Background(), bucket, "blob", objstore.ReaderOptions{})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	got := make([]byte, len(data))
	_, err = r.ReadAt(got, 0)
	require.NoError(t, err)
	gets, _ := r.Stats()
	require.NoError(t, r.DropPages(0, int64(len(data))))
	require.NoError(t, r.DropPages(12345, 100)) // an unaligned range
	clear(got)
	_, err = r.ReadAt(got, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))
	again, _ := r.Stats()
	require.Equal(t, gets, again, "read again from the cache")

	require.NoError(t, srv.Put(bucket, "seg", segmentBytes(t, 1, 5000, 700)))
	seg, err := c.OpenSegment(context.Background(), bucket, "seg", objstore.ReaderOptions{})
	require.NoError(t, err)
	require.NoError(t, seg.VerifyChecksumsContext(context.Background()))
	require.NoError(t, seg.ReleasePages())
	require.NoError(t, seg.Close())
}

func TestPlanBadParts(t *testing.T) {
	srv, c := start(t)
	require.NoError(t, srv.Put(bucket, "small", make([]byte, 100)))
	r, err := c.NewReader(context.Background(), bucket, "small", objstore.ReaderOptions{})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	require.ErrorIs(t, r.Plan([]segfmt.PartInfo{{Offset: 90, Length: 20}}), objstore.ErrInvalid)
}

// A segment read from an object equals the same bytes read locally; its reads are planned by
// part: the bytes fetched are the object's, in far fewer GETs than parts; opening it reads
// only the header and the tail.
func TestOpenSegment(t *testing.T) {
	srv, c := start(t)
	data := segmentBytes(t, 7, 40_000, 1000)
	require.NoError(t, srv.Put(bucket, "in/a.seg", data))
	local, err := columns.NewSegment(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)

	ctx := context.Background()
	var progress atomic.Int64
	seg, err := c.OpenSegment(ctx, bucket, "in/a.seg", objstore.ReaderOptions{RangeSize: 256 << 10, Progress: func(n int64) { progress.Add(n) }})
	require.NoError(t, err)
	defer func() { require.NoError(t, seg.Close()) }()
	gets, got := srv.Gets()
	t.Logf("open: %d GETs, %d bytes", gets, got)
	maxGets := int64(2 + len(data)/(256<<10) + 1) // header, tail, every range
	assert.LessOrEqual(t, gets, maxGets, "open: the header, the tail, then the ranges of the dictionaries and indexes")
	assert.Equal(t, "s3://segments/in/a.seg", seg.Name())
	assert.Equal(t, local.Info(), seg.Info())

	require.NoError(t, seg.Verify())
	rr, lr := seg.RowReader(), local.RowReader()
	var a, b columns.Row
	for i := 0; i < seg.Rows(); i += 997 {
		require.NoError(t, rr.Read(i, &a))
		require.NoError(t, lr.Read(i, &b))
		require.Equal(t, b, a, "row %d", i)
	}
	gets, got = srv.Gets()
	parts := len(seg.Info().Parts)
	assert.Equal(t, int64(len(data)), got, "every byte fetched once")
	assert.Equal(t, got, progress.Load())
	assert.LessOrEqual(t, gets, maxGets, "a GET per range")
	assert.Less(t, gets, int64(parts), "fewer GETs than parts")
	t.Logf("%d bytes, %d parts: %d GETs, %d bytes fetched", len(data), parts, gets, got)
	require.NoError(t, seg.Close())
	_, err = seg.Reader.ReadAt(make([]byte, 1), 0)
	require.ErrorIs(t, err, fs.ErrClosed)
}

func TestOpenSegmentErrors(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	_, err := c.OpenSegment(ctx, bucket, "missing.seg", objstore.ReaderOptions{})
	require.ErrorIs(t, err, objstore.ErrNotFound)
	require.ErrorContains(t, err, "s3://segments/missing.seg")

	require.NoError(t, srv.Put(bucket, "junk.seg", bytes.Repeat([]byte("x"), 1000)))
	_, err = c.OpenSegment(ctx, bucket, "junk.seg", objstore.ReaderOptions{})
	require.ErrorIs(t, err, columns.ErrCorrupt)
	require.ErrorContains(t, err, "s3://segments/junk.seg")

	// A flipped byte in a part fails the read that touches it, naming the object and the part.
	data := segmentBytes(t, 8, 5000, 500)
	local, err := columns.NewSegment(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	p := local.Info().Parts[len(local.Info().Parts)/2]
	bad := bytes.Clone(data)
	bad[p.Offset+p.Length/2] ^= 0x10
	require.NoError(t, srv.Put(bucket, "bad.seg", bad))
	seg, err := c.OpenSegment(ctx, bucket, "bad.seg", objstore.ReaderOptions{})
	require.NoError(t, err)
	defer func() { require.NoError(t, seg.Close()) }()
	err = seg.VerifyChecksumsContext(context.Background())
	require.ErrorIs(t, err, columns.ErrCorrupt)
	require.ErrorContains(t, err, p.Column)
	require.ErrorContains(t, err, p.Kind.String())

	// A cancelled context fails the reads.
	require.NoError(t, srv.Put(bucket, "ok.seg", data))
	cctx, cancel := context.WithCancel(ctx)
	seg2, err := c.OpenSegment(cctx, bucket, "ok.seg", objstore.ReaderOptions{RangeSize: 1024, ReadAhead: -1})
	require.NoError(t, err)
	defer func() { require.NoError(t, seg2.Close()) }()
	cancel()
	require.ErrorIs(t, seg2.VerifyChecksumsContext(context.Background()), context.Canceled)
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// writeChunks writes data in pieces of assorted sizes.
func writeChunks(data []byte) func(w io.Writer) error {
	return func(w io.Writer) error {
		rng := rand.New(rand.NewPCG(5, 5))
		for len(data) > 0 {
			n := min(len(data), 1+rng.IntN(1<<20))
			if _, err := w.Write(data[:n]); err != nil {
				return err
			}
			data = data[n:]
		}
		return nil
	}
}

// An upload puts parts of PartSize but the last and the object appears whole at the end.
func TestUpload(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	data := randomBytes(12<<20+777, 1)
	var progress int64
	up, err := c.NewUpload(bucket, "out/x.seg", objstore.UploadOptions{PartSize: objstore.MinPartSize, Progress: func(n int64) { progress += n }})
	require.NoError(t, err)
	assert.Equal(t, "s3://segments/out/x.seg", up.Name())
	require.NoError(t, up.Check(ctx))
	var seenBefore bool
	require.NoError(t, up.Publish(ctx, func(w io.Writer) error {
		if err := writeChunks(data)(w); err != nil {
			return err
		}
		seenBefore, err = srv.Exists(bucket, "out/x.seg")
		return err
	}))
	assert.False(t, seenBefore, "the object appears only at completion")
	got, err := srv.Get(bucket, "out/x.seg")
	require.NoError(t, err)
	require.Equal(t, len(data), len(got))
	require.True(t, bytes.Equal(data, got))
	assert.Equal(t, int64(len(data)), progress)
	ids := srv.Uploads()
	require.Len(t, ids, 1)
	assert.Equal(t, []int64{5 << 20, 5 << 20, 2<<20 + 777}, srv.PartSizes(ids[0]))
	pending, err := c.PendingUploads(ctx, bucket, "")
	require.NoError(t, err)
	assert.Empty(t, pending)

	// Without Replace an existing object fails before anything is sent, and stays.
	err = up.Check(ctx)
	require.ErrorIs(t, err, fs.ErrExist)
	require.ErrorContains(t, err, "s3://segments/out/x.seg")
	called := false
	err = up.Publish(ctx, func(w io.Writer) error { called = true; return nil })
	require.ErrorIs(t, err, fs.ErrExist)
	assert.False(t, called)
	assert.Len(t, srv.Uploads(), 1, "no upload started")

	// With Replace it is replaced.
	up2, err := c.NewUpload(bucket, "out/x.seg", objstore.UploadOptions{Replace: true})
	require.NoError(t, err)
	require.NoError(t, up2.Publish(ctx, writeChunks(data[:1000])))
	got, err = srv.Get(bucket, "out/x.seg")
	require.NoError(t, err)
	require.Equal(t, data[:1000], got)

	_, err = c.NewUpload(bucket, "k", objstore.UploadOptions{PartSize: objstore.MinPartSize - 1})
	require.ErrorIs(t, err, objstore.ErrInvalid)
}

// TestUploadPartsGrow: parts double in size every partGrowth parts (2 here), so that the
// 10,000 parts an upload may have hold large objects while the first parts, held in memory,
// stay small; the object is the bytes written.
func TestUploadPartsGrow(t *testing.T) {
	t.Cleanup(objstore.SetPartGrowth(2))
	srv, c := start(t)
	data := randomBytes(31<<20, 9)
	up, err := c.NewUpload(bucket, "out/grow.seg", objstore.UploadOptions{})
	require.NoError(t, err)
	require.NoError(t, up.Publish(context.Background(), writeChunks(data)))
	got, err := srv.Get(bucket, "out/grow.seg")
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))
	ids := srv.Uploads()
	require.Len(t, ids, 1)
	assert.Equal(t, []int64{5 << 20, 5 << 20, 10 << 20, 10 << 20, 1 << 20}, srv.PartSizes(ids[0]))
}

// An upload to a bucket that does not exist fails its Check, Replace or not, with an error
// that names the bucket, and its Publish fails before any upload starts or write is called.
func TestUploadMissingBucket(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	for _, replace := range []bool{false, true} {
		up, err := c.NewUpload("nosuch", "out/x.seg", objstore.UploadOptions{Replace: replace})
		require.NoError(t, err)
		err = up.Check(ctx)
		require.ErrorIs(t, err, objstore.ErrNotFound, "replace %v", replace)
		require.ErrorContains(t, err, `bucket "nosuch" does not exist`)
		called := false
		err = up.Publish(ctx, func(io.Writer) error { called = true; return nil })
		require.ErrorIs(t, err, objstore.ErrNotFound)
		assert.False(t, called, "replace %v: write called", replace)
	}
	assert.Empty(t, srv.Uploads(), "no upload started")
}

// An object that appears while the upload runs is not replaced without Replace: the check
// before completion catches it, and the upload is aborted.
func TestUploadRaceExists(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	up, err := c.NewUpload(bucket, "race.seg", objstore.UploadOptions{})
	require.NoError(t, err)
	err = up.Publish(ctx, func(w io.Writer) error {
		if _, err := w.Write([]byte("new")); err != nil {
			return err
		}
		return srv.Put(bucket, "race.seg", []byte("other"))
	})
	require.ErrorIs(t, err, fs.ErrExist)
	got, err := srv.Get(bucket, "race.seg")
	require.NoError(t, err)
	assert.Equal(t, "other", string(got))
	pending, err := c.PendingUploads(ctx, bucket, "")
	require.NoError(t, err)
	assert.Empty(t, pending)
}

// A failed write, a failed part and a cancelled context each abort the upload: no object,
// no pending upload.
func TestUploadAborts(t *testing.T) {
	srv, c := start(t)
	data := randomBytes(11<<20, 2)
	boom := errors.New("boom")
	f := func(name string, setup func(ctx context.Context, cancel context.CancelFunc), write func(w io.Writer) error, want error, says string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv.OnRequest(nil)
		setup(ctx, cancel)
		up, err := c.NewUpload(bucket, name, objstore.UploadOptions{PartSize: objstore.MinPartSize})
		require.NoError(t, err)
		err = up.Publish(ctx, write)
		srv.OnRequest(nil)
		if want != nil {
			require.ErrorIs(t, err, want, name)
		}
		require.ErrorContains(t, err, says, name)
		require.ErrorContains(t, err, "s3://segments/"+name)
		ok, err := srv.Exists(bucket, name)
		require.NoError(t, err)
		assert.False(t, ok, "%s: no object", name)
		pending, err := c.PendingUploads(context.Background(), bucket, "")
		require.NoError(t, err)
		assert.Empty(t, pending, "%s: no pending upload", name)
	}
	none := func(context.Context, context.CancelFunc) {}
	f("write-fails", none, func(w io.Writer) error {
		if _, err := w.Write(data); err != nil {
			return err
		}
		return boom
	}, boom, "boom")
	// Cancelled when the second part arrives at the server: the write fails, the part in
	// flight fails, the upload is aborted all the same.
	f("cancelled", func(ctx context.Context, cancel context.CancelFunc) {
		srv.OnRequest(func(r *http.Request) {
			if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
				cancel()
			}
		})
	}, writeChunks(data), context.Canceled, "context canceled")
	// The server refuses a part.
	var failed atomic.Bool
	f("part-fails", func(ctx context.Context, cancel context.CancelFunc) {
		srv.OnRequest(func(r *http.Request) {
			if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "1" && failed.CompareAndSwap(false, true) {
				r.Header.Set("Content-Length", "bad") // gofakes3 answers 400
			}
		})
	}, writeChunks(data), nil, "part 1 (5242880 bytes): MissingContentLength")
}

// The reader's memory is bounded by its copy buffers, not the object: reading a 24 MiB
// object whole allocates a small fraction of it (client and in-process server together).
func TestReaderMemoryBounded(t *testing.T) {
	srv, c := start(t)
	data := randomBytes(24<<20, 9)
	require.NoError(t, srv.Put(bucket, "big", data))
	r, err := c.NewReader(context.Background(), bucket, "big", objstore.ReaderOptions{RangeSize: 4 << 20})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	require.NoError(t, r.Plan([]segfmt.PartInfo{{Offset: 0, Length: int64(len(data))}}))
	buf := make([]byte, 1<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for off := 0; off < len(data); off += len(buf) {
		n, err := r.ReadAt(buf, int64(off))
		require.NoError(t, err)
		require.True(t, bytes.Equal(data[off:off+n], buf[:n]))
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("read %d bytes: %d bytes allocated", len(data), alloc)
	require.Less(t, alloc, uint64(len(data)/4))
}

// FuzzParseURL: ParseURL never panics, and what it accepts URL gives back.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://b/k", "s3://b/", "s3:///k", "s3://b/a/b/", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, k, err := objstore.ParseURL(s)
		if err != nil {
			require.ErrorIs(t, err, objstore.ErrInvalid)
			return
		}
		require.Equal(t, s, objstore.URL(b, k))
	})
}

// startProxied starts a server behind a TCP proxy (s3test.Proxy) and a client of the proxy
// with the given request timeout and tries.
func startProxied(t *testing.T, timeout time.Duration, tries int) (*s3test.Server, *s3test.Proxy, *objstore.Client) {
	t.Helper()
	srv, err := s3test.Start(bucket)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return startProxiedOn(t, srv, timeout, tries)
}

// TestReaderStalled: a service that stops answering mid-read fails the read within the
// request timeout times the tries, with an error that names the request, instead of hanging.
func TestReaderStalled(t *testing.T) {
	srv, p, c := startProxied(t, 300*time.Millisecond, 2)
	data := bytes.Repeat([]byte("abcdefgh"), 128<<10)
	require.NoError(t, srv.Put(bucket, "blob", data))
	r, err := c.NewReader(context.Background(), bucket, "blob", objstore.ReaderOptions{ReadAhead: -1})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	p.Stall()
	defer p.Resume()
	start := time.Now()
	_, err = r.ReadAt(make([]byte, 1000), 5000)
	took := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "get bytes")
	require.ErrorContains(t, err, "2 tries")
	assert.Less(t, took, 3*time.Second, "a stalled read fails in about 2 x 300 ms")
}

// TestReaderKilledAndRestarted: a service killed 1 MiB into a GET's body and back 1 s later:
// the broken GET is tried again (the default tries), and the read returns the right bytes.
func TestReaderKilledAndRestarted(t *testing.T) {
	srv, p, c := startProxied(t, 5*time.Second, 0)
	data := make([]byte, 4<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	require.NoError(t, srv.Put(bucket, "blob", data))
	r, err := c.NewReader(context.Background(), bucket, "blob", objstore.ReaderOptions{ReadAhead: -1})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	p.KillAfter(1<<20, time.Second) // 1 MiB into the GET's body
	got := make([]byte, len(data)-100)
	n, err := r.ReadAt(got, 100)
	require.NoError(t, err)
	require.Equal(t, len(got), n)
	require.True(t, bytes.Equal(data[100:], got))
	gets, _ := r.Stats()
	assert.Greater(t, gets, int64(1), "the broken GET was tried again")
}

// TestUploadStalledAndKilled: an upload whose service stalls fails within the request timeout
// times the tries, naming the part, and says that its abort failed too; one whose service is
// killed and back 1 s later completes, with the right bytes (the default tries).
func TestUploadStalledAndKilled(t *testing.T) {
	srv, p, c := startProxied(t, 300*time.Millisecond, 2)
	ctx := context.Background()
	data := randomBytes(6<<20, 5)
	up, err := c.NewUpload(bucket, "out/stalled.seg", objstore.UploadOptions{PartSize: objstore.MinPartSize})
	require.NoError(t, err)
	start := time.Now()
	err = up.Publish(ctx, func(w io.Writer) error {
		p.Stall()
		return writeChunks(data)(w)
	})
	took := time.Since(start)
	p.Resume()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "part 1")
	require.ErrorContains(t, err, "left pending")
	assert.Less(t, took, 6*time.Second, "2 x 300 ms and 250 ms, then the abort's 3 s")
	ok, err := srv.Exists(bucket, "out/stalled.seg")
	require.NoError(t, err)
	assert.False(t, ok)

	_, p2, c2 := startProxiedOn(t, srv, 5*time.Second, 0)
	var once sync.Once
	srv.OnRequest(func(req *http.Request) {
		if req.Method == http.MethodPut && req.URL.Query().Get("partNumber") == "1" {
			once.Do(func() {
				p2.Stall()
				go func() {
					time.Sleep(50 * time.Millisecond)
					p2.Kill(time.Second)
					p2.Resume()
				}()
			})
		}
	})
	up2, err := c2.NewUpload(bucket, "out/killed.seg", objstore.UploadOptions{PartSize: objstore.MinPartSize})
	require.NoError(t, err)
	require.NoError(t, up2.Publish(ctx, writeChunks(data)))
	got, err := srv.Get(bucket, "out/killed.seg")
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))
}

// startProxiedOn is startProxied for a server already running.
func startProxiedOn(t *testing.T, srv *s3test.Server, timeout time.Duration, tries int) (*s3test.Server, *s3test.Proxy, *objstore.Client) {
	t.Helper()
	p, err := s3test.NewProxy(srv.URL)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	c, err := objstore.New(objstore.Config{Endpoint: p.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret",
		RequestTimeout: timeout, Retries: tries})
	require.NoError(t, err)
	return srv, p, c
}

// TestUploadMarkersMinIO: a service that lists pending uploads by exact key only, as MinIO
// does, hides an upload left pending from a listing of its prefix; the marker an upload
// writes beside its key there makes PendingUploads find it, and AbortUploads removes both.
// On a service that does not say it is MinIO no marker is written (MarkersAuto).
func TestUploadMarkersMinIO(t *testing.T) {
	ctx := context.Background()
	data := randomBytes(6<<20, 7)
	for _, c := range []struct {
		name    string
		minio   bool
		markers objstore.Markers
		found   bool // PendingUploads("out/") finds the upload left pending
		marked  bool // a marker is there while it is pending
	}{
		{"minio auto", true, objstore.MarkersAuto, true, true},
		{"minio never", true, objstore.MarkersNever, false, false},
		{"s3 auto", false, objstore.MarkersAuto, true, false},
		{"s3 always", false, objstore.MarkersAlways, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, err := s3test.Start(bucket)
			require.NoError(t, err)
			t.Cleanup(srv.Close)
			if c.minio {
				srv.LikeMinIO()
			}
			p, err := s3test.NewProxy(srv.URL)
			require.NoError(t, err)
			t.Cleanup(p.Close)
			cl, err := objstore.New(objstore.Config{Endpoint: p.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret",
				RequestTimeout: 300 * time.Millisecond, Retries: 1, Markers: c.markers})
			require.NoError(t, err)

			// An upload whose service goes away mid-way, so that its abort fails: what a
			// process killed outright leaves.
			up, err := cl.NewUpload(bucket, "out/x.seg", objstore.UploadOptions{})
			require.NoError(t, err)
			err = up.Publish(ctx, func(w io.Writer) error {
				if _, err := w.Write(data[:1<<20]); err != nil {
					return err
				}
				p.Kill(time.Hour)
				return writeChunks(data[1<<20:])(w)
			})
			require.ErrorIs(t, err, objstore.ErrPending)
			if c.marked {
				require.ErrorContains(t, err, "segtool sweep s3://segments/out/", "a prefix finds it")
			} else {
				require.ErrorContains(t, err, "segtool sweep s3://segments/out/x.seg,", "its key finds it")
			}
			keys, err := srv.Keys(bucket, "out/")
			require.NoError(t, err)
			if c.marked {
				require.Len(t, keys, 1)
				require.True(t, strings.HasPrefix(keys[0], "out/x.seg"+objstore.MarkerInfix), keys[0])
			} else {
				require.Empty(t, keys)
			}

			c2, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret", Markers: c.markers})
			require.NoError(t, err)
			ups, err := c2.PendingUploads(ctx, bucket, "out/")
			require.NoError(t, err)
			if !c.found {
				require.Empty(t, ups, "MinIO lists no upload for a prefix that is not its key")
				ups, err = c2.PendingUploads(ctx, bucket, "out/x.seg")
				require.NoError(t, err)
			}
			require.Len(t, ups, 1)
			require.Equal(t, "out/x.seg", ups[0].Key)
			require.NoError(t, c2.AbortUploads(ctx, bucket, ups))
			left, err := c2.PendingUploads(ctx, bucket, "out/x.seg")
			require.NoError(t, err)
			require.Empty(t, left)
			keys, err = srv.Keys(bucket, "out/")
			require.NoError(t, err)
			require.Empty(t, keys, "the marker goes with its upload")
		})
	}
}

// TestUploadMarkerRemoved: a completed or aborted upload removes its marker; one left by a
// process that could not remove it is a stale marker once its upload is gone, and only once
// older than the age given.
func TestUploadMarkerRemoved(t *testing.T) {
	ctx := context.Background()
	srv, c := start(t)
	srv.LikeMinIO()
	up, err := c.NewUpload(bucket, "out/done.seg", objstore.UploadOptions{})
	require.NoError(t, err)
	var during []string
	require.NoError(t, up.Publish(ctx, func(w io.Writer) error {
		during, err = srv.Keys(bucket, "out/")
		require.NoError(t, err)
		_, err := w.Write([]byte("segment"))
		return err
	}))
	require.Len(t, during, 1, "the marker while the upload is pending")
	keys, err := srv.Keys(bucket, "out/")
	require.NoError(t, err)
	require.Equal(t, []string{"out/done.seg"}, keys)

	up, err = c.NewUpload(bucket, "out/failed.seg", objstore.UploadOptions{})
	require.NoError(t, err)
	require.ErrorContains(t, up.Publish(ctx, func(w io.Writer) error { return errors.New("no") }), "no")
	keys, err = srv.Keys(bucket, "out/")
	require.NoError(t, err)
	require.Equal(t, []string{"out/done.seg"}, keys, "an aborted upload leaves no marker")

	// A marker whose upload is gone.
	stale := "out/gone.seg" + objstore.MarkerInfix + "0123456789abcdef"
	require.NoError(t, srv.Put(bucket, stale, []byte("{}")))
	got, err := c.StaleMarkers(ctx, bucket, "out/", time.Hour)
	require.NoError(t, err)
	require.Empty(t, got, "younger than the age")
	got, err = c.StaleMarkers(ctx, bucket, "out/", 0)
	require.NoError(t, err)
	require.Equal(t, []string{stale}, got)
	require.NoError(t, c.RemoveMarkers(ctx, bucket, got))
	keys, err = srv.Keys(bucket, "out/")
	require.NoError(t, err)
	require.Equal(t, []string{"out/done.seg"}, keys)
}
