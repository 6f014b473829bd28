package table

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/s3test"
	"github.com/writeout/writeout/internal/sys"
)

// tableCase runs the life of a table at loc: create, appends, log, snapshots, errors. fsys
// holds the input segments (and the table, when local).
func tableCase(t *testing.T, loc string, o Options, fsys afero.Fs, srcDir string) {
	ctx := context.Background()
	_, err := Open(ctx, loc, o)
	require.ErrorIs(t, err, ErrNotExist)
	require.ErrorIs(t, err, fs.ErrNotExist)

	created, err := Create(ctx, loc, o)
	require.NoError(t, err)
	_, err = Create(ctx, loc, o)
	require.ErrorIs(t, err, ErrExist)
	require.ErrorIs(t, err, fs.ErrExist)

	tb, err := Open(ctx, loc, o)
	require.NoError(t, err)
	require.Equal(t, created.String(), tb.String())
	e, err := tb.Snapshot(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, e.Version)
	require.Equal(t, KindCreate, e.Operation.Kind)
	require.Empty(t, e.Segments)
	require.Nil(t, e.Schema)

	in := writeSegs(t, fsys, srcDir, 10, 300, 200, 100)
	v, err := tb.Append(ctx, in[:2])
	require.NoError(t, err)
	require.Equal(t, 2, v)
	v, err = tb.Append(ctx, in[2:])
	require.NoError(t, err)
	require.Equal(t, 3, v)

	// A segment of another schema is refused before anything is copied.
	other := filepath.Join(srcDir, "other.seg")
	require.NoError(t, afero.WriteFile(fsys, other, segBytes(t, 1, 10, day, true), 0o644))
	before := listSegments(t, tb)
	_, err = tb.Append(ctx, []string{in[0], other})
	require.ErrorIs(t, err, ErrSchema)
	require.ErrorIs(t, err, columns.ErrSchema)
	require.Contains(t, err.Error(), "other.seg")
	require.Equal(t, before, listSegments(t, tb), "a refused append copied segments")
	// Not a segment: refused too.
	junk := filepath.Join(srcDir, "junk.seg")
	require.NoError(t, afero.WriteFile(fsys, junk, []byte("not a segment at all, but long enough to look"), 0o644))
	_, err = tb.Append(ctx, []string{junk})
	require.ErrorIs(t, err, columns.ErrCorrupt)
	require.Equal(t, before, listSegments(t, tb))

	log, err := tb.Log(ctx)
	require.NoError(t, err)
	require.Len(t, log, 3)
	for i, e := range log {
		require.Equal(t, i+1, e.Version)
	}
	require.Equal(t, KindAppend, log[1].Operation.Kind)
	require.Len(t, log[1].Operation.Added, 2)
	require.Len(t, log[1].Segments, 2)
	require.Len(t, log[2].Operation.Added, 1)
	require.Len(t, log[2].Segments, 3)
	require.Equal(t, int64(600), log[2].Rows())
	require.True(t, testSchema(false).Equal(*log[2].Schema))
	for _, s := range log[2].Segments {
		require.True(t, strings.HasPrefix(s.Name, "segments/20240501T"), s.Name)
	}

	require.Equal(t, int64(500), liveRows(t, tb, 2))
	require.Equal(t, int64(600), liveRows(t, tb, 3))
	require.Equal(t, int64(600), liveRows(t, tb, 0))
	require.Len(t, before, 3, "every live segment stored, nothing else")

	_, err = tb.Snapshot(ctx, 9)
	require.ErrorIs(t, err, ErrNotExist)
	require.Contains(t, err.Error(), "version 9")
}

// listSegments lists the table's segments/ directory.
func listSegments(t *testing.T, tb *Table) []string {
	t.Helper()
	names, err := tb.st.list(context.Background(), segmentsDir)
	require.NoError(t, err)
	return names
}

func TestTableMemFs(t *testing.T) {
	fsys := afero.NewMemMapFs()
	tableCase(t, "/data/t", Options{Fs: fsys}, fsys, "/in")
	names, err := afero.ReadDir(fsys, "/data/t/_log")
	require.NoError(t, err)
	require.Len(t, names, 3, "temp files left in _log/")
}

func TestTableOS(t *testing.T) {
	dir := t.TempDir()
	tableCase(t, filepath.Join(dir, "t"), Options{}, afero.NewOsFs(), filepath.Join(dir, "in"))
	// Where renameat2 has no RENAME_NOREPLACE: link then unlink.
	calls := sys.Default
	renames := 0
	calls.Renameat2 = func(string, string, uint) error {
		renames++
		return fmt.Errorf("test: %w", sys.ErrUnsupported)
	}
	dir = t.TempDir()
	tableCase(t, filepath.Join(dir, "t"), Options{calls: &calls}, afero.NewOsFs(), filepath.Join(dir, "in"))
	require.Positive(t, renames)
	ents, err := os.ReadDir(filepath.Join(dir, "t", "_log"))
	require.NoError(t, err)
	require.Len(t, ents, 3, "temp names left by the link fallback")
}

