package tmpfile

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// punchCalls is the real call table whose PunchHole calls hook first (nil: go on).
func punchCalls(hook func(off, n int64) error) *sys.Calls {
	c := sys.Default
	real := c.PunchHole
	c.PunchHole = func(f *os.File, off, n int64) error {
		if err := hook(off, n); err != nil {
			return err
		}
		return real(f, off, n)
	}
	return &c
}

// osMedium is a medium on the OS file system with buffers of 4 KiB, flushed at once.
func osMedium(t *testing.T, calls *sys.Calls) *Medium {
	t.Helper()
	m, err := newWithCalls(Options{Dir: t.TempDir(), MinBufferSize: 4 << 10, BufferSize: 4 << 10, BufferBudget: 64 << 10}, calls)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m
}

// waitFree waits until the medium's free space is want bytes (the punching goroutine hands
// the space over once its hole is punched).
func waitFree(t *testing.T, m *Medium, want int64) {
	t.Helper()
	require.Eventually(t, func() bool { return m.freeBytes() == want }, 5*time.Second, time.Millisecond,
		"free space %d, want %d", m.freeBytes(), want)
}

// allocated returns the bytes of the medium's file that hold blocks on the device.
func allocated(t *testing.T, m *Medium) int64 {
	t.Helper()
	fi, err := m.store.osFile.Stat()
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

// writeInTurns makes n Bytes of m and writes 4 KiB to each in turn, rounds times: with
// osMedium's buffers, each write is an extent of its own, interleaved with the others'.
func writeInTurns(t *testing.T, m *Medium, n, rounds int) []medium.Bytes {
	t.Helper()
	bs := make([]medium.Bytes, n)
	for i := range bs {
		b, err := m.NewBytes()
		require.NoError(t, err)
		bs[i] = b
	}
	p := bytes.Repeat([]byte{'x'}, 4<<10)
	for range rounds {
		for _, b := range bs {
			_, err := b.Write(p)
			require.NoError(t, err)
		}
	}
	return bs
}

// TestDiscardPunchesThenFrees: a discarded Bytes' space is punched out of the file (its blocks
// and pages go back) and only then placed in the free space, where the next Bytes writes
// before the file grows; the Bytes written beside it keep their bytes throughout.
func TestDiscardPunchesThenFrees(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("hole punching is Linux's")
	}
	release := make(chan struct{})
	var punched sync.WaitGroup
	punched.Add(1)
	first := true
	m := osMedium(t, punchCalls(func(off, n int64) error {
		if first {
			first = false
			punched.Done()
			<-release // the first hole waits for the test
		}
		return nil
	}))
	gone, err := m.NewBytes()
	require.NoError(t, err)
	kept, err := m.NewBytes()
	require.NoError(t, err)
	a, b := bytes.Repeat([]byte{'a'}, 4<<10), bytes.Repeat([]byte{'k'}, 4<<10)
	for range 16 { // interleaved extents of 4 KiB (a write of a buffer's size goes to the file)
		_, err = gone.Write(a)
		require.NoError(t, err)
		_, err = kept.Write(b)
		require.NoError(t, err)
	}
	size := m.FileBytes()
	require.Equal(t, int64(128<<10), size)
	before := allocated(t, m)

	require.NoError(t, gone.(medium.Discarder).Discard())
	punched.Wait()
	// While its hole is being punched, the space is not free: a new Bytes goes to the end.
	late, err := m.NewBytes()
	require.NoError(t, err)
	_, err = late.Write(bytes.Repeat([]byte{'l'}, 4<<10))
	require.NoError(t, err)
	_, err = late.Write([]byte{'l'}) // to the buffer
	require.NoError(t, err)
	require.Zero(t, m.freeBytes(), "space freed before its hole was punched")
	require.Equal(t, size+4<<10, m.FileBytes())
	close(release)
	waitFree(t, m, 64<<10)
	require.LessOrEqual(t, allocated(t, m), before+4<<10-64<<10, "the discarded extents' blocks were not given back")

	// The next writes take the space given back: the file does not grow.
	next, err := m.NewBytes()
	require.NoError(t, err)
	var want []byte
	for i := range 16 {
		p := bytes.Repeat([]byte{byte('A' + i)}, 4<<10)
		_, err = next.Write(p)
		require.NoError(t, err)
		want = append(want, p...)
	}
	_, err = next.Write([]byte{'!'}) // to the buffer
	require.NoError(t, err)
	require.Equal(t, size+4<<10, m.FileBytes(), "the file grew past the freed space")
	require.Zero(t, m.freeBytes())
	readBack(t, next, append(want, '!'))
	readBack(t, kept, bytes.Repeat([]byte{'k'}, 64<<10))
	readBack(t, late, append(bytes.Repeat([]byte{'l'}, 4<<10), 'l'))
}

