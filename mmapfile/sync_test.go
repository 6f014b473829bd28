//go:build linux

package mmapfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// These tests pin issue 12's rules for mmapfile: Syncs counts every msync, a failed sync is
// sticky for the whole file, and TrickleBytes paces the writeback of a Bytes' windows.

// merger.mergeSources adds the Syncs of a medium that has the method to Result.Syncs.
var _ interface{ Syncs() int64 } = (*Medium)(nil)

// srfCall is one recorded sync_file_range call.
type srfCall struct {
	f      *os.File
	off, n int64
	flags  int
}

func (c srfCall) String() string {
	return fmt.Sprintf("sync_file_range(%d, %d, %s)", c.off, c.n, flagName(c.flags))
}

func flagName(flags int) string {
	switch flags {
	case sys.SyncFileRangeWrite:
		return "WRITE"
	case sys.SyncFileRangeWaitBefore:
		return "WAIT_BEFORE"
	}
	return fmt.Sprintf("flags %#x", flags)
}

// srfRecorder wraps a recorder's calls and records every SyncFileRange and Msync.
type srfRecorder struct {
	mu     sync.Mutex
	srf    []srfCall
	msyncs int
	events []string              // "falloc END" and "srf END" (END: the range's end offset), in order
	fail   func(c srfCall) error // decides a call's result before the real call; nil: real
}

func (s *srfRecorder) wrap(c *sys.Calls) *sys.Calls {
	base := *c
	out := base
	out.SyncFileRange = func(f *os.File, off, n int64, flags int) error {
		call := srfCall{f: f, off: off, n: n, flags: flags}
		s.mu.Lock()
		fail := s.fail
		s.mu.Unlock()
		if fail != nil {
			if err := fail(call); err != nil {
				s.mu.Lock()
				s.srf = append(s.srf, call)
				s.mu.Unlock()
				return err
			}
		}
		s.mu.Lock()
		s.srf = append(s.srf, call)
		s.events = append(s.events, fmt.Sprintf("srf %d", off+n))
		s.mu.Unlock()
		return base.SyncFileRange(f, off, n, flags)
	}
	out.Fallocate = func(f *os.File, off, n int64) error {
		s.mu.Lock()
		s.events = append(s.events, fmt.Sprintf("falloc %d", off+n))
		s.mu.Unlock()
		return base.Fallocate(f, off, n)
	}
	out.Msync = func(b []byte, flags int) error {
		s.mu.Lock()
		s.msyncs++
		s.mu.Unlock()
		return base.Msync(b, flags)
	}
	return &out
}

func (s *srfRecorder) calls() []srfCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]srfCall(nil), s.srf...)
}

func (s *srfRecorder) msyncCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msyncs
}

func newSRF(t *testing.T, r *recorder, s *srfRecorder, opts Options) *Medium {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	m, err := newMedium(opts, s.wrap(r.calls()))
	require.NoError(t, err)
	return m
}

