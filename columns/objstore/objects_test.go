package objstore_test

import (
	"context"
	"io/fs"
	"sync"
	"sync/atomic"
	"testing"

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
	require.Equal(t, []objstore.ObjectInfo{{Key: "t/_log/1.json", Size: 5}, {Key: "t/_log/2.json", Size: 1}}, objs)
	objs, err = c.List(ctx, bucket, "none/")
	require.NoError(t, err)
	require.Empty(t, objs)
	_, err = c.List(ctx, "nobucket", "t/")
	require.ErrorIs(t, err, objstore.ErrNotFound)
}
