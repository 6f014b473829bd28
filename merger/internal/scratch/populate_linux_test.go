//go:build linux

package scratch

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// resident counts the pages of m that are in memory (mincore).
func resident(t *testing.T, m []byte) int {
	vec := make([]byte, (len(m)+unix.Getpagesize()-1)/unix.Getpagesize())
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno, "mincore")
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestPopulate: Populate brings a fresh mapping's pages in (the array's, not the rest of the
// mapping) while half the array is written, without touching what is written; Free waits for it,
// and a second Populate does nothing.
func TestPopulate(t *testing.T) {
	// An odd size, larger than anything the pool holds: a fresh mapping.
	n := 9<<20/4 + 123
	a := New[uint32](n)
	if a.mapped == nil {
		t.Skip("no mappings here")
	}
	data := a.mapped[:n*4]
	if resident(t, data) > len(data)/unix.Getpagesize()/2 {
		t.Skip("the array came from the pool, already resident")
	}
	a.Populate()
	first := a.filler
	a.Populate()
	require.Same(t, first, a.filler, "a second Populate starts nothing")
	half := a.S[:n/2] // written while the pages come in; the other half only populated
	for i := range half {
		half[i] = uint32(i) * 2654435761
	}
	pg := unix.Getpagesize()
	pages := (len(data) + pg - 1) / pg
	require.Eventually(t, func() bool { return resident(t, data) == pages }, 10*time.Second, time.Millisecond)
	tail := a.mapped[pages*pg:] // the mapping past the array's last page: left alone
	require.NotEmpty(t, tail)
	require.Zero(t, resident(t, tail), "pages past the array populated")
	for i := range half {
		if half[i] != uint32(i)*2654435761 {
			require.Failf(t, "overwritten", "element %d: %d", i, a.S[i])
		}
	}
	require.NoError(t, a.Free())
	require.Nil(t, a.filler)
	require.NoError(t, a.Free())

	// An array on the Go heap: nothing to do.
	h := New[uint8](100)
	h.Populate()
	require.Nil(t, h.filler)
	require.NoError(t, h.Free())
}

// TestPopulateFreeWaits: Free right after Populate stops it between two pieces and waits for
// its goroutine: the array of three pieces has one populated when Free returns (the hook holds
// the second until Free has asked it to stop).
func TestPopulateFreeWaits(t *testing.T) {
	a := New[uint64](3 * populatePiece / 8)
	if a.mapped == nil {
		t.Skip("no mappings here")
	}
	defer func() { pieceHook = nil }()
	calls := 0
	pieceHook = func(p *populating) {
		if calls++; calls == 2 {
			for !p.stop.Load() {
				runtime.Gosched()
			}
		}
	}
	before := piecesDone.Load()
	a.Populate()
	done := a.filler.done
	for piecesDone.Load() == before {
		runtime.Gosched() // the first piece
	}
	require.NoError(t, a.Free())
	select {
	case <-done:
	default:
		require.Fail(t, "Free returned before Populate's goroutine was done")
	}
	require.Equal(t, int64(1), piecesDone.Load()-before, "pieces populated")
	require.Equal(t, 2, calls, "the goroutine went on after Free")
}