// TestSyncsCountsEveryMsync: with SyncAll, Syncs equals the msync calls really made, on the
// medium's file and on its children's (closed ones too); other modes make and count none.
func TestSyncsCountsEveryMsync(t *testing.T) {
	for _, mode := range []medium.SyncMode{medium.SyncAll, medium.SyncOutput, medium.SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			r, s := &recorder{}, &srfRecorder{}
			m := newSRF(t, r, s, Options{WindowSize: 64 << 10, Durability: medium.Durability{Sync: mode}})
			var bs []medium.Bytes
			for range 3 {
				b, err := m.NewBytes()
				require.NoError(t, err)
				bs = append(bs, b)
			}
			p := make([]byte, 23<<10)
			for round := range 6 {
				for i, b := range bs {
					_, err := b.Write(p[:(i+1)*(round+1)*1000])
					require.NoError(t, err)
					if (round+i)%2 == 0 {
						_, err = b.ReadAt(make([]byte, 10), 0)
						require.NoError(t, err)
					}
				}
				_, err := bs[round%3].WriteTo(io.Discard)
				require.NoError(t, err)
			}
			require.Equal(t, int64(s.msyncCount()), m.Syncs(), "Syncs against the msyncs made")
			before := s.msyncCount()

			child, err := m.NewChild()
			require.NoError(t, err)
			cb, err := child.NewBytes()
			require.NoError(t, err)
			for range 4 {
				_, err = cb.Write(p)
				require.NoError(t, err)
				_, err = cb.WriteTo(io.Discard)
				require.NoError(t, err)
			}
			childSyncs := s.msyncCount() - before
			require.Equal(t, int64(childSyncs), child.(*Medium).Syncs(), "the child's own msyncs")
			require.NoError(t, child.Close())
			require.Equal(t, int64(s.msyncCount()), m.Syncs(), "the parent counts its children's msyncs, closed ones too")

			if mode == medium.SyncAll {
				require.Greater(t, childSyncs, 0)
				require.Greater(t, before, 6)
			} else {
				require.Zero(t, s.msyncCount())
			}
			t.Logf("%s: %d msyncs, Syncs %d", mode, s.msyncCount(), m.Syncs())
			require.NoError(t, m.Close())
			r.checkAllReleased(t)
		})
	}
}

// TestSyncFailureStickyPerFile: once an msync of the medium's file failed, every later call on
// any Bytes of that medium (one written before, one made after) fails with an error wrapping
// ErrSync and the first failure that says an earlier sync failed, and no sync is tried again.
// Another file (a child's) is not affected; Close does not sync and succeeds.
func TestSyncFailureStickyPerFile(t *testing.T) {
	fails := 0
	r := &recorder{failMsync: func() error {
		if fails == 0 {
			fails++
			return syscall.EIO
		}
		return nil
	}}
	s := &srfRecorder{}
	dir := t.TempDir()
	m := newSRF(t, r, s, Options{Dir: dir, WindowSize: 64 << 10,
		Durability: medium.Durability{Sync: medium.SyncAll, TrickleBytes: 8 << 10}})
	child, err := m.NewChild()
	require.NoError(t, err)
	b1, err := m.NewBytes()
	require.NoError(t, err)
	b2, err := m.NewBytes()
	require.NoError(t, err)
	cb, err := child.NewBytes()
	require.NoError(t, err)
	for _, b := range []medium.Bytes{b1, b2, cb} {
		_, err = b.Write(bytes.Repeat([]byte("abc"), 10<<10))
		require.NoError(t, err)
	}

	_, err = b1.ReadAt(make([]byte, 10), 0)
	require.ErrorIs(t, err, medium.ErrSync)
	require.ErrorIs(t, err, syscall.EIO)
	msyncs, trickles := s.msyncCount(), len(s.calls())
	require.Equal(t, 1, msyncs)

	b3, err := m.NewBytes()
	require.NoError(t, err, "NewBytes makes no sync")
	checkSticky := func(what string, err error) {
		t.Helper()
		require.ErrorIs(t, err, medium.ErrSync, what)
		require.ErrorIs(t, err, syscall.EIO, what)
		require.Contains(t, err.Error(), "earlier sync", what)
	}
	for i, b := range []medium.Bytes{b2, b3} {
		_, err = b.ReadAt(make([]byte, 1), 0)
		checkSticky(fmt.Sprintf("b%d ReadAt", i+2), err)
		_, err = b.WriteTo(io.Discard)
		checkSticky(fmt.Sprintf("b%d WriteTo", i+2), err)
		_, err = b.Write(make([]byte, 20<<10))
		checkSticky(fmt.Sprintf("b%d Write", i+2), err)
		_, err = b.WriteString("x")
		checkSticky(fmt.Sprintf("b%d WriteString", i+2), err)
		checkSticky(fmt.Sprintf("b%d WriteByte", i+2), b.WriteByte('x'))
		_, err = b.ReadFrom(bytes.NewReader([]byte("x")))
		checkSticky(fmt.Sprintf("b%d ReadFrom", i+2), err)
	}
	_, err = b1.ReadAt(make([]byte, 10), 0)
	require.ErrorIs(t, err, syscall.EIO)
	require.Equal(t, msyncs, s.msyncCount(), "a sync retried after a failure")
	require.Len(t, s.calls(), trickles, "a writeback pacing call after a failure")
	require.Equal(t, int64(1), m.Syncs(), "the failed msync is counted")

	// The child's file is another file: it still syncs and reads back.
	got := make([]byte, 3)
	_, err = cb.ReadAt(got, 3)
	require.NoError(t, err)
	require.Equal(t, "abc", string(got))
	require.Equal(t, msyncs+1, s.msyncCount())

	require.NoError(t, m.Close(), "Close makes no sync")
	r.checkAllReleased(t)
	requireDirEmpty(t, dir)
}

