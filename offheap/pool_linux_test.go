//go:build linux

package offheap

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
)

// liveCalls wraps the real calls and tracks the mappings alive; safe for the spare goroutine.
type liveCalls struct {
	Calls sys.Calls

	mu       sync.Mutex
	live     map[uintptr]int // start -> length
	mmaps    int
	badUnmap int // munmaps of a range that was not mapped
}

func newLiveCalls() *liveCalls {
	c := &liveCalls{Calls: sys.Default, live: map[uintptr]int{}}
	mmap, munmap := c.Calls.Mmap, c.Calls.Munmap
	c.Calls.Mmap = func(fd int, off int64, n int, prot, flags int) ([]byte, error) {
		b, err := mmap(fd, off, n, prot, flags)
		if err == nil {
			c.mu.Lock()
			c.mmaps++
			c.live[uintptr(unsafe.Pointer(&b[0]))] = len(b)
			c.mu.Unlock()
		}
		return b, err
	}
	c.Calls.Munmap = func(b []byte) error {
		c.mu.Lock()
		a := uintptr(unsafe.Pointer(&b[0]))
		if c.live[a] != len(b) {
			c.badUnmap++
		}
		delete(c.live, a)
		c.mu.Unlock()
		return munmap(b)
	}
	return c
}

func (c *liveCalls) counts() (live, mmaps, badUnmap int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.live), c.mmaps, c.badUnmap
}

// readaheadPool returns a pool that pools nothing and prepares a spare ahead.
func readaheadPool() (*chunkPool, *liveCalls) {
	calls := newLiveCalls()
	return &chunkPool{calls: &calls.Calls, readahead: true}, calls
}

// hasSpare waits for the spare being prepared (no trim runs meanwhile) and reports whether one
// is ready.
func hasSpare(p *chunkPool) bool {
	p.inflight.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spare != nil
}

// TestSpareAhead: a get of fresh memory has a spare prepared, the next get takes it (zeroed),
// pooled chunks go first and start no spare, and trim(0) unmaps the spare.
func TestSpareAhead(t *testing.T) {
	p, calls := readaheadPool()
	first, err := p.get()
	require.NoError(t, err)
	require.True(t, hasSpare(p))
	live, mmaps, _ := calls.counts()
	require.Equal(t, 2, live)
	require.Equal(t, 2, mmaps)

	spare, err := p.get()
	require.NoError(t, err)
	require.Equal(t, make([]byte, chunkSize), spare, "a spare reads as zeros")
	require.True(t, hasSpare(p), "taking the spare prepares the next")
	_, mmaps, _ = calls.counts()
	require.Equal(t, 3, mmaps)

	// A positive limit keeps the spare; pooled chunks are used before it.
	_, err = p.setLimit(2 * chunkSize)
	require.NoError(t, err)
	require.True(t, hasSpare(p))
	require.Empty(t, p.put([][]byte{first, spare}))
	c, err := p.get()
	require.NoError(t, err)
	require.True(t, hasSpare(p))
	_, mmaps, _ = calls.counts()
	require.Equal(t, 3, mmaps, "the chunk came from the pool")
	require.Empty(t, p.put([][]byte{c}))

	require.NoError(t, p.trim(0))
	require.False(t, hasSpare(p))
	require.Zero(t, p.pooled())
	live, _, bad := calls.counts()
	require.Zero(t, live, "no mapping left")
	require.Zero(t, bad)
}

// TestSpareMmapFails: a failing mmap in the spare goroutine is no error of its own; the writer's
// own mmap reports it, and the next fresh get prepares a spare again.
func TestSpareMmapFails(t *testing.T) {
	p, calls := readaheadPool()
	mmap := calls.Calls.Mmap
	var failing atomic.Bool
	calls.Calls.Mmap = func(fd int, off int64, n int, prot, flags int) ([]byte, error) {
		if failing.Load() {
			return nil, errInjected
		}
		return mmap(fd, off, n, prot, flags)
	}
	failing.Store(true)
	_, err := p.get()
	require.ErrorIs(t, err, errInjected, "the writer's own mmap fails")
	require.False(t, hasSpare(p), "and so did the spare's")
	failing.Store(false)
	c, err := p.get()
	require.NoError(t, err)
	require.True(t, hasSpare(p))
	require.Empty(t, p.put([][]byte{c}))
	require.NoError(t, p.trim(0))
	live, _, bad := calls.counts()
	require.Zero(t, live)
	require.Zero(t, bad)
}

// TestTrimWhileWriting: media write and close through a readahead pool while other goroutines
// trim it; every medium reads back what it wrote and, after a last trim(0), no mapping is left.
// (Before trims held spares back, a get could Add to the WaitGroup a trim was waiting on.)
func TestTrimWhileWriting(t *testing.T) {
	p, calls := readaheadPool()
	_, err := p.setLimit(2 * chunkSize)
	require.NoError(t, err)
	want := bytes.Repeat([]byte("0123456789abcdef"), (3*chunkSize+100)/16)
	rounds := 40
	if raceEnabled {
		rounds = 10
	}
	var wg sync.WaitGroup
	var writing atomic.Int32
	for g := range 2 {
		writing.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer writing.Add(-1)
			got := make([]byte, len(want))
			for i := range rounds {
				m := newMedium(nil, nil, p)
				b, err := m.NewBytes()
				if err == nil {
					_, err = b.Write(want)
				}
				if err == nil {
					_, err = b.ReadAt(got, 0)
				}
				if err == nil && !bytes.Equal(want, got) {
					t.Errorf("goroutine %d medium %d: read back differs", g, i)
				}
				if err != nil {
					t.Error(err)
				}
				if err := m.Close(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for writing.Load() > 0 {
				if err := p.trim(0); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, p.trim(0))
	live, mmaps, bad := calls.counts()
	t.Logf("%d chunks mapped in all", mmaps)
	require.Zero(t, live, "no mapping left after trim(0)")
	require.Zero(t, bad, "no munmap of a range not mapped")
}
