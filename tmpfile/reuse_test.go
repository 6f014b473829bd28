package tmpfile

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/faultfs"
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

// cycleChild makes a child with three Bytes, writes them interleaved in pieces of odd sizes
// (some of them larger than a buffer), checks every byte read back, and closes the child.
func cycleChild(t *testing.T, m *Medium, round int) {
	t.Helper()
	c, err := m.NewChild()
	require.NoError(t, err)
	const nb = 3
	bs := make([]medium.Bytes, nb)
	want := make([][]byte, nb)
	for i := range bs {
		bs[i], err = c.NewBytes()
		require.NoError(t, err)
	}
	sizes := []int{1000, 70_000, 3, 20_000, 150_000, 7_777}
	for step := range 12 {
		for i, b := range bs {
			p := make([]byte, sizes[(step+i)%len(sizes)])
			fillPattern(p, round*nb+i, len(want[i]))
			_, err := b.Write(p)
			require.NoError(t, err)
			want[i] = append(want[i], p...)
		}
	}
	for i, b := range bs {
		readBack(t, b, want[i])
	}
	require.NoError(t, c.Close())
}

// TestFreeSpaceReused: cycles of a child whose Bytes are written, read and closed leave the file
// at the size of one cycle: each reuses the space the one before freed.
func TestFreeSpaceReused(t *testing.T) {
	for _, fsName := range []string{"os", "memmap"} {
		t.Run("fs="+fsName, func(t *testing.T) {
			opts := Options{Dir: t.TempDir(), MinBufferSize: 4 << 10, BufferSize: 64 << 10}
			if fsName == "memmap" {
				opts.Fs, opts.Dir = afero.NewMemMapFs(), "/w"
				require.NoError(t, opts.Fs.MkdirAll("/w", 0o755))
			}
			m, err := New(opts)
			require.NoError(t, err)
			defer func() { require.NoError(t, m.Close()) }()
			cycleChild(t, m, 0)
			size := m.FileBytes()
			require.Positive(t, size)
			require.Equal(t, size, m.freeBytes(), "a closed child frees all its space")
			for round := 1; round < 10; round++ {
				cycleChild(t, m, round)
				require.Equal(t, size, m.FileBytes(), "round %d: the file did not grow", round)
				require.Equal(t, size, m.freeBytes())
			}
			if m.store.osFile != nil {
				fi, err := m.store.osFile.Stat()
				require.NoError(t, err)
				require.Equal(t, size, fi.Size(), "the file itself did not grow")
			}
		})
	}
}

// TestReusedSpaceHidesOldBytes: a Bytes placed in space a closed child freed reads back only its
// own bytes (ReadAt, WriteTo into memory and into a file with copy_file_range), never the old
// ones, whatever its size against the freed space.
func TestReusedSpaceHidesOldBytes(t *testing.T) {
	const bufSize = 4 << 10
	for _, n := range []int{0, 1, bufSize - 1, bufSize, bufSize + 1, 3*bufSize + 5, 9 * bufSize} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			dir := t.TempDir()
			m, err := New(Options{Dir: dir, MinBufferSize: 1 << 10, BufferSize: bufSize})
			require.NoError(t, err)
			defer func() { require.NoError(t, m.Close()) }()
			old, err := m.NewChild()
			require.NoError(t, err)
			ob, err := old.NewBytes()
			require.NoError(t, err)
			_, err = ob.Write(bytes.Repeat([]byte{'O'}, 8*bufSize))
			require.NoError(t, err)
			require.NoError(t, old.Close())
			freed := m.FileBytes()
			require.Equal(t, int64(8*bufSize), freed)

			c, err := m.NewChild()
			require.NoError(t, err)
			b, err := c.NewBytes()
			require.NoError(t, err)
			want := bytes.Repeat([]byte{'n'}, n)
			for i := 0; i < n; i += 1000 {
				_, err = b.Write(want[i:min(i+1000, n)])
				require.NoError(t, err)
			}
			readBack(t, b, want)
			f, err := os.Create(filepath.Join(dir, "out"))
			require.NoError(t, err)
			defer f.Close()
			k, err := b.WriteTo(f)
			require.NoError(t, err)
			require.Equal(t, int64(n), k)
			got, err := os.ReadFile(f.Name())
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
			require.Equal(t, max(freed, int64(n)-bufSize), m.FileBytes(), "placed in the freed space first")
			require.NoError(t, c.Close())
		})
	}
}

