package table

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/s3test"
)

// TestVacuum: on a table appended to and compacted, with a temp file and an unlisted segment
// left as a crash leaves them, vacuum keeps what its retention asks for; with Retain 0 and
// PendingAge negative, only the newest version's entry and the files it lists remain, the
// table reads the same rows, and goes on (append, compact).
func TestVacuum(t *testing.T) {
	stores(t, func(t *testing.T, loc string, o Options, fsys afero.Fs) {
		ctx := context.Background()
		tb, err := Create(ctx, loc, o)
		require.NoError(t, err)
		smallSegments(t, tb, fsys, "/in", 20, 2)
		_, err = tb.Compact(ctx, CompactOptions{TargetRows: 1500})
		require.NoError(t, err)
		want := tableTotals(t, tb)
		// Left by a crash: a segment stored but never committed, temp files.
		stray, err := newStaged(ctx, tb, segBytes(t, 99, 10, day, false))
		require.NoError(t, err)
		require.NoError(t, tb.st.createExclusive(ctx, segmentsDir+"/"+tmpPrefix+"0123456789abcdef-x.seg", []byte("half")))
		require.NoError(t, tb.st.createExclusive(ctx, logDir+"/"+tmpPrefix+"0123456789abcdef-00000000000000000009.json", []byte("half")))
		log, err := tb.Log(ctx)
		require.NoError(t, err)
		allSegs := listSegments(t, tb)

		// A long retention and the default pending age: nothing goes.
		res, err := tb.Vacuum(ctx, VacuumOptions{Retain: time.Hour})
		require.NoError(t, err)
		require.Len(t, res.Retained, len(log))
		require.Empty(t, res.Segments)
		require.Empty(t, res.Entries)
		require.Empty(t, res.Temp)
		require.Equal(t, allSegs, listSegments(t, tb))
		// Retain 0 with the default pending age: old versions and their segments go, the
		// fresh unlisted files stay.
		res, err = tb.Vacuum(ctx, VacuumOptions{})
		require.NoError(t, err)
		require.Equal(t, []int{log[len(log)-1].Version}, res.Retained)
		require.NotEmpty(t, res.Segments)
		require.Len(t, res.Entries, len(log)-1)
		require.Empty(t, res.Temp)
		require.Contains(t, listSegments(t, tb), stray.Name[len(segmentsDir)+1:])
		// Pending age negative: the rest goes.
		res, err = tb.Vacuum(ctx, VacuumOptions{PendingAge: -1})
		require.NoError(t, err)
		require.Empty(t, res.Segments)
		require.Empty(t, res.Entries)
		require.Len(t, res.Temp, 3)

		e, err := tb.Snapshot(ctx, 0)
		require.NoError(t, err)
		var live []string
		for _, s := range e.Segments {
			live = append(live, s.Name[len(segmentsDir)+1:])
		}
		slices.Sort(live)
		require.Equal(t, live, listSegments(t, tb), "only the newest version's segments remain")
		names, err := tb.st.list(ctx, logDir)
		require.NoError(t, err)
		require.Equal(t, []string{entryName(e.Version)[len(logDir)+1:]}, names, "only the newest entry remains")
		require.Equal(t, want, tableTotals(t, tb))
		// The table goes on.
		tb, err = Open(ctx, loc, o)
		require.NoError(t, err)
		v, err := tb.Append(ctx, writeSegs(t, fsys, "/more", 50, 30))
		require.NoError(t, err)
		require.Equal(t, e.Version+1, v)
		got, err := tb.Log(ctx)
		require.NoError(t, err)
		require.Len(t, got, 2)
		_, err = tb.Compact(ctx, CompactOptions{TargetRows: 1500})
		require.NoError(t, err)
		require.Equal(t, want.rows+30, tableTotals(t, tb).rows)
	})
}

// TestVacuumRetain: a version stays while its successor is younger than Retain.
func TestVacuumRetain(t *testing.T) {
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := Options{Fs: fsys, Now: func() time.Time { return now }}
	tb, err := Create(ctx, "/t", o) // version 1 at 0:00
	require.NoError(t, err)
	for i, h := range []int{1, 2, 3} { // versions 2, 3, 4 at 1:00, 2:00, 3:00
		now = time.Date(2026, 1, 1, h, 0, 0, 0, time.UTC)
		_, err := tb.Append(ctx, writeSegs(t, fsys, "/in", uint64(10*i), 10))
		require.NoError(t, err)
	}
	now = time.Date(2026, 1, 1, 4, 30, 0, 0, time.UTC)
	// Version 2 was replaced at 2:00, 2.5 hours ago; version 3 at 3:00, 1.5 hours ago.
	res, err := tb.Vacuum(ctx, VacuumOptions{Retain: 2 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, []int{3, 4}, res.Retained)
	require.Equal(t, []string{entryName(1), entryName(2)}, res.Entries)
	require.Empty(t, res.Segments, "version 2's segment is live in 3 and 4")
	_, err = tb.Snapshot(ctx, 2)
	require.ErrorIs(t, err, ErrNotExist)
	require.Equal(t, int64(30), liveRows(t, tb, 4))
	require.Equal(t, int64(20), liveRows(t, tb, 3))
	_, err = tb.Vacuum(ctx, VacuumOptions{Retain: -time.Second})
	require.ErrorIs(t, err, ErrInvalid)
}

// TestVacuumS3Uploads: a multipart upload of a segment left pending (a killed append) is kept
// while younger than PendingAge and aborted by a Vacuum with PendingAge negative.
func TestVacuumS3Uploads(t *testing.T) {
	ctx := context.Background()
	srv, err := s3test.Start("bkt")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
	require.NoError(t, err)
	tb, err := Create(ctx, "s3://bkt/t/", Options{S3: c})
	require.NoError(t, err)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	core, err := minio.NewCore(u.Host, &minio.Options{Creds: credentials.NewStaticV4("test", "testsecret", ""), Region: "us-east-1"})
	require.NoError(t, err)
	_, err = core.NewMultipartUpload(ctx, "bkt", "t/segments/20240501T000000Z-0123456789abcdef.seg", minio.PutObjectOptions{})
	require.NoError(t, err)
	_, err = core.NewMultipartUpload(ctx, "bkt", "elsewhere/x.seg", minio.PutObjectOptions{})
	require.NoError(t, err)
	ups, err := c.PendingUploads(ctx, "bkt", "t/")
	require.NoError(t, err)
	require.Len(t, ups, 1)

	res, err := tb.Vacuum(ctx, VacuumOptions{})
	require.NoError(t, err)
	require.Empty(t, res.Uploads)
	ups, err = c.PendingUploads(ctx, "bkt", "t/")
	require.NoError(t, err)
	require.Len(t, ups, 1, "a young upload stays")

	res, err = tb.Vacuum(ctx, VacuumOptions{PendingAge: -1})
	require.NoError(t, err)
	require.Equal(t, []string{"t/segments/20240501T000000Z-0123456789abcdef.seg"}, res.Uploads)
	ups, err = c.PendingUploads(ctx, "bkt", "t/")
	require.NoError(t, err)
	require.Empty(t, ups)
	ups, err = c.PendingUploads(ctx, "bkt", "")
	require.NoError(t, err)
	require.Len(t, ups, 1, "an upload outside the table stays")
}
