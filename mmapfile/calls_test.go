//go:build linux

package mmapfile

import (
	"bytes"
	"errors"
	"fmt"
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

// TestConformanceRecorded runs the conformance suite with every call checked, in every
// durability mode, with pacing (TrickleBytes) on and off: never an msync (stages are never
// synced); every mapping unmapped in the end.
func TestConformanceRecorded(t *testing.T) {
	f := func(name string, opts Options) {
		t.Run(name, func(t *testing.T) {
			if raceEnabled {
				// The recorded runs check the system calls, which the detector does not
				// change; TestConformance runs the suite under it (TestPacing* the paced path).
				t.Skip("the recorded modes run without -race")
			}
			r := &recorder{}
			mediumtest.Run(t, func(t *testing.T) medium.Medium { return newRecorded(t, r, opts) })
			r.checkAllReleased(t)
			mmaps, _, msyncs := r.counts()
			t.Logf("%s: %d mmaps, %d msyncs, %d fallocates", name, mmaps, msyncs, r.fallocCount())
			require.Greater(t, mmaps, 0)
			require.Zero(t, msyncs, "msync of a stage")
		})
	}
	f("durability=output", Options{WindowSize: 64 << 10})
	f("durability=none", Options{WindowSize: 64 << 10, Durability: medium.Durability{Sync: medium.SyncNone}})
	f("durability=all", Options{WindowSize: 64 << 10, Durability: medium.Durability{Sync: medium.SyncAll}})
	f("durability=all/trickle=5000", Options{WindowSize: 64 << 10,
		Durability: medium.Durability{Sync: medium.SyncAll, TrickleBytes: 5000}})
	f("durability=none/trickle=4096", Options{WindowSize: 64 << 10,
		Durability: medium.Durability{Sync: medium.SyncNone, TrickleBytes: 4096}})
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
	var end int64
	for _, mb := range bs {
		b := mb.(*bytesImpl)
		end = max(end, b.exts[len(b.exts)-1].fileOff()+int64(b.filled))
	}
	require.Equal(t, end, fi.Size(), "the zeros extend the file over every prefilled chunk")
	require.LessOrEqual(t, end, m.next)
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

// TestWriteToBuffered: WriteTo copies the mapping out through its buffer, at most copyChunk
// bytes a Write call, never handing the destination the mapped memory (write(2) from a shared
// file mapping is several times slower than from the Go heap), and the bytes arrive in order.
func TestWriteToBuffered(t *testing.T) {
	m := newRecorded(t, &recorder{}, Options{WindowSize: 256 << 10})
	defer func() { require.NoError(t, m.Close()) }()
	mb, err := m.NewBytes()
	require.NoError(t, err)
	b := mb.(*bytesImpl)
	data := make([]byte, 1<<20+5)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	_, err = b.Write(data)
	require.NoError(t, err)
	require.Greater(t, len(b.exts), 1)
	var got []byte
	writes := 0
	w := writerFunc(func(p []byte) (int, error) {
		writes++
		require.LessOrEqual(t, len(p), copyChunk)
		for i := range b.exts {
			lo, hi := addrOf(b.exts[i].mem), addrOf(b.exts[i].mem)+uintptr(len(b.exts[i].mem))
			require.False(t, addrOf(p) >= lo && addrOf(p) < hi, "write %d hands over extent %d's mapped memory", writes, i)
		}
		got = append(got, p...)
		return len(p), nil
	})
	n, err := b.WriteTo(w)
	require.NoError(t, err)
	require.Equal(t, b.Size(), n)
	require.Equal(t, data, got)
	require.GreaterOrEqual(t, writes, len(data)/copyChunk)
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