// TestPacingFailureStickyPerFile: a failed sync_file_range (EIO from a wait) fails the write
// that paced, and every later call on any Bytes of the medium, with ErrSync.
func TestPacingFailureStickyPerFile(t *testing.T) {
	r := &recorder{}
	s := &srfRecorder{fail: func(c srfCall) error {
		if c.flags == sys.SyncFileRangeWaitBefore {
			return &os.PathError{Op: "sync_file_range", Path: "test", Err: syscall.EIO}
		}
		return nil
	}}
	m := newSRF(t, r, s, Options{WindowSize: 64 << 10, Durability: medium.Durability{TrickleBytes: 4096}})
	b1, err := m.NewBytes()
	require.NoError(t, err)
	b2, err := m.NewBytes()
	require.NoError(t, err)
	_, err = b2.Write([]byte("written before"))
	require.NoError(t, err)
	n, err := b1.Write(make([]byte, 3*4096))
	require.ErrorIs(t, err, medium.ErrSync)
	require.ErrorIs(t, err, syscall.EIO)
	require.Equal(t, 3*4096, n, "the bytes copied before the failed wait are kept")
	require.Equal(t, int64(3*4096), b1.Size())
	calls := len(s.calls())
	require.Equal(t, 3, calls, "WRITE 0, WRITE 1, then the failed WAIT_BEFORE 0")
	_, err = b2.ReadAt(make([]byte, 1), 0)
	require.ErrorIs(t, err, medium.ErrSync)
	require.Contains(t, err.Error(), "earlier sync")
	_, err = b2.Write(make([]byte, 8192))
	require.ErrorIs(t, err, syscall.EIO)
	require.Len(t, s.calls(), calls)
	require.Equal(t, int64(calls), m.Trickles(), "the failed call is counted")
	require.Zero(t, m.Syncs())
	require.NoError(t, m.Close())
	r.checkAllReleased(t)
}

// fileOffsets returns, byte by byte, the file offsets of [from, to) of b, coalesced into runs
// of consecutive file offsets: the model the pacing calls are checked against.
func fileOffsets(b *bytesImpl, from, to int64) [][2]int64 {
	var runs [][2]int64
	for x := from; x < to; x++ {
		var off int64 = -1
		for i := range b.exts {
			e := b.exts[i]
			if x >= e.start && x < e.start+int64(len(e.mem)) {
				off = e.win.off + int64(e.winOff) + x - e.start
				break
			}
		}
		if off < 0 {
			panic(fmt.Sprintf("byte %d of the Bytes has no extent", x))
		}
		if len(runs) > 0 && runs[len(runs)-1][1] == off {
			runs[len(runs)-1][1]++
			continue
		}
		runs = append(runs, [2]int64{off, off + 1})
	}
	return runs
}

