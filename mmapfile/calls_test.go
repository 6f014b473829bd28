//go:build linux

package mmapfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/medium/mediumtest"
)

// These tests replace the medium's system calls (bar 5 of issue 3): a recorder wraps the real
// calls, checks the msync rules on every call and injects failures.

var page = os.Getpagesize()

type mapping struct {
	addr, n uintptr
	prot    int
	live    bool
}

type msyncCall struct{ addr, n uintptr }

// recorder wraps sys.Default. Its failure hooks, when set, decide a call's result; they run with
// the recorder locked.
type recorder struct {
	mu         sync.Mutex
	maps       []*mapping
	msyncs     []msyncCall
	munmaps    []uintptr
	fallocs    int
	violations []string

	failMmap      func(i int) error // i counts Mmap calls from 0
	failMsync     func() error
	failMunmap    func(addr uintptr) error // the mapping is unmapped for real first
	failFallocate func(i int) error        // i counts Fallocate calls from 0; an error reserves nothing
	tmpfileErr    error                    // returned by OpenTmpfile instead of opening
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func (r *recorder) calls() *sys.Calls {
	base := sys.Default
	c := base
	c.Mmap = func(fd int, off int64, n int, prot, flags int) ([]byte, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.failMmap != nil {
			if err := r.failMmap(len(r.maps)); err != nil {
				r.maps = append(r.maps, &mapping{}) // counted, never live
				return nil, err
			}
		}
		b, err := base.Mmap(fd, off, n, prot, flags)
		if err == nil {
			r.maps = append(r.maps, &mapping{addr: addrOf(b), n: uintptr(len(b)), prot: prot, live: true})
		}
		return b, err
	}
	c.Munmap = func(b []byte) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		a := addrOf(b)
		r.munmaps = append(r.munmaps, a)
		if mp := r.find(a, uintptr(len(b))); mp == nil || mp.addr != a || mp.n != uintptr(len(b)) {
			r.violations = append(r.violations, fmt.Sprintf("munmap of %#x+%d: not a whole live mapping", a, len(b)))
		} else {
			mp.live = false
		}
		err := base.Munmap(b)
		if err == nil && r.failMunmap != nil {
			err = r.failMunmap(a)
		}
		return err
	}
	c.Msync = func(b []byte, flags int) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		a := addrOf(b)
		r.msyncs = append(r.msyncs, msyncCall{a, uintptr(len(b))})
		switch mp := r.find(a, uintptr(len(b))); {
		case len(b) == 0:
			r.violations = append(r.violations, fmt.Sprintf("msync of an empty range at %#x", a))
		case a%uintptr(page) != 0:
			r.violations = append(r.violations, fmt.Sprintf("msync at %#x: not page-aligned", a))
		case mp == nil:
			r.violations = append(r.violations, fmt.Sprintf("msync of %#x+%d: not inside a live mapping", a, len(b)))
		case mp.prot&sys.ProtWrite == 0:
			r.violations = append(r.violations, fmt.Sprintf("msync of %#x+%d: a read-only mapping", a, len(b)))
		}
		if r.failMsync != nil {
			if err := r.failMsync(); err != nil {
				return err
			}
		}
		return base.Msync(b, flags)
	}
	c.Fallocate = func(f *os.File, off, n int64) error {
		r.mu.Lock()
		i := r.fallocs
		r.fallocs++
		fail := r.failFallocate
		r.mu.Unlock()
		if fail != nil {
			if err := fail(i); err != nil {
				return err
			}
		}
		return base.Fallocate(f, off, n)
	}
	c.OpenTmpfile = func(dir string) (*os.File, error) {
		if r.tmpfileErr != nil {
			return nil, r.tmpfileErr
		}
		return base.OpenTmpfile(dir)
	}
	return &c
}

// find returns the live mapping that holds [a, a+n), or nil.
func (r *recorder) find(a, n uintptr) *mapping {
	for _, mp := range r.maps {
		if mp.live && a >= mp.addr && a+n <= mp.addr+mp.n {
			return mp
		}
	}
	return nil
}

func (r *recorder) fallocCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fallocs
}

func (r *recorder) counts() (mmaps, live, msyncs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, mp := range r.maps {
		if mp.addr != 0 {
			mmaps++
		}
		if mp.live {
			live++
		}
	}
	return mmaps, live, len(r.msyncs)
}

