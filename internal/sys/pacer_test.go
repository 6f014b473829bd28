package sys_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

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
// paces are those of Expected, whatever the order the writers finish in, in the writers'
// goroutines or in the background.
func TestPacerConcurrent(t *testing.T) {
	for _, background := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
			var rec systrace.Recorder
			calls := sys.Default
			rec.Wrap(&calls)
			f := pacerFile(t)
			p := &sys.Pacer{Calls: &calls, File: f, Every: 8192, Background: background}
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
			require.NoError(t, p.Close())
			require.NoError(t, p.Close(), "a second Close")
			require.NoError(t, systrace.Check(rec.Calls(), writers*each*chunk, 8192, false))
			trickles, syncs := p.Counts()
			require.Equal(t, len(rec.Calls()), trickles)
			require.Zero(t, syncs)
			require.Error(t, p.Advance(1<<30), "Advance after Close")
		})
	}
}

// TestPacerBackground: in the background, Advance returns before the calls are made; the
// writer blocks only while the goroutine is busy with the range handed over before.
func TestPacerBackground(t *testing.T) {
	calls := sys.Default
	release := make(chan struct{})
	entered := make(chan int64, 16)
	calls.SyncFileRange = func(_ *os.File, off, _ int64, flags int) error {
		if flags == sys.SyncFileRangeWrite {
			entered <- off
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		}
		return nil
	}
	next := func() int64 {
		select {
		case off := <-entered:
			return off
		case <-time.After(10 * time.Second):
			t.Fatal("no WRITE submitted")
			return -1
		}
	}
	p := &sys.Pacer{Calls: &calls, File: pacerFile(t), Every: 10, Background: true}
	defer func() { _ = p.Close() }()
	require.NoError(t, p.Advance(10)) // handed over; the goroutine blocks in range 0's WRITE
	require.Equal(t, int64(0), next())
	advanced := make(chan error, 1)
	go func() { advanced <- p.Advance(25) }() // waits for the goroutine to take it
	select {
	case err := <-advanced:
		t.Fatalf("Advance returned (%v) while the goroutine was busy with the range before", err)
	case <-time.After(50 * time.Millisecond):
	}
	release <- struct{}{} // range 0 done: the goroutine takes end 25
	require.NoError(t, <-advanced)
	require.Equal(t, int64(10), next())
	release <- struct{}{}
	require.NoError(t, p.Close())
	trickles, _ := p.Counts()
	require.Equal(t, 3, trickles, "WRITE 0, WRITE 10, WAIT_BEFORE 0")
}

// TestPacerErrors: a failed call is returned and sticks, never retried; an unsupported first
// call switches to fdatasync, counted as syncs; a nil or zero pacer does nothing.
func TestPacerErrors(t *testing.T) {
	eio := errors.New("injected EIO")
	for _, background := range []bool{false, true} {
		n := 0
		calls := sys.Default
		calls.SyncFileRange = func(*os.File, int64, int64, int) error { n++; return eio }
		p := &sys.Pacer{Calls: &calls, File: pacerFile(t), Every: 10, Background: background}
		if background {
			require.NoError(t, p.Advance(25)) // handed over; fails in the goroutine
			require.ErrorIs(t, p.Close(), eio)
		} else {
			require.ErrorIs(t, p.Advance(25), eio)
			require.ErrorIs(t, p.Advance(50), eio)
			require.ErrorIs(t, p.Close(), eio)
		}
		require.Equal(t, 1, n)
	}

	for _, background := range []bool{false, true} {
		var rec systrace.Recorder
		calls := sys.Default
		calls.SyncFileRange = func(*os.File, int64, int64, int) error { return fmt.Errorf("x: %w", sys.ErrUnsupported) }
		rec.Wrap(&calls)
		p := &sys.Pacer{Calls: &calls, File: pacerFile(t), Every: 10, Background: background}
		require.NoError(t, p.Advance(35))
		require.NoError(t, p.Close())
		trickles, syncs := p.Counts()
		require.Zero(t, trickles)
		require.Equal(t, 3, syncs)
		require.True(t, p.Fallback())
	}

	var nilp *sys.Pacer
	require.NoError(t, nilp.Advance(100))
	require.NoError(t, nilp.Close())
	calls := sys.Default
	require.NoError(t, (&sys.Pacer{Calls: &calls, File: pacerFile(t)}).Advance(100))
	p := &sys.Pacer{Calls: &calls, File: pacerFile(t), Every: 10, Background: true}
	require.NoError(t, p.Close(), "Close with no goroutine started")
	require.Error(t, p.Advance(100))
}