// wantPacing is the sequence pacing must have made once b holds b.Size() bytes: for each whole
// interval N, its file ranges with WRITE, then those of interval N-1 with WAIT_BEFORE.
func wantPacing(b *bytesImpl, every int64) []string {
	want := []string{}
	add := func(from int64, flags int) {
		for _, r := range fileOffsets(b, from, from+every) {
			want = append(want, srfCall{off: r[0], n: r[1] - r[0], flags: flags}.String())
		}
	}
	for n := int64(0); (n+1)*every <= b.Size(); n++ {
		add(n*every, sys.SyncFileRangeWrite)
		if n > 0 {
			add((n-1)*every, sys.SyncFileRangeWaitBefore)
		}
	}
	return want
}

func callStrings(calls []srfCall) []string {
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		out = append(out, c.String())
	}
	return out
}

// TestPacingSequence: under TrickleBytes, each Bytes submits the file ranges of interval N for
// writeback (WRITE) as soon as it holds N+1 whole intervals, then waits for those of interval
// N-1 (WAIT_BEFORE, nothing else), one interval behind, on the medium's file; the sequence is
// checked after every write against a byte-by-byte model, with two Bytes interleaved so that
// an interval spans regions apart in the file and windows. The calls go to the real kernel too.
func TestPacingSequence(t *testing.T) {
	const every = 10000 // not a page multiple: intervals cut regions anywhere
	for _, mode := range []medium.SyncMode{medium.SyncNone, medium.SyncOutput, medium.SyncAll} {
		t.Run(mode.String(), func(t *testing.T) {
			r, s := &recorder{}, &srfRecorder{}
			m := newSRF(t, r, s, Options{WindowSize: 64 << 10, Durability: medium.Durability{Sync: mode, TrickleBytes: every}})
			var bs [2]*bytesImpl
			var models [2]bytes.Buffer
			var seqs [2][]srfCall
			for i := range bs {
				b, err := m.NewBytes()
				require.NoError(t, err)
				bs[i] = b.(*bytesImpl)
			}
			sizes := []int{1, 4095, 9999, 2, 30000, 10000, 123, 70000, 5, 200000}
			for step, n := range sizes {
				for i, b := range bs {
					p := bytes.Repeat([]byte{byte(step*2 + i + 1)}, n+i*777)
					before := len(s.calls())
					var err error
					switch step % 4 {
					case 0:
						_, err = b.Write(p)
					case 1:
						_, err = b.WriteString(string(p))
					case 2:
						_, err = b.ReadFrom(bytes.NewReader(p))
					case 3:
						for _, c := range p {
							if err = b.WriteByte(c); err != nil {
								break
							}
						}
					}
					require.NoError(t, err)
					models[i].Write(p)
					seqs[i] = append(seqs[i], s.calls()[before:]...)
					for _, c := range seqs[i] {
						require.Same(t, m.f, c.f, "pacing on another file")
					}
					require.Equal(t, wantPacing(b, every), callStrings(seqs[i]),
						"Bytes %d after step %d (%d bytes)", i, step, b.Size())
				}
			}
			require.Equal(t, int64(len(s.calls())), m.Trickles())
			require.Greater(t, m.Trickles(), int64(100))
			if mode != medium.SyncAll {
				require.Zero(t, m.Syncs(), "pacing is not a sync")
			}
			for i, b := range bs {
				var got bytes.Buffer
				_, err := b.WriteTo(&got)
				require.NoError(t, err)
				require.True(t, bytes.Equal(models[i].Bytes(), got.Bytes()), "Bytes %d reads back", i)
			}
			t.Logf("%d pacing calls for %d+%d bytes; first: %v", m.Trickles(), bs[0].Size(), bs[1].Size(), callStrings(s.calls()[:4]))
			require.NoError(t, m.Close())
			r.checkAllReleased(t)
		})
	}
}