// check fails t on any rule broken so far and on a mapping still live.
func (r *recorder) checkAllReleased(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.violations)
	for _, mp := range r.maps {
		require.False(t, mp.live, "mapping %#x+%d never unmapped", mp.addr, mp.n)
	}
}

func newRecorded(t *testing.T, r *recorder, opts Options) *Medium {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	m, err := newMedium(opts, r.calls())
	require.NoError(t, err)
	return m
}

func requireDirEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents, "files left in %s", dir)
}

// requireFileClosed checks that the medium's temp file descriptor is closed.
func requireFileClosed(t *testing.T, m *Medium) {
	t.Helper()
	require.Equal(t, ^uintptr(0), m.f.Fd(), "the temp file is still open")
}

// TestConformanceRecorded runs the conformance suite with every call checked: no msync at all
// unless SyncAll, and with SyncAll only page-aligned msyncs of live writable mappings; every
// mapping unmapped in the end.
func TestConformanceRecorded(t *testing.T) {
	f := func(name string, opts Options, wantMsync bool) {
		t.Run(name, func(t *testing.T) {
			r := &recorder{}
			mediumtest.Run(t, func(t *testing.T) medium.Medium { return newRecorded(t, r, opts) })
			r.checkAllReleased(t)
			mmaps, _, msyncs := r.counts()
			t.Logf("%s: %d mmaps, %d msyncs, %d fallocates", name, mmaps, msyncs, r.fallocCount())
			require.Greater(t, mmaps, 0)
			if wantMsync {
				require.Greater(t, msyncs, 0)
			} else {
				require.Zero(t, msyncs, "msync without SyncAll")
			}
		})
	}
	f("durability=output", Options{WindowSize: 64 << 10}, false)
	f("durability=all", Options{WindowSize: 64 << 10, Durability: medium.Durability{Sync: medium.SyncAll}}, true)
	f("durability=all/trickle=5000", Options{WindowSize: 64 << 10,
		Durability: medium.Durability{Sync: medium.SyncAll, TrickleBytes: 5000}}, true)
	f("durability=none/trickle=4096", Options{WindowSize: 64 << 10,
		Durability: medium.Durability{Sync: medium.SyncNone, TrickleBytes: 4096}}, false)
}

// coverage returns the addresses of the logical bytes [from, to) of b as ranges.
func coverage(b *bytesImpl, from, to int64) [][2]uintptr {
	var out [][2]uintptr
	for i, e := range b.exts {
		lo, hi := max(from, e.start), min(to, e.start+int64(b.used(i)))
		if lo < hi {
			base := addrOf(e.mem)
			out = append(out, [2]uintptr{base + uintptr(lo-e.start), base + uintptr(hi-e.start)})
		}
	}
	return out
}

