package tmpfile

import (
	"bytes"
	"io"
	"runtime"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/medium"
)

// memMedium is a tmpfile medium on a MemMapFs with the given buffer sizes.
func memMedium(t *testing.T, minBuf, bufSize int, budget int64) *Medium {
	t.Helper()
	fs := afero.NewMemMapFs()
	require.NoError(t, fs.MkdirAll("/w", 0o755))
	m, err := New(Options{Fs: fs, Dir: "/w", MinBufferSize: minBuf, BufferSize: bufSize, BufferBudget: budget})
	require.NoError(t, err)
	return m
}

// readBack checks that b holds exactly want, through ReadAt (whole, and one byte past the end)
// and WriteTo.
func readBack(t *testing.T, b medium.Bytes, want []byte) {
	t.Helper()
	require.Equal(t, int64(len(want)), b.Size())
	got := make([]byte, len(want)+1)
	n, err := b.ReadAt(got, 0)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, len(want), n)
	require.Equal(t, want, got[:n])
	var out bytes.Buffer
	k, err := b.WriteTo(&out)
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), k)
	require.Equal(t, string(want), out.String())
}

func keptMem(m *Medium) int64 {
	r := &m.store.recycle
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mem
}

func TestRecycledBufferStartsEmpty(t *testing.T) {
	m := memMedium(t, 16, 256, 4<<10)
	defer func() { require.NoError(t, m.Close()) }()

	a, err := m.NewChild()
	require.NoError(t, err)
	ba, err := a.NewBytes()
	require.NoError(t, err)
	_, err = ba.Write(bytes.Repeat([]byte{'a'}, 200)) // grows to the full 256
	require.NoError(t, err)
	require.NoError(t, a.Close())
	require.Equal(t, int64(256), keptMem(m), "the full-size buffer is kept")
	require.Equal(t, int64(256), m.store.bufMem.Load(), "and stays counted in the budget")

	c, err := m.NewChild()
	require.NoError(t, err)
	bc, err := c.NewBytes()
	require.NoError(t, err)
	readBack(t, bc, []byte{})
	_, err = bc.Write([]byte("xyz"))
	require.NoError(t, err)
	require.Zero(t, keptMem(m), "the new Bytes took the kept buffer")
	require.Equal(t, int64(256), m.store.bufMem.Load())
	readBack(t, bc, []byte("xyz"))
	// Filling the recycled buffer and flushing it: still only this Bytes' own bytes.
	want := append([]byte("xyz"), bytes.Repeat([]byte{'c'}, 600)...)
	_, err = bc.Write(want[3:])
	require.NoError(t, err)
	readBack(t, bc, want)
	require.NoError(t, c.Close())
}

func TestKeptBuffersYield(t *testing.T) {
	const bufSize, budget = 256, 4 << 10
	m := memMedium(t, 16, bufSize, budget)
	defer func() { require.NoError(t, m.Close()) }()

	// Phase 1: 16 full buffers, the whole budget, in memory.
	fill := func(md medium.Medium, n int, c byte) []medium.Bytes {
		bs := make([]medium.Bytes, n)
		for i := range bs {
			b, err := md.NewBytes()
			require.NoError(t, err)
			for range bufSize / 64 { // in pieces: a write of a whole buffer goes to the file
				_, err = b.Write(bytes.Repeat([]byte{c + byte(i)}, 64))
				require.NoError(t, err)
			}
			bs[i] = b
		}
		return bs
	}
	early, err := m.NewBytes() // started before anything is kept: a small buffer
	require.NoError(t, err)
	require.NoError(t, early.WriteByte('e'))
	a, err := m.NewChild()
	require.NoError(t, err)
	fill(a, budget/bufSize-1, 'A')
	require.Zero(t, m.FileBytes(), "16 x 256 bytes fit the budget")
	require.NoError(t, a.Close())
	require.Equal(t, int64(budget/2), keptMem(m), "half of the budget is kept, the rest dropped")
	require.Equal(t, int64(budget/2+16), m.store.bufMem.Load())
	// A live Bytes that grows takes a kept buffer instead of allocating one.
	_, err = early.Write(bytes.Repeat([]byte{'e'}, 20))
	require.NoError(t, err)
	require.Equal(t, int64(budget/2-bufSize), keptMem(m))
	require.Equal(t, int64(budget/2), m.store.bufMem.Load(), "its small buffer went back to the budget")
	readBack(t, early, bytes.Repeat([]byte{'e'}, 21))

	// Phase 2: live Bytes get the whole budget again, kept buffers included: nothing spills.
	b, err := m.NewChild()
	require.NoError(t, err)
	bs := fill(b, budget/bufSize-1, 'a')
	require.Zero(t, m.FileBytes(), "the kept buffers did not cost the live ones their budget")
	require.Zero(t, keptMem(m))
	require.Equal(t, int64(budget), m.store.bufMem.Load())
	for i, x := range bs {
		readBack(t, x, bytes.Repeat([]byte{'a' + byte(i)}, bufSize))
	}
	// Over the budget now: the next Bytes stays small and spills to the file.
	x, err := b.NewBytes()
	require.NoError(t, err)
	_, err = x.Write(bytes.Repeat([]byte{'z'}, 100))
	require.NoError(t, err)
	require.Positive(t, m.FileBytes())
	readBack(t, x, bytes.Repeat([]byte{'z'}, 100))
	require.NoError(t, b.Close())
	require.Equal(t, int64(budget/2), keptMem(m))

	// Close drops what is kept and keeps nothing after.
	require.NoError(t, m.Close())
	require.Zero(t, keptMem(m))
	require.Zero(t, m.store.bufMem.Load(), "every buffer returned to the budget")
}

// TestRecycleAllocations: a cycle of child, Bytes, a write of 1.5 buffers, close allocates no
// new buffer once a full one is kept (without recycling: 4+8+16+32+64 KiB per cycle).
func TestRecycleAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	const bufSize = 64 << 10
	m, err := New(Options{Dir: t.TempDir(), MinBufferSize: 4 << 10, BufferSize: bufSize})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	p := bytes.Repeat([]byte{'p'}, bufSize+bufSize/2)
	cycle := func() {
		c, err := m.NewChild()
		require.NoError(t, err)
		b, err := c.NewBytes()
		require.NoError(t, err)
		for i := 0; i < len(p); i += 4 << 10 {
			_, err = b.Write(p[i : i+4<<10])
			require.NoError(t, err)
		}
		require.NoError(t, c.Close())
	}
	cycle()
	const cycles = 100
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range cycles {
		cycle()
	}
	runtime.ReadMemStats(&after)
	perCycle := (after.TotalAlloc - before.TotalAlloc) / cycles
	t.Logf("%d bytes allocated per cycle", perCycle)
	require.Less(t, perCycle, uint64(bufSize/8))
}