// TestPacingWithinAWrite: one large Write paces as it fills its regions, not once at its end:
// when a range is submitted, the file is reserved at most two regions past it.
func TestPacingWithinAWrite(t *testing.T) {
	const window = 256 << 10 // regions are at most a window
	r, s := &recorder{}, &srfRecorder{}
	m := newSRF(t, r, s, Options{WindowSize: window, Durability: medium.Durability{TrickleBytes: 64 << 10}})
	b, err := m.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 8<<20))
	require.NoError(t, err)
	var reserved int64
	submits := 0
	for _, ev := range s.events {
		var what string
		var end int64
		_, err := fmt.Sscanf(ev, "%s %d", &what, &end)
		require.NoError(t, err)
		if what == "falloc" {
			reserved = max(reserved, end)
			continue
		}
		submits++
		require.LessOrEqual(t, reserved-end, int64(2*window), "a range submitted only when the file was reserved to %d", reserved)
	}
	require.Equal(t, 2*(8<<20)/(64<<10)-1, submits)
	require.NoError(t, m.Close())
	r.checkAllReleased(t)
}

// TestPacingChildCounts: a child paces its own file, and its calls count in the parent's
// Trickles.
func TestPacingChildCounts(t *testing.T) {
	r, s := &recorder{}, &srfRecorder{}
	m := newSRF(t, r, s, Options{Durability: medium.Durability{TrickleBytes: 8192}})
	child, err := m.NewChild()
	require.NoError(t, err)
	b, err := child.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 5*8192))
	require.NoError(t, err)
	require.Equal(t, int64(9), child.(*Medium).Trickles(), "5 WRITEs and 4 WAIT_BEFOREs")
	for _, c := range s.calls() {
		require.Same(t, child.(*Medium).f, c.f)
	}
	require.NoError(t, child.Close())
	require.Equal(t, int64(9), m.Trickles())
	require.NoError(t, m.Close())
	r.checkAllReleased(t)
}

// TestPacingUnsupported: where sync_file_range is unsupported (ENOSYS, or ErrUnsupported from
// the system-call layer), pacing is off after the one probing call, which is not counted; the
// writes succeed and read back.
func TestPacingUnsupported(t *testing.T) {
	for _, unsupported := range []error{
		&os.PathError{Op: "sync_file_range", Path: "test", Err: syscall.ENOSYS},
		fmt.Errorf("%w: sync_file_range", sys.ErrUnsupported),
		&os.PathError{Op: "sync_file_range", Path: "test", Err: syscall.EOPNOTSUPP},
	} {
		t.Run(unsupported.Error(), func(t *testing.T) {
			r := &recorder{}
			s := &srfRecorder{fail: func(srfCall) error { return unsupported }}
			m := newSRF(t, r, s, Options{WindowSize: 64 << 10, Durability: medium.Durability{TrickleBytes: 4096}})
			child, err := m.NewChild()
			require.NoError(t, err)
			var model bytes.Buffer
			b, err := m.NewBytes()
			require.NoError(t, err)
			for i := range 50 {
				p := bytes.Repeat([]byte{byte(i)}, 3000)
				_, err = b.Write(p)
				require.NoError(t, err)
				model.Write(p)
			}
			require.Len(t, s.calls(), 1, "one probing call, then pacing is off")
			require.Zero(t, m.Trickles())
			var got bytes.Buffer
			_, err = b.WriteTo(&got)
			require.NoError(t, err)
			require.True(t, bytes.Equal(model.Bytes(), got.Bytes()))
			// The child's file is probed on its own.
			cb, err := child.NewBytes()
			require.NoError(t, err)
			_, err = cb.Write(make([]byte, 20000))
			require.NoError(t, err)
			require.Len(t, s.calls(), 2)
			require.Zero(t, m.Trickles())
			require.NoError(t, m.Close())
			r.checkAllReleased(t)
		})
	}
	require.False(t, syncFileRangeUnsupported(syscall.EIO))
	require.False(t, syncFileRangeUnsupported(errors.New("other")))
}