func TestMsyncAligned(t *testing.T) {
	s := rand.Uint64()
	t.Logf("seed %d", s)
	rng := rand.New(rand.NewPCG(s, 1))
	r := &recorder{}
	m := newRecorded(t, r, Options{WindowSize: 4 * int64(page), Durability: medium.Durability{Sync: medium.SyncAll}})
	defer func() { require.NoError(t, m.Close()) }()
	mb1, err := m.NewBytes()
	require.NoError(t, err)
	mb2, err := m.NewBytes()
	require.NoError(t, err)
	bs := []*bytesImpl{mb1.(*bytesImpl), mb2.(*bytesImpl)}
	var models [2]bytes.Buffer

	for round := range 60 {
		i := rng.IntN(2)
		b := bs[i]
		from := b.Size()
		n := 1 + rng.IntN(3*page)
		if round < 2 {
			n = 10 // starts unaligned from the second write on
		}
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		_, err := b.Write(p)
		require.NoError(t, err)
		models[i].Write(p)
		to := b.Size()

		_, _, before := r.counts()
		got := make([]byte, 1)
		_, err = b.ReadAt(got, to-1)
		require.NoError(t, err)
		r.mu.Lock()
		calls := append([]msyncCall(nil), r.msyncs[before:]...)
		r.mu.Unlock()
		require.NotEmpty(t, calls, "a read-back after a write of %d bytes at offset %d msyncs", n, from)
		for _, c := range calls {
			require.Zero(t, c.addr%uintptr(page), "msync address %#x is not page-aligned (write at offset %d)", c.addr, from)
		}
		// Every written byte is in some msynced range, and the ranges are no wider than the pages
		// of the written bytes.
		for _, rg := range coverage(b, from, to) {
			for a := rg[0]; a < rg[1]; {
				covered := false
				for _, c := range calls {
					if a >= c.addr && a < c.addr+c.n {
						a = min(c.addr+c.n, rg[1])
						covered = true
						break
					}
				}
				require.True(t, covered, "byte at %#x written at offset %d..%d not msynced: %v", a, from, to, calls)
			}
		}
		for _, c := range calls {
			first := c.addr
			inWrite := false
			for _, rg := range coverage(b, from, to) {
				if c.addr+c.n > rg[0] && c.addr < rg[1] && rg[0]-c.addr < uintptr(page) {
					inWrite = true
				}
			}
			require.True(t, inWrite, "msync %#x+%d is not the written range extended to the page", first, c.n)
		}
		// A second read-back with nothing new written makes no msync.
		_, _, mid := r.counts()
		_, err = b.WriteTo(io.Discard)
		require.NoError(t, err)
		_, _, after := r.counts()
		require.Equal(t, mid, after, "msync of bytes already synced")
	}
	for i, b := range bs {
		var got bytes.Buffer
		_, err := b.WriteTo(&got)
		require.NoError(t, err)
		require.True(t, bytes.Equal(models[i].Bytes(), got.Bytes()))
	}
	r.mu.Lock()
	require.Empty(t, r.violations)
	r.mu.Unlock()
}

// TestMsyncNever checks that empty, read-only and unmapped ranges and closed media are never
// msynced.
func TestMsyncNever(t *testing.T) {
	all := medium.Durability{Sync: medium.SyncAll}

	t.Run("empty", func(t *testing.T) {
		r := &recorder{}
		m := newRecorded(t, r, Options{Durability: all})
		b, err := m.NewBytes()
		require.NoError(t, err)
		_, err = b.Write(nil)
		require.NoError(t, err)
		_, err = b.ReadAt(make([]byte, 4), 0)
		require.ErrorIs(t, err, io.EOF)
		n, err := b.WriteTo(io.Discard)
		require.NoError(t, err)
		require.Zero(t, n)
		// A region with nothing in it (a reader that returned no bytes) is not msynced either.
		_, err = b.ReadFrom(bytes.NewReader(nil))
		require.NoError(t, err)
		_, err = b.WriteTo(io.Discard)
		require.NoError(t, err)
		require.NoError(t, m.Close())
		_, _, msyncs := r.counts()
		require.Zero(t, msyncs)
		r.checkAllReleased(t)
	})

	t.Run("closed", func(t *testing.T) {
		r := &recorder{}
		m := newRecorded(t, r, Options{Durability: all, WindowSize: 64 << 10})
		b, err := m.NewBytes()
		require.NoError(t, err)
		_, err = b.Write(make([]byte, 200<<10))
		require.NoError(t, err)
		require.NoError(t, m.Close())
		_, err = b.ReadAt(make([]byte, 4), 0)
		require.ErrorIs(t, err, medium.ErrClosed)
		_, err = b.WriteTo(io.Discard)
		require.ErrorIs(t, err, medium.ErrClosed)
		require.NoError(t, m.Close())
		_, _, msyncs := r.counts()
		require.Zero(t, msyncs, "msync at or after Close")
		r.checkAllReleased(t)
	})

	t.Run("read-only, unmapped and empty windows", func(t *testing.T) {
		r := &recorder{}
		m := newRecorded(t, r, Options{Durability: all})
		defer func() { require.NoError(t, m.Close()) }()
		b, err := m.NewBytes()
		require.NoError(t, err)
		_, err = b.Write(make([]byte, 10))
		require.NoError(t, err)
		c := r.calls()
		ro, err := c.Mmap(int(m.f.Fd()), 0, page, sys.ProtRead, sys.MapShared)
		require.NoError(t, err)
		roWin := &window{mem: ro, prot: sys.ProtRead}
		require.NoError(t, m.msync(roWin, 0, 10), "read-only")
		require.NoError(t, c.Munmap(ro))

		w := b.(*bytesImpl).exts[0].win
		require.NoError(t, m.msync(w, 0, 0), "empty range")
		require.NoError(t, m.msync(&window{prot: sys.ProtRead | sys.ProtWrite}, 0, 0), "empty window")
		gone := &window{mem: w.mem, prot: w.prot}
		gone.unmapped.Store(true)
		require.NoError(t, m.msync(gone, 0, 10), "unmapped window")
		_, _, msyncs := r.counts()
		require.Zero(t, msyncs)

		require.NoError(t, m.msync(w, 3, 5), "a live writable window is synced")
		_, _, msyncs = r.counts()
		require.Equal(t, 1, msyncs)
		r.mu.Lock()
		require.Empty(t, r.violations)
		require.Equal(t, addrOf(w.mem), r.msyncs[0].addr)
		require.GreaterOrEqual(t, r.msyncs[0].n, uintptr(8))
		r.mu.Unlock()
	})
}