// TestPiecesAcrossFreeSpans: a write placed in several free spans (and the end of the file)
// reads back whole, and the spans coalesce when freed again.
func TestPiecesAcrossFreeSpans(t *testing.T) {
	m := memMedium(t, 64, 64, 1<<20)
	defer func() { require.NoError(t, m.Close()) }()
	// Three children written in turns: their extents alternate in the file.
	cs := make([]medium.Medium, 3)
	bs := make([]medium.Bytes, 3)
	for i := range cs {
		var err error
		cs[i], err = m.NewChild()
		require.NoError(t, err)
		bs[i], err = cs[i].NewBytes()
		require.NoError(t, err)
	}
	for range 10 {
		for i, b := range bs {
			_, err := b.Write(bytes.Repeat([]byte{byte('0' + i)}, 32))
			require.NoError(t, err)
		}
	}
	// 4 flushed extents of 64 each, the 5th in the buffer: 12 extents in the file.
	require.Equal(t, int64(12*64), m.FileBytes())
	require.NoError(t, cs[0].Close())
	require.NoError(t, cs[2].Close())
	require.Equal(t, int64(8*64), m.freeBytes())
	require.Len(t, m.store.free.spans, 5, "the spans of two children, coalesced where adjacent")

	c, err := m.NewChild()
	require.NoError(t, err)
	b, err := c.NewBytes()
	require.NoError(t, err)
	want := make([]byte, 10*64+3)
	fillPattern(want, 7, 0)
	_, err = b.Write(want) // larger than a buffer: straight to the file
	require.NoError(t, err)
	require.Zero(t, m.freeBytes(), "every free span was used")
	require.Equal(t, int64(12*64+2*64+3), m.FileBytes(), "the rest at the end")
	require.Greater(t, len(b.(*tmpBytes).extents), 4)
	readBack(t, b, want)
	readBack(t, bs[1], bytes.Repeat([]byte{'1'}, 5*64))
	require.NoError(t, c.Close())
	require.NoError(t, cs[1].Close())
	require.Equal(t, []span{{off: 0, n: m.FileBytes()}}, m.store.free.spans, "all free, one span")
}

// TestReuseWriteFails: a write whose first piece lands in free space and whose second piece,
// at the end of the file, fails keeps the first piece (Size, ReadAt, WriteTo), fails from then
// on, and gives the failed piece's space back.
func TestReuseWriteFails(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run("direct="+strconv.FormatBool(direct), func(t *testing.T) {
			base := afero.NewMemMapFs()
			require.NoError(t, base.MkdirAll("/w", 0o755))
			fsys := faultfs.New(base, nil)
			m, err := New(Options{Fs: fsys, Dir: "/w", MinBufferSize: 64, BufferSize: 64, BufferBudget: 1 << 20})
			require.NoError(t, err)
			defer func() { require.NoError(t, m.Close()) }()
			old, err := m.NewChild()
			require.NoError(t, err)
			ob, err := old.NewBytes()
			require.NoError(t, err)
			for range 4 {
				_, err = ob.Write(bytes.Repeat([]byte{'O'}, 40))
				require.NoError(t, err)
			}
			require.Equal(t, int64(128), m.FileBytes()) // two flushes of 64; 32 in the buffer
			require.NoError(t, old.Close())

			fsys.SetInjector(faultfs.FailWhen(func(op faultfs.Op) bool {
				return op.Kind == faultfs.KindWrite && op.Off >= 128
			}, syscall.ENOSPC))
			c, err := m.NewChild()
			require.NoError(t, err)
			b, err := c.NewBytes()
			require.NoError(t, err)
			want := make([]byte, 200)
			fillPattern(want, 1, 0)
			var kept int
			if direct {
				kept, err = b.Write(want) // 128 into the free space, 72 at the end: fails
				require.ErrorIs(t, err, syscall.ENOSPC)
				require.Equal(t, 128, kept)
			} else {
				// 100 straight into the free space, then fills of 64 in the buffer: the first
				// flush is split, 28 into the free space, 36 at the end: that piece fails.
				kept, err = b.Write(want[:100])
				require.NoError(t, err)
				for i := 100; i < len(want); i += 50 {
					k, werr := b.Write(want[i : i+50])
					kept += k
					if werr != nil {
						err = werr
						break
					}
				}
				require.ErrorIs(t, err, syscall.ENOSPC)
			}
			require.Equal(t, int64(kept), b.Size())
			readBack(t, b, want[:kept])
			_, err = b.Write([]byte("x"))
			require.ErrorIs(t, err, syscall.ENOSPC, "sticky")
			require.Equal(t, m.FileBytes()-128, m.freeBytes(), "the failed piece's space is free again")
			require.NoError(t, c.Close())
			require.Equal(t, m.FileBytes(), m.freeBytes())
		})
	}
}

