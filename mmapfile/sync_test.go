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

// These tests pin issue 12's rules for mmapfile: stages are never synced (no msync, no
// fdatasync, Syncs 0) in any mode, a failed pacing call is sticky for the whole file, and
// TrickleBytes paces the writeback of each file as a whole, whatever the number of its Bytes.

// merger.mergeSources adds the Syncs of a medium that has the method to Result.Syncs.
var _ interface{ Syncs() int64 } = (*Medium)(nil)

// event is one recorded call: "fill" (a prefill write of zeros: off, n), "falloc" (off, n) or
// "srf" (sync_file_range: off, n, flags).
type event struct {
	kind   string
	f      *os.File
	off, n int64
	flags  int
}

func (e event) String() string {
	if e.kind == "srf" {
		return fmt.Sprintf("sync_file_range(%d, %d, %s)", e.off, e.n, flagName(e.flags))
	}
	return fmt.Sprintf("%s(%d, %d)", e.kind, e.off, e.n)
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

// srfRecorder wraps a recorder's calls and records every SyncFileRange, Fallocate, Msync and
// Fdatasync, and the prefill writes of the media made by newSRF.
type srfRecorder struct {
	mu         sync.Mutex
	events     []event
	msyncs     int
	fdatasyncs int
	fail       func(c event) error // decides a sync_file_range's result before the real call; nil: real
}

func (s *srfRecorder) add(e event) {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

func (s *srfRecorder) wrap(c *sys.Calls) *sys.Calls {
	base := *c
	out := base
	out.SyncFileRange = func(f *os.File, off, n int64, flags int) error {
		call := event{kind: "srf", f: f, off: off, n: n, flags: flags}
		s.add(call)
		s.mu.Lock()
		fail := s.fail
		s.mu.Unlock()
		if fail != nil {
			if err := fail(call); err != nil {
				return err
			}
		}
		return base.SyncFileRange(f, off, n, flags)
	}
	out.Fallocate = func(f *os.File, off, n int64) error {
		s.add(event{kind: "falloc", f: f, off: off, n: n})
		return base.Fallocate(f, off, n)
	}
	out.Msync = func(b []byte, flags int) error {
		s.mu.Lock()
		s.msyncs++
		s.mu.Unlock()
		return base.Msync(b, flags)
	}
	out.Fdatasync = func(f *os.File) error {
		s.mu.Lock()
		s.fdatasyncs++
		s.mu.Unlock()
		return base.Fdatasync(f)
	}
	return &out
}

// hookPrefill records the prefill writes of m as "fill" events.
func (s *srfRecorder) hookPrefill(m *Medium) {
	base := m.writeAt
	m.writeAt = func(p []byte, off int64) (int, error) {
		s.add(event{kind: "fill", f: m.f, off: off, n: int64(len(p))})
		return base(p, off)
	}
}

// of returns the recorded events of the given kinds ("" for all) on file f (nil for any).
func (s *srfRecorder) of(f *os.File, kinds ...string) []event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []event
	for _, e := range s.events {
		if f != nil && e.f != f {
			continue
		}
		for _, k := range kinds {
			if e.kind == k {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

func (s *srfRecorder) calls() []event { return s.of(nil, "srf") }

func (s *srfRecorder) syncCounts() (msyncs, fdatasyncs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msyncs, s.fdatasyncs
}

func newSRF(t *testing.T, r *recorder, s *srfRecorder, opts Options) *Medium {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	m, err := newMedium(opts, s.wrap(r.calls()))
	require.NoError(t, err)
	s.hookPrefill(m)
	return m
}

func strs(evs []event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.String())
	}
	return out
}

// wantPacing is the model of the per-file scheme: it replays the prefill writes of one file
// (its "fill" events, in order) and returns them with the pacing calls that must follow each:
// when the bytes prefilled in the file reach the next multiple of every (one step however many
// multiples one fill crosses), WAIT_BEFORE on the range the step before submitted (none at the
// first step), then WRITE on [0, end of the bytes prefilled so far). So the file is submitted
// every interval, and the wait lags by exactly one step.
func wantPacing(fills []event, every int64) []string {
	var out []string
	var count, end, prev int64
	due := every
	for _, f := range fills {
		out = append(out, f.String())
		count += f.n
		end = max(end, f.off+f.n)
		if count < due {
			continue
		}
		due = (count/every + 1) * every
		if prev > 0 {
			out = append(out, event{kind: "srf", off: 0, n: prev, flags: sys.SyncFileRangeWaitBefore}.String())
		}
		out = append(out, event{kind: "srf", off: 0, n: end, flags: sys.SyncFileRangeWrite}.String())
		prev = end
	}
	return out
}

// requirePacing checks the fills and pacing calls recorded on m's file against wantPacing.
func requirePacing(t *testing.T, s *srfRecorder, m *Medium, every int64, msgAndArgs ...any) {
	t.Helper()
	got := s.of(m.f, "fill", "srf")
	require.Equal(t, wantPacing(s.of(m.f, "fill"), every), strs(got), msgAndArgs...)
}

// TestStagesNeverSynced: in every durability mode, SyncAll included, with pacing on and off,
// neither the medium's file nor a child's is ever msynced or fdatasynced, however often the
// Bytes are read back; Syncs stays 0.
func TestStagesNeverSynced(t *testing.T) {
	for _, mode := range []medium.SyncMode{medium.SyncNone, medium.SyncOutput, medium.SyncAll} {
		for _, trickle := range []int64{0, 8192} {
			t.Run(fmt.Sprintf("sync=%s/trickle=%d", mode, trickle), func(t *testing.T) {
				r, s := &recorder{}, &srfRecorder{}
				m := newSRF(t, r, s, Options{WindowSize: 64 << 10, Durability: medium.Durability{Sync: mode, TrickleBytes: trickle}})
				child, err := m.NewChild()
				require.NoError(t, err)
				var bs []medium.Bytes
				for _, mm := range []medium.Medium{m, m, m, child} {
					b, err := mm.NewBytes()
					require.NoError(t, err)
					bs = append(bs, b)
				}
				p := make([]byte, 24<<10)
				for round := range 6 {
					for i, b := range bs {
						_, err := b.Write(p[:(i+1)*(round+1)*1000])
						require.NoError(t, err)
						_, err = b.ReadAt(make([]byte, 10), 0)
						require.NoError(t, err)
						_, err = b.WriteTo(io.Discard)
						require.NoError(t, err)
					}
				}
				msyncs, fdatasyncs := s.syncCounts()
				require.Zero(t, msyncs, "msync of a stage")
				require.Zero(t, fdatasyncs, "fdatasync of a stage")
				require.Zero(t, m.Syncs())
				require.Zero(t, child.(*Medium).Syncs())
				if trickle > 0 {
					require.Positive(t, m.Trickles(), "paced, not synced")
				}
				require.NoError(t, m.Close())
				r.checkAllReleased(t)
			})
		}
	}
}

// TestPacingFailureStickyPerFile: once a pacing call on the medium's file failed (EIO from a
// wait), the write that paced fails with ErrSync and the system's error, and every later call
// on any Bytes of that medium (one written before, one made after) fails with an error wrapping
// both that says an earlier sync failed; no pacing call is made on the file again. Another file
// (a child's) is not affected; Close makes no sync, succeeds, and releases everything.
func TestPacingFailureStickyPerFile(t *testing.T) {
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprintf("named=%t", named), func(t *testing.T) {
			r := &recorder{}
			if named {
				r.tmpfileErr = fmt.Errorf("%w: test", sys.ErrUnsupported)
			}
			var target *os.File
			s := &srfRecorder{fail: func(c event) error {
				if c.f == target && c.flags == sys.SyncFileRangeWaitBefore {
					return &os.PathError{Op: "sync_file_range", Path: "test", Err: syscall.EIO}
				}
				return nil
			}}
			dir := t.TempDir()
			m := newSRF(t, r, s, Options{Dir: dir, WindowSize: 64 << 10, Durability: medium.Durability{TrickleBytes: 8 << 10}})
			target = m.f
			child, err := m.NewChild()
			require.NoError(t, err)
			b1, err := m.NewBytes()
			require.NoError(t, err)
			b2, err := m.NewBytes()
			require.NoError(t, err)
			cb, err := child.NewBytes()
			require.NoError(t, err)
			_, err = b2.Write([]byte("written before"))
			require.NoError(t, err)
			_, err = cb.Write(bytes.Repeat([]byte("abc"), 10<<10))
			require.NoError(t, err)

			var werr error
			var model bytes.Buffer
			for i := 0; werr == nil && i < 100; i++ {
				p := bytes.Repeat([]byte{byte(i)}, 3000)
				var n int
				n, werr = b1.Write(p)
				model.Write(p[:n])
			}
			require.ErrorIs(t, werr, medium.ErrSync)
			require.ErrorIs(t, werr, syscall.EIO)
			t.Logf("pacing failure: %v", werr)
			var flags []string
			for _, c := range s.of(m.f, "srf") {
				flags = append(flags, flagName(c.flags))
			}
			require.Equal(t, []string{"WRITE", "WAIT_BEFORE"}, flags, "WRITE, then the failed WAIT_BEFORE")
			require.Equal(t, int64(model.Len()), b1.Size(), "the bytes copied before the failure are kept")

			b3, err := m.NewBytes()
			require.NoError(t, err, "NewBytes makes no pacing call")
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
				_, err = b.Write(make([]byte, 200<<10))
				checkSticky(fmt.Sprintf("b%d Write", i+2), err)
				_, err = b.WriteString("x")
				checkSticky(fmt.Sprintf("b%d WriteString", i+2), err)
				checkSticky(fmt.Sprintf("b%d WriteByte", i+2), b.WriteByte('x'))
				_, err = b.ReadFrom(bytes.NewReader([]byte("x")))
				checkSticky(fmt.Sprintf("b%d ReadFrom", i+2), err)
			}
			_, err2 := b1.ReadAt(make([]byte, 10), 0)
			require.Equal(t, werr, err2, "b1 returns its own failure")
			_, err2 = b1.Write([]byte("x"))
			require.Equal(t, werr, err2)
			require.Len(t, s.of(m.f, "srf"), 2, "a pacing call after a failure")
			require.Equal(t, int64(2)+child.(*Medium).Trickles(), m.Trickles(), "the failed call is counted")
			require.Zero(t, m.Syncs())

			// The child's file is another file: it still paces and reads back.
			before := len(s.of(child.(*Medium).f, "srf"))
			_, err = cb.Write(make([]byte, 100<<10))
			require.NoError(t, err)
			require.Greater(t, len(s.of(child.(*Medium).f, "srf")), before)
			got := make([]byte, 3)
			_, err = cb.ReadAt(got, 3)
			require.NoError(t, err)
			require.Equal(t, "abc", string(got))

			mmaps, live, _ := r.counts()
			require.Equal(t, mmaps, live)
			require.NoError(t, m.Close(), "Close makes no sync")
			r.checkAllReleased(t)
			require.Len(t, r.munmaps, mmaps, "munmap once for every mapping")
			requireFileClosed(t, m)
			requireDirEmpty(t, dir)
			require.NoError(t, m.Close())
		})
	}
}

