package ingest

import (
	"bytes"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingReaderAt counts ReadAt calls.
type countingReaderAt struct {
	r     io.ReaderAt
	mu    sync.Mutex
	calls int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.r.ReadAt(p, off)
}

// blockReaderAt reads what the file holds, from any goroutine, with io.ReaderAt's contract at
// the end of the file; small reads in order cost a read a block.
func TestBlockReaderAt(t *testing.T) {
	data := make([]byte, 5*blockBytes+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	src := &countingReaderAt{r: bytes.NewReader(data)}
	br := newBlockReaderAt(src, int64(len(data)))

	// In order, 16 bytes at a time: one read a block.
	buf := make([]byte, 16)
	for off := 0; off+16 <= len(data); off += 16 {
		n, err := br.ReadAt(buf, int64(off))
		require.NoError(t, err)
		require.Equal(t, 16, n)
		require.Equal(t, data[off:off+16], buf)
	}
	require.LessOrEqual(t, src.calls, len(data)/blockBytes+2)

	// At the end of the file: short reads say io.EOF; a read past the end too.
	n, err := br.ReadAt(buf, int64(len(data)-5))
	require.Equal(t, 5, n)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, data[len(data)-5:], buf[:5])
	_, err = br.ReadAt(buf, int64(len(data)))
	require.ErrorIs(t, err, io.EOF)
	n, err = br.ReadAt(buf, int64(len(data)-16))
	require.NoError(t, err)
	require.Equal(t, 16, n)

	// Random reads, small and large, from several goroutines.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 2000 {
				size := 1 + r.IntN(64)
				if r.IntN(20) == 0 {
					size = blockBytes + r.IntN(blockBytes)
				}
				off := r.IntN(len(data))
				p := make([]byte, size)
				n, err := br.ReadAt(p, int64(off))
				want := min(size, len(data)-off)
				if want < size {
					if !assertEOF(t, err) {
						return
					}
				} else if err != nil {
					t.Errorf("read %d at %d: %v", size, off, err)
					return
				}
				if n != want || !bytes.Equal(p[:n], data[off:off+want]) {
					t.Errorf("read %d at %d: got %d bytes, want %d", size, off, n, want)
					return
				}
			}
		}()
	}
	wg.Wait()

	// Whatever was read, the blocks hold readerBytes at most.
	held := 0
	for _, k := range br.blocks {
		held += cap(k.buf)
	}
	require.LessOrEqual(t, held, readerBytes)
}

func assertEOF(t *testing.T, err error) bool {
	if err != io.EOF {
		t.Errorf("want io.EOF, got %v", err)
		return false
	}
	return true
}

// A failing source's error comes through.
func TestBlockReaderAtError(t *testing.T) {
	br := newBlockReaderAt(errReaderAt{}, 1000)
	_, err := br.ReadAt(make([]byte, 10), 0)
	require.ErrorIs(t, err, errBoom)
}

type errReaderAt struct{}

func (errReaderAt) ReadAt([]byte, int64) (int, error) { return 0, errBoom }