// TestMsyncFails: a failed msync is an error wrapping ErrSync and the system's error, is never
// retried, and Close still unmaps every window and removes the file.
func TestMsyncFails(t *testing.T) {
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprintf("named=%t", named), func(t *testing.T) {
			r := &recorder{failMsync: func() error { return syscall.EIO }}
			if named {
				r.tmpfileErr = fmt.Errorf("%w: test", sys.ErrUnsupported)
			}
			dir := t.TempDir()
			m := newRecorded(t, r, Options{Dir: dir, WindowSize: 64 << 10, Durability: medium.Durability{Sync: medium.SyncAll}})
			b1, err := m.NewBytes()
			require.NoError(t, err)
			b2, err := m.NewBytes()
			require.NoError(t, err)
			for range 5 {
				_, err = b1.Write(make([]byte, 30<<10))
				require.NoError(t, err)
				_, err = b2.Write(make([]byte, 30<<10))
				require.NoError(t, err)
			}
			requireDirEmpty(t, dir)

			_, err = b1.ReadAt(make([]byte, 10), 100)
			require.ErrorIs(t, err, medium.ErrSync)
			require.ErrorIs(t, err, syscall.EIO)
			t.Logf("msync failure: %v", err)
			_, _, msyncs := r.counts()
			require.Equal(t, 1, msyncs)

			// Never retried: every later call on b1 returns the error without a new msync.
			_, err2 := b1.ReadAt(make([]byte, 10), 100)
			require.Equal(t, err, err2)
			_, err2 = b1.WriteTo(io.Discard)
			require.Equal(t, err, err2)
			_, err2 = b1.Write([]byte("x"))
			require.Equal(t, err, err2)
			_, _, msyncs = r.counts()
			require.Equal(t, 1, msyncs, "msync retried")

			// b2 fails the same way on its own read-back.
			_, err = b2.WriteTo(io.Discard)
			require.ErrorIs(t, err, medium.ErrSync)

			mmaps, live, _ := r.counts()
			require.Greater(t, mmaps, 2)
			require.Equal(t, mmaps, live)
			require.NoError(t, m.Close())
			r.checkAllReleased(t)
			require.Len(t, r.munmaps, mmaps, "munmap once for every mapping")
			requireFileClosed(t, m)
			requireDirEmpty(t, dir)
			require.NoError(t, m.Close())
		})
	}
}

// TestMunmapFails: Close unmaps every window and closes the file even when munmap fails, and
// returns the first failure with the others joined behind it.
func TestMunmapFails(t *testing.T) {
	errA, errB := errors.New("munmap A"), errors.New("munmap B")
	var failed []uintptr
	r := &recorder{}
	r.failMunmap = func(addr uintptr) error {
		failed = append(failed, addr)
		switch len(failed) {
		case 1:
			return errA
		case 3:
			return errB
		}
		return nil
	}
	dir := t.TempDir()
	m := newRecorded(t, r, Options{Dir: dir, WindowSize: 64 << 10})
	b, err := m.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 1<<20))
	require.NoError(t, err)
	err = m.Close()
	require.ErrorIs(t, err, errA)
	require.ErrorIs(t, err, errB)
	require.Regexp(t, "^(?s)mmapfile: munmap .*munmap A.*munmap B", err.Error())
	r.checkAllReleased(t)
	requireFileClosed(t, m)
	requireDirEmpty(t, dir)
	require.NoError(t, m.Close(), "a second Close")
}

