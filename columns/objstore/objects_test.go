package objstore_test

import (
	"context"
	"io/fs"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/objstore"
)

// TestPutIfAbsent checks that the test server honours If-None-Match: * on PutObject (the
// property a table's log commit relies on): the first put of a key wins, every later one
// fails with fs.ErrExist and leaves the object as it was, also when 8 race for the key.
func TestPutIfAbsent(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	require.NoError(t, c.PutIfAbsent(ctx, bucket, "t/_log/1.json", []byte("first")))
	err := c.PutIfAbsent(ctx, bucket, "t/_log/1.json", []byte("second"))
	require.ErrorIs(t, err, fs.ErrExist)
	require.Contains(t, err.Error(), "s3://segments/t/_log/1.json")
	got, err := srv.Get(bucket, "t/_log/1.json")
	require.NoError(t, err)
	require.Equal(t, "first", string(got))

	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			err := c.PutIfAbsent(ctx, bucket, "t/_log/2.json", []byte{byte('a' + i)})
			if err == nil {
				wins.Add(1)
				return
			}
			require.ErrorIs(t, err, fs.ErrExist)
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), wins.Load())

	b, err := c.ReadObject(ctx, bucket, "t/_log/1.json", 100)
	require.NoError(t, err)
	require.Equal(t, "first", string(b))
	_, err = c.ReadObject(ctx, bucket, "t/_log/1.json", 3)
	require.ErrorIs(t, err, objstore.ErrInvalid)
	_, err = c.ReadObject(ctx, bucket, "t/_log/9.json", 100)
	require.ErrorIs(t, err, objstore.ErrNotFound)

	objs, err := c.List(ctx, bucket, "t/_log/")
	require.NoError(t, err)
	require.Len(t, objs, 2)
	for _, o := range objs {
		require.WithinDuration(t, time.Now(), o.ModTime, time.Minute, o.Key)
	}
	objs[0].ModTime, objs[1].ModTime = time.Time{}, time.Time{}
	require.Equal(t, []objstore.ObjectInfo{{Key: "t/_log/1.json", Size: 5}, {Key: "t/_log/2.json", Size: 1}}, objs)
	objs, err = c.List(ctx, bucket, "none/")
	require.NoError(t, err)
	require.Empty(t, objs)
	_, err = c.List(ctx, "nobucket", "t/")
	require.ErrorIs(t, err, objstore.ErrNotFound)
}

// TestPutAndExists: Put replaces an object, Exists sees it and its absence.
func TestPutAndExists(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	ok, err := c.Exists(ctx, bucket, "t/_log/1.json")
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, c.Put(ctx, bucket, "t/_log/1.json", []byte("first")))
	ok, err = c.Exists(ctx, bucket, "t/_log/1.json")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, c.Put(ctx, bucket, "t/_log/1.json", []byte("second")))
	b, err := c.ReadObject(ctx, bucket, "t/_log/1.json", 100)
	require.NoError(t, err)
	require.Equal(t, "second", string(b))
	require.ErrorIs(t, c.Put(ctx, "nobucket", "k", []byte("x")), objstore.ErrNotFound)
}
