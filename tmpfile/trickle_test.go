package tmpfile

import (
	"bytes"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/internal/sys/systrace"
	"github.com/writeout/writeout/medium"
)

// TestTrickleExtents: with TrickleBytes, the medium's file is paced as its extents are
// appended, by Bytes written concurrently: WRITE on range N, WAIT_BEFORE on N-1, contiguous
// from 0 over every full interval of the file, never an fdatasync (stages are not synced).
func TestTrickleExtents(t *testing.T) {
	const every = 16 << 10
	var rec systrace.Recorder
	calls := sys.Default
	rec.Wrap(&calls)
	m, err := newWithCalls(Options{Dir: t.TempDir(), BufferSize: 4096, Durability: medium.Durability{Sync: medium.SyncNone, TrickleBytes: every}}, &calls)
	require.NoError(t, err)
	defer m.Close()
	var wg sync.WaitGroup
	for k := range 4 {
		b, err := m.NewBytes()
		require.NoError(t, err)
		wg.Go(func() {
			for range 50 {
				_, err := b.Write(bytes.Repeat([]byte{byte(k)}, 1500))
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	require.NoError(t, m.Close()) // waits for the pacer's goroutine
	groups := systrace.ByFile(rec.Calls())
	require.Len(t, groups, 1)
	require.NoError(t, systrace.Check(groups[0], m.FileBytes(), every, false))
	require.GreaterOrEqual(t, m.FileBytes()/every, int64(10))
	require.Equal(t, int64(len(groups[0])), m.Trickles())
	require.Zero(t, m.Syncs())
	t.Logf("%d bytes staged, %d sync_file_range calls", m.FileBytes(), m.Trickles())
}

// TestTrickleExtentsFails: a failed pacing call (made in the background, after the write that
// completed the range) fails the medium from then on with medium.ErrSync, as a failed sync
// does: every later write and read; where sync_file_range is missing, the file is fdatasynced
// every interval instead, counted as syncs.
func TestTrickleExtentsFails(t *testing.T) {
	eio := errors.New("injected EIO")
	calls := sys.Default
	calls.SyncFileRange = func(*os.File, int64, int64, int) error { return eio }
	m, err := newWithCalls(Options{Dir: t.TempDir(), BufferSize: 4096, Durability: medium.Durability{TrickleBytes: 8192}}, &calls)
	require.NoError(t, err)
	defer m.Close()
	b, err := m.NewBytes()
	require.NoError(t, err)
	_, _ = b.Write(make([]byte, 20000)) // the range's failure may not be known yet
	_ = m.store.pacer.Close()           // now it is
	_, err = b.WriteTo(&bytes.Buffer{})
	require.ErrorIs(t, err, medium.ErrSync, "a read after the failure")
	require.ErrorIs(t, err, eio)
	b, err = m.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 5000))
	require.ErrorIs(t, err, medium.ErrSync, "the medium has failed: no later write")
	require.ErrorIs(t, err, eio)

	calls = sys.Default
	calls.TrickleSupported = func() bool { return false }
	m2, err := newWithCalls(Options{Dir: t.TempDir(), BufferSize: 4096, Durability: medium.Durability{TrickleBytes: 8192}}, &calls)
	require.NoError(t, err)
	defer m2.Close()
	b, err = m2.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 40000))
	require.NoError(t, err)
	_, err = b.WriteTo(&bytes.Buffer{})
	require.NoError(t, err)
	require.NoError(t, m2.Close()) // waits for the pacer's goroutine
	require.Zero(t, m2.Trickles())
	require.Equal(t, m2.FileBytes()/8192, m2.Syncs())
}