// TestCloseReleasesAll: after cycles of children on the OS file system, closing the medium
// closes its one descriptor, leaves no file, drops every kept buffer and returns every byte of
// the buffer budget.
func TestCloseReleasesAll(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts /proc/self/fd")
	}
	before := countFDs(t)
	dir := t.TempDir()
	m, err := newWithCalls(Options{Dir: dir, MinBufferSize: 4 << 10, BufferSize: 64 << 10}, noTmpfile())
	require.NoError(t, err)
	for round := range 3 {
		cycleChild(t, m, round)
	}
	open, err := m.NewChild() // a child still open at Close
	require.NoError(t, err)
	ob, err := open.NewBytes()
	require.NoError(t, err)
	_, err = ob.Write(make([]byte, 200_000))
	require.NoError(t, err)
	require.Positive(t, keptMem(m))
	require.NoError(t, m.Close())
	require.Equal(t, before, countFDs(t))
	require.Empty(t, leftovers(t, afero.NewOsFs(), dir))
	require.Zero(t, keptMem(m))
	require.Zero(t, m.store.bufMem.Load())
	_, err = ob.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed)
	require.NoError(t, m.Close())
}

// TestReleaseCoalesces: extents released in any order, one or several at a time, leave the
// free space as sorted, disjoint spans with no two adjacent, holding exactly their bytes.
func TestReleaseCoalesces(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 3))
		// Cut [0, 4096) into pieces; release a random subset of them in a random order.
		var pieces []extent
		for off := int64(0); off < 4096; {
			n := min(1+r.Int64N(64), 4096-off)
			pieces = append(pieces, extent{off: off, n: n})
			off += n
		}
		r.Shuffle(len(pieces), func(i, j int) { pieces[i], pieces[j] = pieces[j], pieces[i] })
		pieces = pieces[:1+r.IntN(len(pieces))]
		st := &store{}
		free := make([]bool, 4096)
		for len(pieces) > 0 {
			k := 1 + r.IntN(min(3, len(pieces)))
			st.release(pieces[:k])
			for _, e := range pieces[:k] {
				for b := e.off; b < e.off+e.n; b++ {
					free[b] = true
				}
			}
			pieces = pieces[k:]
			var want []span
			var held int64
			for b := range free {
				if !free[b] {
					continue
				}
				held++
				if l := len(want); l > 0 && want[l-1].off+want[l-1].n == int64(b) {
					want[l-1].n++
				} else {
					want = append(want, span{off: int64(b), n: 1})
				}
			}
			require.Equal(t, want, st.free.spans, "seed %d", seed)
			require.Equal(t, held, st.free.bytes, "seed %d", seed)
		}
	}
}