// TestPacingSequence: under TrickleBytes, the medium's file is paced as a whole: each time the
// bytes prefilled in it (by any Bytes) reach the next multiple of the interval, WAIT_BEFORE on
// the range the step before submitted, then WRITE on the whole written extent; the sequence of
// prefills and calls on the file is checked after every write against the model (wantPacing),
// with two Bytes interleaved and every write method. The calls go to the real kernel too.
func TestPacingSequence(t *testing.T) {
	const every = 100000 // not a page multiple: steps fall inside chunks
	for _, mode := range []medium.SyncMode{medium.SyncNone, medium.SyncOutput, medium.SyncAll} {
		t.Run(mode.String(), func(t *testing.T) {
			r, s := &recorder{}, &srfRecorder{}
			m := newSRF(t, r, s, Options{WindowSize: 256 << 10, Durability: medium.Durability{Sync: mode, TrickleBytes: every}})
			var bs [2]medium.Bytes
			var models [2]bytes.Buffer
			for i := range bs {
				b, err := m.NewBytes()
				require.NoError(t, err)
				bs[i] = b
			}
			sizes := []int{1, 4095, 9999, 2, 30000, 10000, 123, 70000, 5, 200000, 64 << 10, 1 << 20, 3, 700000}
			for step, n := range sizes {
				for i, b := range bs {
					p := bytes.Repeat([]byte{byte(step*2 + i + 1)}, n+i*777)
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
					requirePacing(t, s, m, every, "Bytes %d after step %d (%d bytes)", i, step, b.Size())
				}
			}
			require.Len(t, s.calls(), len(s.of(m.f, "srf")), "pacing on another file")
			require.Equal(t, int64(len(s.calls())), m.Trickles())
			require.Greater(t, m.Trickles(), int64(50))
			require.Zero(t, m.Syncs(), "pacing is not a sync")
			for i, b := range bs {
				var got bytes.Buffer
				_, err := b.WriteTo(&got)
				require.NoError(t, err)
				require.True(t, bytes.Equal(models[i].Bytes(), got.Bytes()), "Bytes %d reads back", i)
			}
			t.Logf("%d pacing calls for %d+%d bytes; first: %v", m.Trickles(), bs[0].Size(), bs[1].Size(), strs(s.calls()[:3]))
			require.NoError(t, m.Close())
			r.checkAllReleased(t)
		})
	}
}

