//go:build linux

package scratch

import (
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
	first := a.filled
	a.Populate()
	require.Equal(t, first, a.filled, "a second Populate starts nothing")
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
	require.Nil(t, a.filled)
	require.NoError(t, a.Free())

	// An array on the Go heap: nothing to do.
	h := New[uint8](100)
	h.Populate()
	require.Nil(t, h.filled)
	require.NoError(t, h.Free())
}

// TestPopulateFreeWaits: Free right after Populate waits for its goroutine (under -race, a
// mapping given back while the kernel populates it is harmless, but the goroutine must not
// outlive the array).
func TestPopulateFreeWaits(t *testing.T) {
	a := New[uint64](4 << 20)
	if a.mapped == nil {
		t.Skip("no mappings here")
	}
	a.Populate()
	done := a.filled
	require.NoError(t, a.Free())
	select {
	case <-done:
	default:
		require.Fail(t, "Free returned before Populate's goroutine was done")
	}
}