// TestFallocateENOSPC: when the file system has no room, the write that needs the space fails
// with ENOSPC; nothing is written through the mapping past the reserved space (which would be a
// SIGBUS: the failing Fallocate here reserves nothing, so the file ends where the reserved
// space ends), and the bytes written before read back intact.
func TestFallocateENOSPC(t *testing.T) {
	for _, okCalls := range []int{0, 1, 5, 12} {
		t.Run(fmt.Sprintf("ok=%d", okCalls), func(t *testing.T) {
			r := &recorder{failFallocate: func(i int) error {
				if i >= okCalls {
					return &os.PathError{Op: "fallocate", Path: "test", Err: syscall.ENOSPC}
				}
				return nil
			}}
			m := newRecorded(t, r, Options{WindowSize: 256 << 10})
			defer func() { require.NoError(t, m.Close()) }()
			mb, err := m.NewBytes()
			require.NoError(t, err)
			b := mb.(*bytesImpl)
			var model bytes.Buffer
			p := make([]byte, 3000)
			var werr error
			for i := 0; werr == nil; i++ {
				for j := range p {
					p[j] = byte(i + j)
				}
				var n int
				n, werr = b.Write(p)
				model.Write(p[:n])
				require.Equal(t, int64(model.Len()), b.Size())
			}
			require.ErrorIs(t, werr, syscall.ENOSPC)
			t.Logf("after %d bytes: %v", model.Len(), werr)

			fi, err := m.f.Stat()
			require.NoError(t, err)
			require.Equal(t, m.next, fi.Size(), "the file ends where the reserved space ends")
			require.LessOrEqual(t, b.Size(), fi.Size())

			// Sticky, with no new attempt to reserve.
			before := r.fallocCount()
			_, err = b.Write([]byte("more"))
			require.ErrorIs(t, err, syscall.ENOSPC)
			require.ErrorIs(t, b.WriteByte('x'), syscall.ENOSPC)
			_, err = b.ReadFrom(bytes.NewReader([]byte("more")))
			require.ErrorIs(t, err, syscall.ENOSPC)
			require.Equal(t, before, r.fallocCount())

			// What was written reads back.
			got := make([]byte, model.Len())
			k, err := b.ReadAt(got, 0)
			if model.Len() > 0 {
				require.NoError(t, err)
			}
			require.Equal(t, model.Len(), k)
			require.True(t, bytes.Equal(model.Bytes(), got))
			var out bytes.Buffer
			_, err = b.WriteTo(&out)
			require.NoError(t, err)
			require.True(t, bytes.Equal(model.Bytes(), out.Bytes()))

			// Another Bytes fails on its first byte and holds nothing.
			other, err := m.NewBytes()
			require.NoError(t, err)
			require.ErrorIs(t, other.WriteByte(1), syscall.ENOSPC)
			require.Zero(t, other.Size())
		})
	}
}

// TestFallocateUnsupported: where the file system has no fallocate, space is reserved by writing
// zeros alone, and fallocate is not tried again.
func TestFallocateUnsupported(t *testing.T) {
	r := &recorder{failFallocate: func(int) error {
		return &os.PathError{Op: "fallocate", Path: "test", Err: syscall.EOPNOTSUPP}
	}}
	m := newRecorded(t, r, Options{WindowSize: 64 << 10})
	rng := rand.New(rand.NewPCG(7, 7))
	var bs []medium.Bytes
	var models []bytes.Buffer
	for range 3 {
		b, err := m.NewBytes()
		require.NoError(t, err)
		bs = append(bs, b)
		models = append(models, bytes.Buffer{})
	}
	for range 300 {
		i := rng.IntN(len(bs))
		p := make([]byte, rng.IntN(20<<10))
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		_, err := bs[i].Write(p)
		require.NoError(t, err)
		models[i].Write(p)
	}
	require.Equal(t, 1, r.fallocCount(), "fallocate tried once per medium")
	require.True(t, m.zeroFill)
	for i, b := range bs {
		var got bytes.Buffer
		_, err := b.WriteTo(&got)
		require.NoError(t, err)
		require.True(t, bytes.Equal(models[i].Bytes(), got.Bytes()))
	}
	fi, err := m.f.Stat()
	require.NoError(t, err)
	require.Equal(t, m.next, fi.Size(), "the zeros extend the file over every region")
	require.NoError(t, m.Close())
	r.checkAllReleased(t)
}

