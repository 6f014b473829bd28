//go:build linux

package offheap

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// TestPoolLimit: Close pools chunks up to the limit and unmaps the rest; trimPool empties it.
func TestPoolLimit(t *testing.T) {
	calls := countingCalls()
	p := &chunkPool{calls: &calls.Calls, limit: 3 * chunkSize}
	m := newMedium(nil, nil, p)
	b, err := m.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 5*chunkSize))
	require.NoError(t, err)
	require.Equal(t, 5, calls.mmaps)
	require.NoError(t, m.Close())
	require.Equal(t, int64(3*chunkSize), p.pooled())
	require.Equal(t, 2, calls.munmaps)

	m2 := newMedium(nil, nil, p)
	b, err = m2.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 2*chunkSize))
	require.NoError(t, err)
	require.Equal(t, 5, calls.mmaps, "chunks came from the pool")
	require.NoError(t, m2.Close())

	prev, err := p.setLimit(chunkSize)
	require.NoError(t, err)
	require.Equal(t, int64(3*chunkSize), prev)
	require.Equal(t, int64(chunkSize), p.pooled())
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

// faultPool returns a pool on a copy of the real calls, for a test to replace entries in.
func faultPool(limit int64) (*chunkPool, *sys.Calls) {
	calls := sys.Default
	return &chunkPool{calls: &calls, limit: limit}, &calls
}

func TestMmapFails(t *testing.T) {
	p, calls := faultPool(0)
	realMmap := calls.Mmap
	mmaps := 0
	failAt := 0
	calls.Mmap = func(fd int, off int64, n int, prot, flags int) ([]byte, error) {
		mmaps++
		if mmaps == failAt {
			return nil, errInjected
		}
		return realMmap(fd, off, n, prot, flags)
	}

	t.Run("first", func(t *testing.T) {
		mmaps, failAt = 0, 1
		bud := NewBudget(10 * chunkSize)
		m := newMedium([]*Budget{bud}, heapSpill(t), p)
		b, err := m.NewBytes()
		require.NoError(t, err)
		n, err := b.Write([]byte("hello"))
		require.ErrorIs(t, err, errInjected)
		require.NotErrorIs(t, err, ErrBudget, "an mmap failure does not spill")
		require.Zero(t, n)
		require.Zero(t, b.Size())
		require.Zero(t, bud.Used(), "the failed chunk's reservation is given back")
		_, err = b.WriteString("again")
		require.ErrorIs(t, err, errInjected, "sticky")
		k, err := b.ReadAt(make([]byte, 1), 0)
		require.ErrorIs(t, err, io.EOF)
		require.Zero(t, k)
		var got bytes.Buffer
		_, err = b.WriteTo(&got)
		require.NoError(t, err)
		require.Zero(t, got.Len())
		// Another Bytes gets memory once mmap works again.
		other, err := m.NewBytes()
		require.NoError(t, err)
		_, err = other.WriteString("fine")
		require.NoError(t, err)
		require.NoError(t, m.Close())
		require.Zero(t, bud.Used())
	})
	t.Run("third", func(t *testing.T) {
		mmaps, failAt = 0, 3
		m := newMedium(nil, nil, p)
		b, err := m.NewBytes()
		require.NoError(t, err)
		want := bytes.Repeat([]byte("0123456789abcdef"), 3*chunkSize/16)
		n, err := b.Write(want)
		require.ErrorIs(t, err, errInjected)
		require.Equal(t, 2*chunkSize, n, "two chunks were filled before the third failed")
		got := make([]byte, n)
		_, err = b.ReadAt(got, 0)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want[:n], got))
		require.NoError(t, m.Close())
	})
	t.Run("wrong size", func(t *testing.T) {
		calls.Mmap = func(fd int, off int64, n int, prot, flags int) ([]byte, error) {
			return realMmap(fd, off, n/2, prot, flags)
		}
		defer func() { calls.Mmap = realMmap }()
		m := newMedium(nil, nil, p)
		b, err := m.NewBytes()
		require.NoError(t, err)
		_, err = b.Write([]byte("x"))
		require.ErrorContains(t, err, "mmap returned")
		require.NoError(t, m.Close())
	})
}

func TestMadviseFailsIsNotAnError(t *testing.T) {
	p, calls := faultPool(0)
	advised := 0
	calls.Madvise = func([]byte, int) error { advised++; return errInjected }
	m := newMedium(nil, nil, p)
	b, err := m.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, chunkSize+1))
	require.NoError(t, err)
	require.Equal(t, 2, advised)
	require.NoError(t, m.Close())
}

// spyMedium records the children made of it and whether they were closed.
type spyMedium struct {
	medium.Medium
	closed   bool
	children []*spyMedium
}

func (s *spyMedium) NewChild() (medium.Medium, error) {
	c, err := s.Medium.NewChild()
	if err != nil {
		return nil, err
	}
	spy := &spyMedium{Medium: c}
	s.children = append(s.children, spy)
	return spy, nil
}

func (s *spyMedium) Close() error { s.closed = true; return s.Medium.Close() }