// TestPacingPerFile: many Bytes, each far below the interval, written round robin: the file is
// still paced every interval of what they write together (a pacing per Bytes would never run),
// and no more than an interval plus a chunk per Bytes is prefilled between two steps.
func TestPacingPerFile(t *testing.T) {
	const every, nb = 256 << 10, 32
	r, s := &recorder{}, &srfRecorder{}
	m := newSRF(t, r, s, Options{Durability: medium.Durability{TrickleBytes: every}})
	var bs []medium.Bytes
	for range nb {
		b, err := m.NewBytes()
		require.NoError(t, err)
		bs = append(bs, b)
	}
	p := make([]byte, 1000)
	for range 100 {
		for _, b := range bs {
			_, err := b.Write(p)
			require.NoError(t, err)
		}
	}
	requirePacing(t, s, m, every)
	var total int64
	for _, f := range s.of(m.f, "fill") {
		total += f.n
	}
	steps := len(s.of(m.f, "srf"))/2 + 1
	require.Equal(t, int(total/every), steps, "one step per interval prefilled in the file")
	require.GreaterOrEqual(t, steps, 10)
	var since int64
	for _, e := range s.of(m.f, "fill", "srf") {
		if e.kind == "srf" {
			since = 0
			continue
		}
		since += e.n
		require.LessOrEqual(t, since, int64(every+prefillChunk))
	}
	require.NoError(t, m.Close())
	r.checkAllReleased(t)
}

