package sys_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/internal/sys/systrace"
)

func pacerFile(t *testing.T) *os.File {
	f, err := os.Create(filepath.Join(t.TempDir(), "paced"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// TestPacerConcurrent: writers appending at reserved offsets advance one pacer; the ranges it
// paces are those of Expected, whatever the order the writers finish in.
func TestPacerConcurrent(t *testing.T) {
	var rec systrace.Recorder
	calls := sys.Default
	rec.Wrap(&calls)
	f := pacerFile(t)
	p := &sys.Pacer{Calls: &calls, File: f, Every: 8192}
	const writers, each, chunk = 4, 25, 1000
	var wg sync.WaitGroup
	var mu sync.Mutex
	var end int64
	buf := make([]byte, chunk)
	for range writers {
		wg.Go(func() {
			for range each {
				mu.Lock()
				off := end
				end += chunk
				mu.Unlock()
				_, err := f.WriteAt(buf, off)
				require.NoError(t, err)
				require.NoError(t, p.Advance(off+chunk))
			}
		})
	}
	wg.Wait()
	require.NoError(t, systrace.Check(rec.Calls(), writers*each*chunk, 8192, false))
	trickles, syncs := p.Counts()
	require.Equal(t, len(rec.Calls()), trickles)
	require.Zero(t, syncs)
}

// TestPacerErrors: a failed call is returned and sticks, never retried; an unsupported first
// call switches to fdatasync, counted as syncs; a nil or zero pacer does nothing.
func TestPacerErrors(t *testing.T) {
	eio := errors.New("injected EIO")
	n := 0
	calls := sys.Default
	calls.SyncFileRange = func(*os.File, int64, int64, int) error { n++; return eio }
	p := &sys.Pacer{Calls: &calls, File: pacerFile(t), Every: 10}
	require.ErrorIs(t, p.Advance(25), eio)
	require.ErrorIs(t, p.Advance(50), eio)
	require.Equal(t, 1, n)

	var rec systrace.Recorder
	calls = sys.Default
	calls.SyncFileRange = func(*os.File, int64, int64, int) error { return fmt.Errorf("x: %w", sys.ErrUnsupported) }
	rec.Wrap(&calls)
	p = &sys.Pacer{Calls: &calls, File: pacerFile(t), Every: 10}
	require.NoError(t, p.Advance(35))
	trickles, syncs := p.Counts()
	require.Zero(t, trickles)
	require.Equal(t, 3, syncs)
	require.True(t, p.Fallback())

	var nilp *sys.Pacer
	require.NoError(t, nilp.Advance(100))
	require.NoError(t, (&sys.Pacer{Calls: &calls, File: pacerFile(t)}).Advance(100))
}