func TestMunmapFailsAtClose(t *testing.T) {
	p, calls := faultPool(0) // no pooling: Close unmaps every chunk
	realMunmap := calls.Munmap
	var unmapped [][]byte
	calls.Munmap = func(b []byte) error {
		unmapped = append(unmapped, b)
		err := realMunmap(b) // really unmapped, so the test leaks nothing
		if len(unmapped) == 2 || len(unmapped) == 4 {
			return errInjected
		}
		return err
	}
	errHook := errors.New("hook failed")
	spill := &spyMedium{Medium: heapSpill(t)}
	bud := NewBudget(6 * chunkSize)
	m := newMedium([]*Budget{bud}, spill, p)
	hookRan := false
	m.OnClose(func() error { hookRan = true; return errHook })
	child, err := m.NewChild()
	require.NoError(t, err)
	var bs []medium.Bytes
	for _, x := range []medium.Medium{m, child, m} {
		b, err := x.NewBytes()
		require.NoError(t, err)
		_, err = b.Write(make([]byte, 3*chunkSize)) // the third spills
		require.NoError(t, err)
		bs = append(bs, b)
	}
	held := len(m.chunks) + len(child.(*Medium).chunks)
	require.Equal(t, 6, held)
	require.Len(t, spill.children, 1)

	err = m.Close()
	require.ErrorIs(t, err, errInjected)
	require.ErrorIs(t, err, errHook)
	require.Regexp(t, "^(?s)offheap: munmap chunk: injected failure.*hook failed.*injected failure", err.Error(),
		"the child (registered last) closes first, then the hook, then the medium's own release")
	require.True(t, hookRan)
	require.Len(t, unmapped, held, "every chunk was unmapped despite the failures")
	require.Zero(t, bud.Used())
	require.True(t, spill.children[0].closed, "the spill child was closed")
	for _, b := range bs {
		_, err := b.ReadAt(make([]byte, 1), 0)
		require.ErrorIs(t, err, medium.ErrClosed)
	}
	require.NoError(t, m.Close(), "a second Close")
	require.Len(t, unmapped, held)
}

func TestTrimPoolMunmapFails(t *testing.T) {
	p, calls := faultPool(8 * chunkSize)
	realMunmap := calls.Munmap
	n := 0
	calls.Munmap = func(b []byte) error {
		n++
		err := realMunmap(b)
		if n == 1 {
			return errInjected
		}
		return err
	}
	m := newMedium(nil, nil, p)
	b, err := m.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 3*chunkSize))
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.Equal(t, int64(3*chunkSize), p.pooled())
	err = p.trim(0)
	require.ErrorIs(t, err, errInjected)
	require.Equal(t, 3, n, "every pooled chunk was unmapped")
	require.Zero(t, p.pooled())
}

func TestWritevFails(t *testing.T) {
	m, err := New(Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	b, err := m.NewBytes()
	require.NoError(t, err)
	want := bytes.Repeat([]byte("abc"), chunkSize)
	_, err = b.Write(want)
	require.NoError(t, err)
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer f.Close()

	m.writev = func(*os.File, [][]byte) (int64, error) { return 10, errInjected }
	n, err := b.WriteTo(f)
	require.ErrorIs(t, err, errInjected)
	require.Equal(t, int64(10), n)
	m.writev = func(*os.File, [][]byte) (int64, error) { return 10, nil }
	_, err = b.WriteTo(f)
	require.ErrorIs(t, err, io.ErrShortWrite)

	// Unchanged and still usable.
	m.writev = sys.Writev
	_, err = b.WriteString("tail")
	require.NoError(t, err)
	want = append(want, "tail"...)
	_, err = f.Seek(0, io.SeekStart)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(0))
	n, err = b.WriteTo(f)
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), n)
	got, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
}

func TestSpillMediumClosed(t *testing.T) {
	spill := medium.NewHeap()
	require.NoError(t, spill.Close())
	m, err := New(Options{MaxBytes: chunkSize, Spill: spill})
	require.NoError(t, err)
	b, err := m.NewBytes()
	require.NoError(t, err)
	_, err = b.WriteString("fits in the chunk")
	require.NoError(t, err)
	_, err = b.Write(make([]byte, chunkSize))
	require.ErrorIs(t, err, medium.ErrClosed, "the spill medium is closed")
	_, err = b.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed, "sticky")
	p := make([]byte, len("fits in the chunk"))
	_, err = b.ReadAt(p, 0)
	require.NoError(t, err)
	require.Equal(t, "fits in the chunk", string(p))
	require.NoError(t, m.Close())
}

// TestChunksAligned: on this kernel 2 MiB anonymous mappings start on a 2 MiB boundary, so a
// chunk can be one huge page (logged, not required: older kernels do not align them).
func TestChunksAligned(t *testing.T) {
	p, _ := faultPool(0)
	aligned := 0
	const n = 8
	for range n {
		c, err := p.get()
		require.NoError(t, err)
		if uintptr(unsafe.Pointer(&c[0]))%chunkSize == 0 {
			aligned++
		}
		require.Empty(t, p.put([][]byte{c}))
	}
	t.Logf("%d of %d chunks aligned on %d bytes", aligned, n, chunkSize)
}
