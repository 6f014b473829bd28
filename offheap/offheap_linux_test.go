//go:build linux

package offheap

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
)

// TestPoolLimit: Close pools chunks up to the limit and unmaps the rest; TrimPool empties it.
func TestPoolLimit(t *testing.T) {
	calls := countingCalls()
	p := &chunkPool{calls: &calls.Calls, limit: 3 * ChunkSize}
	m := newMedium(nil, nil, p)
	b, err := m.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 5*ChunkSize))
	require.NoError(t, err)
	require.Equal(t, 5, calls.mmaps)
	require.NoError(t, m.Close())
	require.Equal(t, int64(3*ChunkSize), p.pooled())
	require.Equal(t, 2, calls.munmaps)

	m2 := newMedium(nil, nil, p)
	b, err = m2.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 2*ChunkSize))
	require.NoError(t, err)
	require.Equal(t, 5, calls.mmaps, "chunks came from the pool")
	require.NoError(t, m2.Close())

	prev, err := p.setLimit(ChunkSize)
	require.NoError(t, err)
	require.Equal(t, int64(3*ChunkSize), prev)
	require.Equal(t, int64(ChunkSize), p.pooled())
	require.NoError(t, p.trim(0))
	require.Zero(t, p.pooled())
	require.Equal(t, calls.mmaps, calls.munmaps, "every chunk unmapped")
}

// countedCalls wraps the real calls and counts them.
type countedCalls struct {
	Calls   sys.Calls
	mmaps   int
	munmaps int
}

func countingCalls() *countedCalls {
	c := &countedCalls{Calls: sys.Default}
	mmap, munmap := c.Calls.Mmap, c.Calls.Munmap
	c.Calls.Mmap = func(fd int, off int64, n int, prot, flags int) ([]byte, error) {
		c.mmaps++
		return mmap(fd, off, n, prot, flags)
	}
	c.Calls.Munmap = func(b []byte) error {
		c.munmaps++
		return munmap(b)
	}
	return c
}

var errInjected = errors.New("injected failure")