// TestPacingConcurrent: Bytes written from several goroutines pace one file: the steps are
// serialized, each waits on exactly the range the step before submitted and then submits the
// written extent, which never shrinks; there is at most one step per interval prefilled, and
// every Bytes reads back. Run it with -race.
func TestPacingConcurrent(t *testing.T) {
	const every = 128 << 10
	r, s := &recorder{}, &srfRecorder{}
	m := newSRF(t, r, s, Options{WindowSize: 1 << 20, Durability: medium.Durability{TrickleBytes: every}})
	var wg sync.WaitGroup
	bs := make([]medium.Bytes, 6)
	for k := range bs {
		b, err := m.NewBytes()
		require.NoError(t, err)
		bs[k] = b
		wg.Go(func() {
			for i := range 300 {
				_, err := b.Write(bytes.Repeat([]byte{byte(k + i)}, 1000+k*100))
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	calls := s.of(m.f, "srf")
	var total int64
	for _, f := range s.of(m.f, "fill") {
		total += f.n
	}
	require.NotEmpty(t, calls)
	var prev int64
	for i, c := range calls {
		if i%2 == 0 {
			require.Equal(t, sys.SyncFileRangeWrite, c.flags, "call %d: %v", i, c)
			require.Zero(t, c.off)
			require.GreaterOrEqual(t, c.n, prev, "call %d: the extent shrank", i)
			prev = c.n
			continue
		}
		require.Equal(t, event{kind: "srf", n: prev, flags: sys.SyncFileRangeWaitBefore}.String(), c.String(), "call %d", i)
	}
	require.Equal(t, 1, len(calls)%2, "every step but the first waits, then submits")
	require.LessOrEqual(t, int64(len(calls)/2+1), total/every)
	require.Equal(t, int64(len(calls)), m.Trickles())
	for k, b := range bs {
		got := make([]byte, 1)
		_, err := b.ReadAt(got, b.Size()-1)
		require.NoError(t, err)
		require.Equal(t, byte(k+299), got[0])
	}
	require.NoError(t, m.Close())
	r.checkAllReleased(t)
}

// TestPacingWithinAWrite: one large Write paces as it prefills its regions, not once at its
// end: the model holds, and when a range is submitted the file is reserved at most two regions
// past it.
func TestPacingWithinAWrite(t *testing.T) {
	const window = 256 << 10 // regions are at most a window
	r, s := &recorder{}, &srfRecorder{}
	m := newSRF(t, r, s, Options{WindowSize: window, Durability: medium.Durability{TrickleBytes: 64 << 10}})
	b, err := m.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 8<<20))
	require.NoError(t, err)
	requirePacing(t, s, m, 64<<10)
	var reserved int64
	submits := 0
	for _, ev := range s.of(m.f, "falloc", "srf") {
		if ev.kind == "falloc" {
			reserved = max(reserved, ev.off+ev.n)
			continue
		}
		submits++
		require.LessOrEqual(t, reserved-(ev.off+ev.n), int64(2*window), "a range submitted only when the file was reserved to %d", reserved)
	}
	require.Equal(t, 2*(8<<20)/(64<<10)-1, submits)
	require.NoError(t, m.Close())
	r.checkAllReleased(t)
}

// TestPacingChildCounts: a child paces its own file, on its own count, and its calls count in
// the parent's Trickles.
func TestPacingChildCounts(t *testing.T) {
	r, s := &recorder{}, &srfRecorder{}
	m := newSRF(t, r, s, Options{Durability: medium.Durability{TrickleBytes: 64 << 10}})
	b, err := m.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 60<<10))
	require.NoError(t, err)
	require.Empty(t, s.calls(), "the parent's file is below one interval")
	child, err := m.NewChild()
	require.NoError(t, err)
	s.hookPrefill(child.(*Medium))
	cb, err := child.NewBytes()
	require.NoError(t, err)
	_, err = cb.Write(make([]byte, 5*64<<10))
	require.NoError(t, err)
	requirePacing(t, s, child.(*Medium), 64<<10)
	require.Len(t, s.calls(), 9, "5 WRITEs and 4 WAIT_BEFOREs, all on the child's file")
	require.Equal(t, int64(9), child.(*Medium).Trickles())
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
			s := &srfRecorder{fail: func(event) error { return unsupported }}
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