// TestMmapFails: a failed mapping of a new window fails the write that needed it; the bytes
// before read back and Close releases the rest.
func TestMmapFails(t *testing.T) {
	r := &recorder{failMmap: func(i int) error {
		if i == 2 {
			return syscall.ENOMEM
		}
		return nil
	}}
	m := newRecorded(t, r, Options{WindowSize: 64 << 10})
	b, err := m.NewBytes()
	require.NoError(t, err)
	data := make([]byte, 200<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	n, err := b.Write(data)
	require.ErrorIs(t, err, syscall.ENOMEM)
	require.Equal(t, 128<<10, n)
	got := make([]byte, n)
	_, err = b.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, data[:n], got)
	require.NoError(t, m.Close())
	r.checkAllReleased(t)
}

func TestOpenTmpfile(t *testing.T) {
	t.Run("fallback to a named file unlinked at once", func(t *testing.T) {
		dir := t.TempDir()
		r := &recorder{tmpfileErr: fmt.Errorf("%w: test", sys.ErrUnsupported)}
		m := newRecorded(t, r, Options{Dir: dir})
		requireDirEmpty(t, dir)
		require.Contains(t, m.f.Name(), "writeout-mmapfile-")
		b, err := m.NewBytes()
		require.NoError(t, err)
		_, err = b.WriteString("hello")
		require.NoError(t, err)
		requireDirEmpty(t, dir)
		require.NoError(t, m.Close())
		requireFileClosed(t, m)
	})
	t.Run("other errors fail New", func(t *testing.T) {
		r := &recorder{tmpfileErr: syscall.EACCES}
		_, err := newMedium(Options{Dir: t.TempDir()}, r.calls())
		require.ErrorIs(t, err, syscall.EACCES)
	})
}

// TestWriteToZeroCopy: WriteTo hands the destination one Write per extent, straight from the
// mapping.
func TestWriteToZeroCopy(t *testing.T) {
	m := newRecorded(t, &recorder{}, Options{WindowSize: 256 << 10})
	defer func() { require.NoError(t, m.Close()) }()
	mb, err := m.NewBytes()
	require.NoError(t, err)
	b := mb.(*bytesImpl)
	_, err = b.Write(make([]byte, 1<<20+5))
	require.NoError(t, err)
	var writes [][]byte
	w := writerFunc(func(p []byte) (int, error) { writes = append(writes, p); return len(p), nil })
	n, err := b.WriteTo(w)
	require.NoError(t, err)
	require.Equal(t, b.Size(), n)
	require.Len(t, writes, len(b.exts))
	for i, p := range writes {
		require.Equal(t, addrOf(b.exts[i].mem), addrOf(p), "write %d is not the mapped extent", i)
		require.Equal(t, b.used(i), len(p))
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestSmallBytesCostAPage: many small Bytes share one window, a page each.
func TestSmallBytesCostAPage(t *testing.T) {
	r := &recorder{}
	m := newRecorded(t, r, Options{})
	defer func() { require.NoError(t, m.Close()) }()
	for range 1000 {
		b, err := m.NewBytes()
		require.NoError(t, err)
		_, err = b.WriteString("a few bytes")
		require.NoError(t, err)
	}
	require.Equal(t, int64(1000*page), m.next)
	mmaps, _, _ := r.counts()
	require.Equal(t, 1, mmaps)
	// An empty Bytes costs nothing.
	_, err := m.NewBytes()
	require.NoError(t, err)
	require.Equal(t, int64(1000*page), m.next)
}

// TestWindowsNeverMove: bytes written early stay at the same address while the file grows.
func TestWindowsNeverMove(t *testing.T) {
	m := newRecorded(t, &recorder{}, Options{WindowSize: 64 << 10})
	defer func() { require.NoError(t, m.Close()) }()
	mb, err := m.NewBytes()
	require.NoError(t, err)
	b := mb.(*bytesImpl)
	_, err = b.WriteString("first")
	require.NoError(t, err)
	first := addrOf(b.exts[0].mem)
	_, err = b.Write(make([]byte, 5<<20))
	require.NoError(t, err)
	require.Equal(t, first, addrOf(b.exts[0].mem))
	require.Greater(t, len(m.windows), 50)
	got := make([]byte, 5)
	_, err = b.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, "first", string(got))
}