func TestTableS3(t *testing.T) {
	srv, err := s3test.Start("bkt")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
	require.NoError(t, err)
	fsys := afero.NewMemMapFs()
	tableCase(t, "s3://bkt/tables/t1/", Options{S3: c, Fs: fsys}, fsys, "/in")
	// The same table, named without the trailing slash.
	tb, err := Open(context.Background(), "s3://bkt/tables/t1", Options{S3: c})
	require.NoError(t, err)
	e, err := tb.Snapshot(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, 3, e.Version)
	require.Equal(t, "s3://bkt/tables/t1/"+e.Segments[0].Name, tb.Location(e.Segments[0].Name))
	ok, err := srv.Exists("bkt", "tables/t1/"+e.Segments[0].Name)
	require.NoError(t, err)
	require.True(t, ok)
	ups, err := c.PendingUploads(context.Background(), "bkt", "tables/")
	require.NoError(t, err)
	require.Empty(t, ups)
	// A missing bucket: an error, no table.
	_, err = Create(context.Background(), "s3://nobkt/t/", Options{S3: c})
	require.Error(t, err)
}

// TestDamagedEntry: a newest entry that fails its checksum, or is missing, is an error naming
// the version, never the version before it.
func TestDamagedEntry(t *testing.T) {
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	tb, err := Create(ctx, "/t", Options{Fs: fsys})
	require.NoError(t, err)
	_, err = tb.Append(ctx, writeSegs(t, fsys, "/in", 1, 50))
	require.NoError(t, err)
	name := "/t/" + entryName(2)
	b, err := afero.ReadFile(fsys, name)
	require.NoError(t, err)
	d := []byte(strings.Replace(string(b), `"rows":50`, `"rows":51`, 1))
	require.NotEqual(t, b, d)
	require.NoError(t, afero.WriteFile(fsys, name, d, 0o644))
	for _, v := range []int{0, 2} {
		_, err = tb.Snapshot(ctx, v)
		require.ErrorIs(t, err, ErrCorrupt)
		require.Contains(t, err.Error(), "version 2")
	}
	_, err = tb.Log(ctx)
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = tb.Append(ctx, writeSegs(t, fsys, "/in", 2, 50))
	require.ErrorIs(t, err, ErrCorrupt)
	// An entry under another version's name.
	one, err := afero.ReadFile(fsys, "/t/"+entryName(1))
	require.NoError(t, err)
	require.NoError(t, afero.WriteFile(fsys, name, one, 0o644))
	_, err = tb.Snapshot(ctx, 2)
	require.ErrorIs(t, err, ErrCorrupt)
	// Missing: version 1 removed, asked for.
	require.NoError(t, fsys.Remove("/t/"+entryName(1)))
	_, err = tb.Snapshot(ctx, 1)
	require.ErrorIs(t, err, ErrNotExist)
	require.Contains(t, err.Error(), "version 1")
}

// TestOpenSegmentChecksFooter: a segment file replaced by another is caught by its footer
// checksum.
func TestOpenSegmentChecksFooter(t *testing.T) {
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	tb, err := Create(ctx, "/t", Options{Fs: fsys})
	require.NoError(t, err)
	_, err = tb.Append(ctx, writeSegs(t, fsys, "/in", 1, 50))
	require.NoError(t, err)
	e, err := tb.Snapshot(ctx, 0)
	require.NoError(t, err)
	require.NoError(t, afero.WriteFile(fsys, "/t/"+e.Segments[0].Name, segBytes(t, 99, 50, day, false), 0o644))
	_, _, err = tb.OpenSegment(ctx, e.Segments[0])
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), e.Segments[0].Name)
}

func TestLocations(t *testing.T) {
	c, err := objstore.New(objstore.Config{Endpoint: "http://127.0.0.1:1"})
	require.NoError(t, err)
	o := Options{S3: c}
	o.ensureDefaults()
	for _, bad := range []string{"", "s3://", "s3:///p/", "S3://b/p/", "s3:/b/p/", "gs://b/p/", "s3://b//p/", "s3://b/../p/"} {
		_, err := parseLocation(bad, &o)
		require.ErrorIs(t, err, ErrInvalid, bad)
		require.True(t, errors.Is(err, ErrInvalid))
	}
	for in, want := range map[string]string{"s3://b/p/": "s3://b/p/", "s3://b/p": "s3://b/p/", "s3://b/": "s3://b/", "/x/y/": "/x/y", "rel": "rel"} {
		st, err := parseLocation(in, &o)
		require.NoError(t, err, in)
		require.Equal(t, want, st.String())
	}
	_, err = parseLocation("s3://b/p/", &Options{})
	require.ErrorIs(t, err, ErrInvalid, "no client")
	require.True(t, IsLocation(nil, "s3://b/p/"))
	require.False(t, IsLocation(nil, "s3://b/p.seg"))
	mem := afero.NewMemMapFs()
	require.NoError(t, mem.MkdirAll("/t/_log", 0o755))
	require.True(t, IsLocation(mem, "/t"))
	require.False(t, IsLocation(mem, "/u"))
	// A file system without a rename that refuses to replace cannot hold a table.
	_, err = Create(context.Background(), "/t", Options{Fs: afero.NewBasePathFs(afero.NewMemMapFs(), "/base")})
	require.ErrorIs(t, err, ErrUnsupported)
	require.True(t, IsTempName(".tmp-0123456789abcdef-x.json"))
	require.False(t, IsTempName(".tmp-x.json"))
}

