package medium

import (
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/writeout/writeout/internal/backend"
)

// Heap chunk sizes: the first chunk of a Bytes is small, so that thousands of tiny Bytes stay
// cheap; each next chunk doubles, up to heapMaxChunk, so that a large Bytes costs few chunks.
const (
	heapMinChunk = 512
	heapMaxChunk = 1 << 20
)

// heapIO names the heap backend in the errors of its ReadAt, ReadFrom and WriteTo steps.
var heapIO = backend.IO{Name: "medium: heap", Invalid: ErrInvalid}

// Full-size chunks are reused across media through this pool.
var heapChunkPool = sync.Pool{New: func() any { b := make([]byte, 0, heapMaxChunk); return &b }}

type heapMedium struct {
	lc    backend.Lifecycle
	mu    sync.Mutex
	bytes []*heapBytes
}

// NewHeap returns the reference Medium: Bytes are chunked buffers on the Go heap. Closing it
// returns full-size chunks to a process-wide pool for reuse by later heap media.
func NewHeap() Medium {
	m := &heapMedium{}
	m.lc.OnClose(m.release)
	return m
}

func (m *heapMedium) NewBytes() (Bytes, error) {
	b := &heapBytes{m: m}
	added := m.lc.IfOpen(func() {
		m.mu.Lock()
		m.bytes = append(m.bytes, b)
		m.mu.Unlock()
	})
	if !added {
		return nil, fmt.Errorf("medium: heap: new bytes: %w", ErrClosed)
	}
	return b, nil
}

func (m *heapMedium) NewChild() (Medium, error) {
	child := NewHeap()
	if !m.lc.AddChild(child) {
		_ = child.Close()
		return nil, fmt.Errorf("medium: heap: new child: %w", ErrClosed)
	}
	return child, nil
}

func (m *heapMedium) OnClose(fn func() error) { m.lc.OnClose(fn) }
func (m *heapMedium) Close() error            { return m.lc.Close() }

// release drops every chunk; full-size ones go back to the pool.
func (m *heapMedium) release() error {
	m.mu.Lock()
	bs := m.bytes
	m.bytes = nil
	m.mu.Unlock()
	for _, b := range bs {
		for i, c := range b.chunks {
			if cap(c) == heapMaxChunk {
				c = c[:0]
				heapChunkPool.Put(&c)
			}
			b.chunks[i] = nil
		}
		b.chunks = nil
		b.starts = nil
	}
	return nil
}

type heapBytes struct {
	m      *heapMedium
	chunks [][]byte // every chunk but the last is full
	starts []int64  // starts[i] is the offset of chunks[i][0]
	size   int64
}

var (
	_ Bytes           = (*heapBytes)(nil)
	_ io.WriterTo     = (*heapBytes)(nil)
	_ io.ReaderFrom   = (*heapBytes)(nil)
	_ io.StringWriter = (*heapBytes)(nil)
)

func (b *heapBytes) Size() int64 { return b.size }

func (b *heapBytes) closedErr(op string) error {
	return fmt.Errorf("medium: heap: %s: %w", op, ErrClosed)
}

// tail returns the last chunk with room for at least one byte, adding a chunk if needed.
func (b *heapBytes) tail() []byte {
	if n := len(b.chunks); n > 0 && len(b.chunks[n-1]) < cap(b.chunks[n-1]) {
		return b.chunks[n-1]
	}
	size := heapMinChunk
	if n := len(b.chunks); n > 0 {
		size = min(2*cap(b.chunks[n-1]), heapMaxChunk)
	}
	var c []byte
	if size == heapMaxChunk {
		c = (*heapChunkPool.Get().(*[]byte))[:0]
	} else {
		c = make([]byte, 0, size)
	}
	b.chunks = append(b.chunks, c)
	b.starts = append(b.starts, b.size)
	return c
}

func (b *heapBytes) setTail(c []byte) { b.chunks[len(b.chunks)-1] = c }

func (b *heapBytes) Write(p []byte) (int, error) {
	if b.m.lc.Closed() {
		return 0, b.closedErr("write")
	}
	// Fast path: the write fits in the last chunk.
	if k := len(b.chunks); k > 0 {
		if c := b.chunks[k-1]; len(p) <= cap(c)-len(c) {
			b.chunks[k-1] = append(c, p...)
			b.size += int64(len(p))
			return len(p), nil
		}
	}
	n := len(p)
	for len(p) > 0 {
		c := b.tail()
		k := copy(c[len(c):cap(c)], p)
		b.setTail(c[:len(c)+k])
		b.size += int64(k)
		p = p[k:]
	}
	return n, nil
}

func (b *heapBytes) WriteString(s string) (int, error) {
	if b.m.lc.Closed() {
		return 0, b.closedErr("write")
	}
	n := len(s)
	for len(s) > 0 {
		c := b.tail()
		k := copy(c[len(c):cap(c)], s)
		b.setTail(c[:len(c)+k])
		b.size += int64(k)
		s = s[k:]
	}
	return n, nil
}

func (b *heapBytes) WriteByte(c byte) error {
	if b.m.lc.Closed() {
		return b.closedErr("write")
	}
	t := b.tail()
	b.setTail(append(t, c))
	b.size++
	return nil
}

// ReadFrom reads from r straight into the chunks until io.EOF. Bytes read before an error stay
// appended; the error is returned (io.EOF is not).
func (b *heapBytes) ReadFrom(r io.Reader) (int64, error) {
	if b.m.lc.Closed() {
		return 0, b.closedErr("read from")
	}
	var total int64
	for {
		c := b.tail()
		k, done, err := heapIO.ReadSome(r, c[len(c):cap(c)])
		b.setTail(c[:len(c)+k])
		b.size += int64(k)
		total += int64(k)
		if done {
			return total, err
		}
	}
}

func (b *heapBytes) WriteTo(w io.Writer) (int64, error) {
	if b.m.lc.Closed() {
		return 0, b.closedErr("write to")
	}
	var total int64
	for _, c := range b.chunks {
		if len(c) == 0 {
			continue
		}
		k, err := heapIO.WriteFull(w, c)
		total += int64(k)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (b *heapBytes) ReadAt(p []byte, off int64) (int, error) {
	if b.m.lc.Closed() {
		return 0, b.closedErr("read at")
	}
	if done, err := heapIO.ReadAtBounds(p, off, b.size); done {
		return 0, err
	}
	i := sort.Search(len(b.starts), func(i int) bool { return b.starts[i] > off }) - 1
	n := 0
	for ; i < len(b.chunks) && n < len(p); i++ {
		c := b.chunks[i]
		within := off + int64(n) - b.starts[i]
		n += copy(p[n:], c[within:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