// TestDiscardPunchFails: where the file system cannot punch holes, or a punch fails, the space
// is freed all the same (its pages stay until rewritten) and Discard reports nothing; after an
// unsupported punch no other is tried.
func TestDiscardPunchFails(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("hole punching is Linux's")
	}
	for _, tc := range []struct {
		name  string
		err   error
		calls int // punches tried for two Bytes of 4 extents each
	}{
		{"unsupported", sys.ErrUnsupported, 1},
		{"failing", errors.New("injected: EIO"), 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			calls := 0
			m := osMedium(t, punchCalls(func(off, n int64) error {
				mu.Lock()
				calls++
				mu.Unlock()
				return tc.err
			}))
			bs := writeInTurns(t, m, 2, 4)
			require.NoError(t, bs[0].(medium.Discarder).Discard())
			waitFree(t, m, 16<<10)
			require.NoError(t, bs[1].(medium.Discarder).Discard())
			waitFree(t, m, 32<<10)
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, tc.calls, calls)
		})
	}
}

// TestDiscardThenClose: Close waits for the punching goroutine (it stops between two holes) and
// leaves nothing behind; the file's descriptor is closed after it.
func TestDiscardThenClose(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("hole punching is Linux's")
	}
	started := make(chan struct{}, 1)
	var n int
	m := osMedium(t, punchCalls(func(off, k int64) error { // its Close at cleanup is a second one: a no-op
		n++
		select {
		case started <- struct{}{}:
		default:
		}
		time.Sleep(time.Millisecond)
		return nil
	}))
	bs := writeInTurns(t, m, 2, 64)
	require.NoError(t, bs[0].(medium.Discarder).Discard())
	<-started
	require.NoError(t, m.Close())
	require.Less(t, n, 64, "Close waited for every hole")
	require.ErrorIs(t, bs[1].(medium.Discarder).Discard(), medium.ErrClosed)
}

// TestDiscardPrefixPunchesWhatIsBelow: DiscardPrefix punches out exactly the Bytes' file
// ranges below the prefix (the part of an extent the prefix cuts too), frees them for the
// next extents, and leaves the rest readable, the Bytes written beside it untouched.
func TestDiscardPrefixPunchesWhatIsBelow(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("hole punching is Linux's")
	}
	type span struct{ off, n int64 }
	var mu sync.Mutex
	var holes []span
	m := osMedium(t, punchCalls(func(off, n int64) error {
		mu.Lock()
		holes = append(holes, span{off, n})
		mu.Unlock()
		return nil
	}))
	given, err := m.NewBytes()
	require.NoError(t, err)
	kept, err := m.NewBytes()
	require.NoError(t, err)
	var want, wantKept []byte
	for i := range 8 { // interleaved extents of 4 KiB: given's at 0, 8 KiB, 16 KiB, ...
		p := bytes.Repeat([]byte{byte('a' + i)}, 4<<10)
		_, err = given.Write(p)
		require.NoError(t, err)
		want = append(want, p...)
		q := bytes.Repeat([]byte{byte('A' + i)}, 4<<10)
		_, err = kept.Write(q)
		require.NoError(t, err)
		wantKept = append(wantKept, q...)
	}
	_, err = given.Write([]byte("tail")) // to the buffer
	require.NoError(t, err)
	want = append(want, "tail"...)
	before := allocated(t, m)

	pd := given.(medium.PrefixDiscarder)
	// Two extents and 1,000 bytes of the third.
	require.NoError(t, pd.DiscardPrefix(8<<10+1000))
	waitFree(t, m, 8<<10+1000)
	mu.Lock()
	require.Equal(t, []span{{0, 4 << 10}, {8 << 10, 4 << 10}, {16 << 10, 1000}}, holes)
	holes = nil
	mu.Unlock()
	require.LessOrEqual(t, allocated(t, m), before-8<<10, "the extents' blocks were not given back")
	rest := make([]byte, len(want)-(8<<10+1000))
	_, err = given.ReadAt(rest, 8<<10+1000)
	require.NoError(t, err)
	require.Equal(t, want[8<<10+1000:], rest)
	_, err = given.ReadAt(make([]byte, 1), 8<<10+999)
	require.ErrorIs(t, err, medium.ErrClosed)

	// The rest of the cut extent, then up to the buffer: punched from where the cut was.
	require.NoError(t, pd.DiscardPrefix(int64(len(want))-2))
	waitFree(t, m, 32<<10)
	mu.Lock()
	require.Equal(t, []span{{16<<10 + 1000, 4<<10 - 1000}, {24 << 10, 4 << 10}, {32 << 10, 4 << 10}, {40 << 10, 4 << 10}, {48 << 10, 4 << 10}, {56 << 10, 4 << 10}}, holes)
	mu.Unlock()
	p := make([]byte, 2)
	_, err = given.ReadAt(p, int64(len(want))-2)
	require.NoError(t, err)
	require.Equal(t, "il", string(p))
	readBack(t, kept, wantKept)

	// The next writes take the space given back; Discard gives back the buffer.
	size := m.FileBytes()
	next, err := m.NewBytes()
	require.NoError(t, err)
	_, err = next.Write(bytes.Repeat([]byte{'n'}, 4<<10))
	require.NoError(t, err)
	require.Equal(t, size, m.FileBytes(), "the file grew past the freed space")
	require.NoError(t, given.(medium.Discarder).Discard())
	readBack(t, kept, wantKept)
}