// TestS3WithoutConditionalWrites: a service that ignores If-None-Match (here, the header
// stripped on its way in) is found by the probe, and no table is created or appended to.
func TestS3WithoutConditionalWrites(t *testing.T) {
	srv, err := s3test.Start("bkt")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
	require.NoError(t, err)
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	o := Options{S3: c, Fs: fsys}
	_, err = Create(ctx, "s3://bkt/t/", o)
	require.NoError(t, err)
	srv.OnRequest(func(r *http.Request) { r.Header.Del("If-None-Match") })
	_, err = Create(ctx, "s3://bkt/u/", o)
	require.ErrorIs(t, err, ErrUnsupported)
	require.Contains(t, err.Error(), "If-None-Match")
	_, err = Open(ctx, "s3://bkt/u/", o)
	require.ErrorIs(t, err, ErrNotExist)
	// A Table opened now probes at its first write.
	tb2, err := Open(ctx, "s3://bkt/t/", o)
	require.NoError(t, err)
	_, err = tb2.Append(ctx, writeSegs(t, fsys, "/in", 1, 10))
	require.ErrorIs(t, err, ErrUnsupported)
	objs, err := c.List(ctx, "bkt", "")
	require.NoError(t, err)
	require.Len(t, objs, 1, "only version 1 of t: no probe or segment left: %v", objs)
}

// TestS3SingleWriter: on a service that ignores If-None-Match, Options.SingleWriter lets one
// writer create, append, commit and compact. Each commit checks for its entry first (a
// HEAD), so a commit on a stale base rebases rather than replacing the version there. Where
// the service honours conditional writes, SingleWriter still sends If-None-Match: *.
func TestS3SingleWriter(t *testing.T) {
	srv, err := s3test.Start("bkt")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	srv.IgnoreConditionalWrites()
	c, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
	require.NoError(t, err)
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	_, err = Create(ctx, "s3://bkt/t/", Options{S3: c, Fs: fsys})
	require.ErrorIs(t, err, ErrUnsupported)
	require.Contains(t, err.Error(), "SingleWriter")

	o := Options{S3: c, Fs: fsys, SingleWriter: true}
	tb, err := Create(ctx, "s3://bkt/t/", o)
	require.NoError(t, err)
	v, err := tb.Append(ctx, writeSegs(t, fsys, "/in", 1, 10, 20))
	require.NoError(t, err)
	require.Equal(t, 2, v)
	v, err = tb.Append(ctx, writeSegs(t, fsys, "/in", 3, 30))
	require.NoError(t, err)
	require.Equal(t, 3, v)
	require.EqualValues(t, 60, liveRows(t, tb, 0))

	// A commit on version 2 finds version 3 taken and commits version 4 on top of it.
	three, err := srv.Get("bkt", "t/"+entryName(3))
	require.NoError(t, err)
	e2, err := tb.Snapshot(ctx, 2)
	require.NoError(t, err)
	v, err = tb.Commit(ctx, 2, Change{Kind: KindReplace, Removed: []string{e2.Segments[0].Name}})
	require.NoError(t, err)
	require.Equal(t, 4, v)
	got, err := srv.Get("bkt", "t/"+entryName(3))
	require.NoError(t, err)
	require.Equal(t, three, got, "version 3 replaced")
	require.EqualValues(t, 50, liveRows(t, tb, 4))

	// Another Table probes again; a compaction commits through the check too.
	tb2, err := Open(ctx, "s3://bkt/t/", o)
	require.NoError(t, err)
	res, err := tb2.Compact(ctx, CompactOptions{})
	require.NoError(t, err)
	require.Len(t, res.Replaced, 1)
	require.Equal(t, 5, res.Replaced[0].Version)
	require.EqualValues(t, 50, liveRows(t, tb2, 0))
	keys, err := srv.Keys("bkt", "t/_log/")
	require.NoError(t, err)
	require.Len(t, keys, 5, "no probe left: %v", keys)

	// A service that honours conditional writes: every entry is put with If-None-Match.
	srv2, err := s3test.Start("bkt")
	require.NoError(t, err)
	t.Cleanup(srv2.Close)
	c2, err := objstore.New(objstore.Config{Endpoint: srv2.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
	require.NoError(t, err)
	var mu sync.Mutex
	var puts, conditional int
	srv2.OnRequest(func(r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/_log/0") {
			mu.Lock()
			puts++
			if r.Header.Get("If-None-Match") == "*" {
				conditional++
			}
			mu.Unlock()
		}
	})
	tb3, err := Create(ctx, "s3://bkt/t/", Options{S3: c2, Fs: fsys, SingleWriter: true})
	require.NoError(t, err)
	_, err = tb3.Append(ctx, writeSegs(t, fsys, "/in", 1, 10))
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 2, puts)
	require.Equal(t, 2, conditional)
}
