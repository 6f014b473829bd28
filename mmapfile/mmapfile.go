// Package mmapfile is a medium backend whose Bytes are staged in a file-backed shared mapping
// (MAP_SHARED) and read back out of it: ReadAt copies straight out of the mapping, and WriteTo
// copies it through a pooled buffer of 256 KiB into the destination's Write calls.
//
// WriteTo does not hand the mapped memory itself to the destination: when that memory reaches
// write(2) of another file (a segment being published), the kernel copies from a shared file
// mapping at about 0.4-0.5 GB/s on the development machine (32 MiB in 65-85 ms), against 7-11 ms
// through a buffer on the Go heap: reading the mapping is fast (over 20 GB/s), writing from it
// is not. The extra copy costs well under a millisecond for the same 32 MiB.
//
// # File and windows
//
// A Medium owns one temp file, whatever the number of its Bytes: an unnamed O_TMPFILE file where
// the file system has them, else a file named writeout-mmapfile-*.tmp that is unlinked right
// after it is created, so that nothing is left in the directory even if the process dies.
// A child Medium (NewChild) has a file of its own, released by its own Close.
//
// The file is mapped in windows of Options.WindowSize bytes (64 MiB by default), window k
// covering file offsets [k*WindowSize, (k+1)*WindowSize). A window is mapped when the first region
// in it is handed out and stays mapped, at the same address, until the Medium is closed: every
// byte of every Bytes stays readable, so a window is never moved (no mremap) and never retired
// while the Medium is open.
//
// # Regions and extents
//
// Each Bytes owns extents: regions of the file handed out in file order from the Medium's
// current window. The first region of a Bytes is one page, each next one twice the last (or as
// large as the pending write), up to 4 MiB or the window size, whichever is smaller; a region
// never crosses a window. An empty Bytes costs nothing and a small one costs a page, not a window.
// A Bytes that fills its region gets a new one; its logical offsets map to (window, offset)
// through the list of its extents.
//
// # No SIGBUS on a full disk
//
// A region's file space is reserved with fallocate before a byte is written to it through the
// mapping, so a full disk is an error (wrapping ENOSPC) from the write that needed the space,
// never a SIGBUS. The bytes written before stay readable; the failed Bytes returns the same error
// from every later write. Where the file system has no fallocate, each chunk of a region is
// reserved by the zeros of its prefill (below), written with pwrite before a byte goes to the
// chunk through the mapping, which fails the same way. (On a copy-on-write file system
// such as btrfs, no reservation covers rewriting a page after its writeback; use ext4 or xfs.)
//
// # Prefill
//
// The region is filled with zeros through pwrite just ahead of the writes, one chunk of 64 KiB
// (or the region's rest) at a time, so that the first touch of each page through the mapping
// finds it in the page cache. On the development machine this makes staging several times
// faster (up to about 3.4 GB/s instead of 0.5-0.7 GB/s for 256 MiB in 64 KiB writes): write(2)
// fills the page cache much faster than one page fault per fresh page of a shared file mapping
// does. A Bytes writes only into prefilled chunks, so the zeros that are not yet overwritten,
// dirty pages that pacing would write back for nothing, stay within one chunk per Bytes.
//
// # Durability
//
// The medium never syncs its file, in any durability mode (SyncAll included): the file has no
// name (O_TMPFILE, or unlinked at once), so after a crash nothing can find it, and syncing it
// could never help; the published segment's own fdatasync and directory fsync are the ones that
// count, and they are the publisher's job. Durability.Sync is not used here; only
// Durability.TrickleBytes is (see Pacing). Medium.Syncs stays 0: there is no msync, and pacing
// has no fdatasync fallback (where sync_file_range is missing, pacing is off).
//
// # A failed pacing call is sticky for the file
//
// A failed pacing call is never retried: after a failed writeback the kernel may have dropped
// the dirty pages, so a later successful call would prove nothing (fsyncgate). The error wraps
// medium.ErrSync and the system's error. The Bytes whose call failed returns that error from
// every later call; every other Bytes of the same Medium, whether it existed then or is made
// later, returns from every later call but Size an error that wraps the first failure and says
// that an earlier sync of the file failed. A child Medium has a file of its own, which a failure
// of its parent's file does not fail (nor the other way around). Close makes no sync, so it does
// not report the failure; it still unmaps and closes everything.
//
// # Pacing
//
// With Durability.TrickleBytes = T > 0 (in every sync mode), the writeback of each file is paced
// as a whole, whatever the number of its Bytes, the way Cassandra's trickle fsync does. The
// medium counts the bytes prefilled in its file (every byte a Bytes writes is prefilled first,
// at most a chunk ahead: that is where its page becomes dirty), across all its Bytes and
// goroutines. Each time the count crosses a multiple of T, the step N runs: first it waits with
// sync_file_range(SYNC_FILE_RANGE_WAIT_BEFORE) for the range step N-1 submitted, then it submits
// the whole written extent of the file, [0, end of the prefilled bytes), with
// SYNC_FILE_RANGE_WRITE, which starts the writeback of the pages dirty in it without waiting
// (sync_file_range only writes dirty pages: the clean ones cost nothing). A writer waits for the
// disk only when the file is more than one interval ahead of it, and the file's dirty pages stay
// within about two intervals plus a chunk per Bytes being written. The wait comes before the
// submission because the Bytes' regions are interleaved: range N covers most of range N-1, and a
// wait on N-1 after submitting N would wait for N's pages too. When one count crosses several
// multiples (an interval smaller than a chunk), one step runs. Steps are serialized per file: a
// writer that crosses a multiple while another runs a step waits for it. The last, partial
// interval is not paced. sync_file_range on the file's descriptor covers pages dirtied through
// the shared mapping (msync with MS_ASYNC would not: on Linux it does nothing).
//
// Medium.Trickles counts these calls. Where sync_file_range is unsupported (ENOSYS, EOPNOTSUPP,
// or sys.ErrUnsupported from the system-call layer), the first call finds out, pacing is off for
// that file from then on, and that call is not counted. Any other failure of a pacing call is a
// failed sync of the file, as above.
//
// # Close
//
// Close unmaps every window and closes the file, on every path; with the file unlinked, that
// frees its space. When several of these fail, the first error is returned and the others are
// joined behind it. A second Close returns nil.
//
// # Platforms
//
// mmapfile needs Linux (fallocate, MAP_SHARED mappings of a file through internal/sys). On other
// systems New returns an error wrapping both sys.ErrUnsupported and medium.ErrInvalid; the
// package still compiles there.
package mmapfile

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/internal/backend"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// DefaultWindowSize is the size of a mapping window when Options.WindowSize is zero.
const DefaultWindowSize = 64 << 20

// backendIO names this backend in the errors of the ReadAt, ReadFrom and WriteTo steps every
// backend shares.
var backendIO = backend.IO{Name: "mmapfile", Invalid: medium.ErrInvalid}

// maxRegion caps the size of one region (extent) of a Bytes.
const maxRegion = 4 << 20

// Options configure a Medium. The zero value is valid: the OS file system, os.TempDir(), the
// default durability and 64 MiB windows.
type Options struct {
	// Fs must be the OS file system (afero.NewOsFs()) or nil: a shared mapping needs a real OS
	// file. Any other afero.Fs makes New fail with an error wrapping medium.ErrInvalid.
	Fs afero.Fs
	// Dir is the directory of the temp file; empty means os.TempDir(). It must exist and be
	// writable.
	Dir string
	// Durability: only TrickleBytes is used; it paces the writeback of the medium's file (see
	// Pacing in the package doc). Durability.Sync is not used: no mode syncs a stage (the file is
	// an unnamed temp file; syncing it can never help after a crash).
	Durability medium.Durability
	// WindowSize is the length of one mapping of the file; zero means DefaultWindowSize. It must be
	// a positive multiple of the page size (os.Getpagesize()).
	WindowSize int64
}

// ensureDefaults validates o and fills in its defaults.
func (o *Options) ensureDefaults(page int64) error {
	switch o.Fs.(type) {
	case nil, *afero.OsFs, afero.OsFs:
	default:
		return fmt.Errorf("mmapfile: Options.Fs is %T, not the OS file system: a shared mapping needs a real OS file: %w",
			o.Fs, medium.ErrInvalid)
	}
	if err := o.Durability.Validate(); err != nil {
		return fmt.Errorf("mmapfile: %w", err)
	}
	if o.WindowSize == 0 {
		o.WindowSize = DefaultWindowSize
	}
	if o.WindowSize < 0 || o.WindowSize%page != 0 || o.WindowSize > math.MaxInt {
		return fmt.Errorf("mmapfile: Options.WindowSize %d is not a positive multiple of the page size %d: %w",
			o.WindowSize, page, medium.ErrInvalid)
	}
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	fi, err := os.Stat(o.Dir)
	if err != nil {
		return fmt.Errorf("mmapfile: temp directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("mmapfile: temp directory %s is not a directory: %w", o.Dir, medium.ErrInvalid)
	}
	return nil
}

// Medium is a medium.Medium on a file-backed shared mapping. Its methods are safe for
// concurrent use; Close must not run while a call on one of its Bytes is in progress.
type Medium struct {
	lc    backend.Lifecycle
	calls *sys.Calls
	opts  Options
	page  int64
	maxRg int64 // largest region
	f     *os.File
	// writeAt is f.WriteAt, through which the prefill writes its zeros (tests record it).
	writeAt func(p []byte, off int64) (int, error)

	parent *Medium // counts this file's trickles too (nil for a root)

	trickles atomic.Int64          // sync_file_range calls on this file and its children's files
	failed   atomic.Pointer[error] // the first failed pacing call of this file: sticky, never retried
	noPacing atomic.Bool           // sync_file_range is unsupported here: pacing is off
	pace     pacer

	mu       sync.Mutex // guards what follows
	windows  []*window
	next     int64 // file offset of the next free region
	zeroFill bool  // fallocate is unsupported: the prefill's zeros reserve the space
	released bool
}

// pacer is the pacing state of one file (see Pacing in the package doc). A prefill raises extent,
// adds to count and compares it with due (atomics only); only a prefill that reaches due takes
// mu and runs a step.
type pacer struct {
	every  int64        // TrickleBytes; 0: no pacing
	count  atomic.Int64 // bytes prefilled in the file so far
	due    atomic.Int64 // count at which the next step is due
	extent atomic.Int64 // end of the prefilled bytes of the file: the range a step submits

	mu   sync.Mutex // serializes steps; guards prev
	prev int64      // end of the range [0, prev) the previous step submitted; 0: none yet
}

// window is one mapping of the file.
type window struct {
	mem      []byte
	off      int64 // file offset of mem[0]
	unmapped atomic.Bool
}

var _ medium.Medium = (*Medium)(nil)

// New returns a Medium staging its Bytes in a temp file in opts.Dir, mapped shared. It fails
// with an error wrapping medium.ErrInvalid for invalid options (an Fs that is not the OS file
// system, a bad window size or durability, a Dir that is not a directory), with the system's
// error when the temp file cannot be created, and off Linux with an error wrapping
// sys.ErrUnsupported.
func New(opts Options) (*Medium, error) {
	calls := sys.Default
	return newMedium(opts, &calls)
}

// newMedium is New with the system calls given: in-package tests replace entries of calls.
func newMedium(opts Options, calls *sys.Calls) (*Medium, error) {
	if err := platformErr(); err != nil {
		return nil, fmt.Errorf("mmapfile: %w", err)
	}
	page := int64(os.Getpagesize())
	if err := opts.ensureDefaults(page); err != nil {
		return nil, err
	}
	f, err := openFile(calls, opts.Dir)
	if err != nil {
		return nil, err
	}
	m := &Medium{
		calls: calls,
		opts:  opts,
		page:  page,
		maxRg: min(opts.WindowSize, max(maxRegion/page, 1)*page),
		f:     f,
	}
	m.writeAt = f.WriteAt
	m.pace.every = opts.Durability.TrickleBytes
	m.pace.due.Store(m.pace.every)
	m.lc.OnClose(m.release)
	return m, nil
}

// openFile opens an unnamed temp file in dir, or creates a named one and unlinks it at once.
func openFile(calls *sys.Calls, dir string) (*os.File, error) {
	f, err := calls.OpenTmpfile(dir)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, sys.ErrUnsupported) {
		return nil, fmt.Errorf("mmapfile: open temp file in %s: %w", dir, err)
	}
	f, err = os.CreateTemp(dir, "writeout-mmapfile-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("mmapfile: create temp file: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		return nil, multierr.Join(fmt.Errorf("mmapfile: unlink temp file: %w", err), f.Close())
	}
	return f, nil
}

// NewBytes returns an empty Bytes. It holds no file space until its first byte is written.
func (m *Medium) NewBytes() (medium.Bytes, error) {
	if m.lc.Closed() {
		return nil, fmt.Errorf("mmapfile: new bytes: %w", medium.ErrClosed)
	}
	return &bytesImpl{m: m, nextRegion: m.page}, nil
}

// NewChild returns a Medium with the same settings and a temp file of its own, closed by its own
// Close or by m's.
func (m *Medium) NewChild() (medium.Medium, error) {
	if m.lc.Closed() {
		return nil, fmt.Errorf("mmapfile: new child: %w", medium.ErrClosed)
	}
	child, err := newMedium(m.opts, m.calls)
	if err != nil {
		return nil, fmt.Errorf("mmapfile: new child: %w", err)
	}
	child.parent = m
	if !m.lc.AddChild(child) {
		return nil, multierr.Join(fmt.Errorf("mmapfile: new child: %w", medium.ErrClosed), child.Close())
	}
	return child, nil
}

// OnClose registers fn to run at Close, last registered first.
func (m *Medium) OnClose(fn func() error) { m.lc.OnClose(fn) }

// Close runs the OnClose hooks and closes the children, then unmaps every window and closes
// (and so frees) the temp file. The first error is returned, the others joined behind it. A
// second Close returns nil.
func (m *Medium) Close() error { return m.lc.Close() }

// Syncs returns how many times the medium synced its file or its children's: always 0, since
// stages are never synced (see Durability in the package doc) and pacing has no fdatasync
// fallback. It is the count merger adds to Result.Syncs. Pacing calls (sync_file_range) are
// not syncs: Trickles counts them.
func (m *Medium) Syncs() int64 { return 0 }

// Trickles returns how many sync_file_range calls pacing made (Durability.TrickleBytes) on the
// medium's file and on the files of its children. Where sync_file_range is unsupported, pacing is
// off and nothing is counted.
func (m *Medium) Trickles() int64 { return m.trickles.Load() }

// countTrickle counts one sync_file_range call on m's file in m and in every ancestor.
func (m *Medium) countTrickle() {
	for a := m; a != nil; a = a.parent {
		a.trickles.Add(1)
	}
}

// failure returns the error every call on a Bytes of m returns once a pacing call on m's file
// failed: it wraps medium.ErrSync and the first failure, and says that the sync was not retried.
func (m *Medium) failure() error {
	if p := m.failed.Load(); p != nil {
		return fmt.Errorf("mmapfile: an earlier sync of the medium's file failed and is not retried (its pages may be lost): %w", *p)
	}
	return nil
}

// fail records err, a failed pacing call on m's file, unless an earlier failure is recorded already.
func (m *Medium) fail(err error) { m.failed.CompareAndSwap(nil, &err) }

// release unmaps every window and closes the file, on every path.
func (m *Medium) release() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.released {
		return nil
	}
	m.released = true
	var errs []error
	for _, w := range m.windows {
		if w.unmapped.Swap(true) {
			continue
		}
		if err := m.calls.Munmap(w.mem); err != nil {
			errs = append(errs, fmt.Errorf("mmapfile: munmap window at file offset %d: %w", w.off, err))
		}
	}
	m.windows = nil
	if err := m.f.Close(); err != nil {
		errs = append(errs, fmt.Errorf("mmapfile: close temp file: %w", err))
	}
	return multierr.Join(errs...)
}

// extent is one region of the file owned by a Bytes.
type extent struct {
	start  int64  // logical offset of mem[0] in the Bytes
	mem    []byte // the region in the window's mapping
	win    *window
	winOff int // offset of mem[0] in win.mem
}

// fileOff returns the file offset of e.mem[0].
func (e *extent) fileOff() int64 { return e.win.off + int64(e.winOff) }

// alloc hands out a region of want bytes (a positive multiple of the page size), or less where
// the current window ends. Its file space is reserved (where fallocate works) and its window
// mapped before it is returned; its bytes are prefilled by the Bytes, chunk by chunk (fill).
func (m *Medium) alloc(want int64) (extent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.released || m.lc.Closed() {
		return extent{}, medium.ErrClosed
	}
	ws := m.opts.WindowSize
	off := m.next
	n := min(want, ws-off%ws)
	if err := m.reserve(off, n); err != nil {
		return extent{}, err
	}
	k := int(off / ws)
	if k == len(m.windows) {
		w, err := m.mapWindow(int64(k) * ws)
		if err != nil {
			return extent{}, err
		}
		m.windows = append(m.windows, w)
	}
	w := m.windows[k]
	wo := int(off - w.off)
	m.next = off + n
	return extent{mem: w.mem[wo : wo+int(n) : wo+int(n)], win: w, winOff: wo}, nil
}

// reserve makes sure [off, off+n) of the file has disk space, so that writing it through the
// mapping cannot fault. Where fallocate is unsupported it reserves nothing: the zeros of the
// prefill (prefill) reserve each chunk before a byte is written to it through the mapping (the
// file system allocates or reserves blocks for them and fails the pwrite with ENOSPC when it
// cannot).
func (m *Medium) reserve(off, n int64) error {
	if m.zeroFill {
		return nil
	}
	err := m.calls.Fallocate(m.f, off, n)
	if err != nil && !fallocateUnsupported(err) {
		return fmt.Errorf("mmapfile: reserve %d bytes at file offset %d: %w", n, off, err)
	}
	if err != nil {
		m.zeroFill = true
	}
	return nil
}

// prefillChunk is the most a Bytes prefills ahead of its writes (a multiple of any page size).
const prefillChunk = 64 << 10

// zeros is only ever read: untouched, it costs no memory.
var zeros [prefillChunk]byte

// prefill fills [off, off+n) of the file (n at most prefillChunk) with zeros through write(2),
// so that the first touch of each page through the mapping finds it in the page cache: pwrite
// fills the page cache several times faster than page faults on fresh pages of a shared mapping
// do. It is safe for concurrent use on disjoint ranges.
func (m *Medium) prefill(off int64, n int) error {
	if _, err := m.writeAt(zeros[:n], off); err != nil {
		return fmt.Errorf("mmapfile: reserve %d bytes at file offset %d: write zeros: %w", n, off, err)
	}
	return nil
}

// prefilled counts n bytes prefilled up to file offset end for pacing, and runs a step when the
// count reaches the next multiple of TrickleBytes. Without pacing, or below the next multiple,
// it costs an atomic add and a compare (and an atomic max of the extent).
func (m *Medium) prefilled(end int64, n int) error {
	p := &m.pace
	if p.every <= 0 {
		return nil
	}
	for e := p.extent.Load(); end > e && !p.extent.CompareAndSwap(e, end); e = p.extent.Load() {
	}
	if p.count.Add(int64(n)) < p.due.Load() {
		return nil
	}
	return m.step()
}

// step runs one pacing step (see Pacing in the package doc): WAIT_BEFORE on the range the
// previous step submitted, then WRITE on [0, extent). A writer that reaches it while another
// runs it waits, then finds the step done.
func (m *Medium) step() error {
	p := &m.pace
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.count.Load()
	if c < p.due.Load() {
		return nil // another writer ran the step
	}
	p.due.Store((c/p.every + 1) * p.every)
	if p.prev > 0 {
		if err := m.syncFileRange(0, p.prev, sys.SyncFileRangeWaitBefore); err != nil {
			return err
		}
	}
	end := p.extent.Load()
	if err := m.syncFileRange(0, end, sys.SyncFileRangeWrite); err != nil {
		return err
	}
	if m.noPacing.Load() {
		p.due.Store(math.MaxInt64) // never again: the count alone is kept
		return nil
	}
	p.prev = end
	return nil
}

func (m *Medium) mapWindow(off int64) (*window, error) {
	mem, err := m.calls.Mmap(int(m.f.Fd()), off, int(m.opts.WindowSize), sys.ProtRead|sys.ProtWrite, sys.MapShared)
	if err != nil {
		return nil, fmt.Errorf("mmapfile: map %d bytes at file offset %d: %w", m.opts.WindowSize, off, err)
	}
	return &window{mem: mem, off: off}, nil
}

// syncFileRange runs sync_file_range with flags on [off, off+n) of m's file, for pacing. Where
// the call is unsupported it counts nothing and turns pacing off for m; any other failure is a
// failed sync of the file: it wraps medium.ErrSync and is sticky.
func (m *Medium) syncFileRange(off, n int64, flags int) error {
	if m.noPacing.Load() {
		return nil
	}
	if err := m.failure(); err != nil {
		return err
	}
	err := m.calls.SyncFileRange(m.f, off, n, flags)
	if err != nil && syncFileRangeUnsupported(err) {
		m.noPacing.Store(true)
		return nil
	}
	m.countTrickle()
	if err != nil {
		err = fmt.Errorf("mmapfile: pace writeback of %d bytes at file offset %d: %w: %w", n, off, medium.ErrSync, err)
		m.fail(err)
		return err
	}
	return nil
}

// bytesImpl is a Bytes of a Medium. Every extent but the last is full.
type bytesImpl struct {
	m          *Medium
	exts       []extent
	free       []byte // the prefilled, unwritten rest of the last extent
	filled     int    // bytes of the last extent prefilled so far
	size       int64
	nextRegion int64 // size of the next region asked for
	err        error // sticky: fails every later write
	syncErr    error // sticky: a failed pacing call fails every later call
}

var (
	_ medium.Bytes    = (*bytesImpl)(nil)
	_ io.WriterTo     = (*bytesImpl)(nil)
	_ io.ReaderFrom   = (*bytesImpl)(nil)
	_ io.StringWriter = (*bytesImpl)(nil)
	_ io.ReaderAt     = (*bytesImpl)(nil)
)

// Size returns the number of bytes written: a counter, no system call.
func (b *bytesImpl) Size() int64 { return b.size }

// writable returns the error that stops a write, if any.
func (b *bytesImpl) writable(op string) error {
	if b.m.lc.Closed() {
		return fmt.Errorf("mmapfile: %s: %w", op, medium.ErrClosed)
	}
	if b.err != nil {
		return b.err
	}
	return b.m.failure()
}

// readable returns the error that stops a read, if any.
func (b *bytesImpl) readable(op string) error {
	if b.m.lc.Closed() {
		return fmt.Errorf("mmapfile: %s: %w", op, medium.ErrClosed)
	}
	if b.syncErr != nil {
		return b.syncErr
	}
	return b.m.failure()
}

// grow makes room for at least one more byte: it prefills the next chunk of the last extent, or
// adds a region sized for a pending write of hint bytes and prefills its first chunk. A failure
// is sticky.
func (b *bytesImpl) grow(hint int) error {
	if k := len(b.exts); k > 0 && b.filled < len(b.exts[k-1].mem) {
		return b.fill()
	}
	page := b.m.page
	want := max(b.nextRegion, (int64(hint)+page-1)/page*page)
	want = min(want, b.m.maxRg)
	e, err := b.m.alloc(want)
	if err != nil {
		if errors.Is(err, medium.ErrClosed) {
			return fmt.Errorf("mmapfile: write: %w", err)
		}
		b.err = err
		return err
	}
	e.start = b.size
	b.exts = append(b.exts, e)
	b.free, b.filled = nil, 0
	b.nextRegion = min(2*want, b.m.maxRg)
	return b.fill()
}

// fill prefills the next chunk of the last extent, which becomes writable, and counts it for
// pacing (which may run a step). A failure is sticky.
func (b *bytesImpl) fill() error {
	e := &b.exts[len(b.exts)-1]
	k := min(prefillChunk, len(e.mem)-b.filled)
	off := e.fileOff() + int64(b.filled)
	if err := b.m.prefill(off, k); err != nil {
		b.err = err
		return err
	}
	b.free = e.mem[b.filled : b.filled+k]
	b.filled += k
	if err := b.m.prefilled(off+int64(k), k); err != nil {
		return b.failSync(err)
	}
	return nil
}

// Write appends p. When the file has no room for all of it, the bytes that fit are kept, the
// error (wrapping ENOSPC) is returned and every later write returns it too.
func (b *bytesImpl) Write(p []byte) (int, error) {
	if err := b.writable("write"); err != nil {
		return 0, err
	}
	n := 0
	for n < len(p) {
		if len(b.free) == 0 {
			if err := b.grow(len(p) - n); err != nil {
				return n, err
			}
		}
		k := copy(b.free, p[n:])
		b.free = b.free[k:]
		b.size += int64(k)
		n += k
	}
	return n, nil
}

// WriteString appends s, like Write.
func (b *bytesImpl) WriteString(s string) (int, error) {
	if err := b.writable("write"); err != nil {
		return 0, err
	}
	n := 0
	for n < len(s) {
		if len(b.free) == 0 {
			if err := b.grow(len(s) - n); err != nil {
				return n, err
			}
		}
		k := copy(b.free, s[n:])
		b.free = b.free[k:]
		b.size += int64(k)
		n += k
	}
	return n, nil
}

// WriteByte appends c.
func (b *bytesImpl) WriteByte(c byte) error {
	if err := b.writable("write"); err != nil {
		return err
	}
	if len(b.free) == 0 {
		if err := b.grow(1); err != nil {
			return err
		}
	}
	b.free[0] = c
	b.free = b.free[1:]
	b.size++
	return nil
}

// ReadFrom reads from r straight into the mapping until io.EOF. Bytes read before an error stay
// appended; the reader's error is returned (io.EOF is not) and leaves the Bytes usable.
func (b *bytesImpl) ReadFrom(r io.Reader) (int64, error) {
	if err := b.writable("read from"); err != nil {
		return 0, err
	}
	var total int64
	for {
		if len(b.free) == 0 {
			if err := b.grow(0); err != nil {
				return total, err
			}
		}
		k, done, err := backendIO.ReadSome(r, b.free)
		b.free = b.free[k:]
		b.size += int64(k)
		total += int64(k)
		if done {
			return total, err
		}
	}
}

// used returns how many bytes of extent i hold data.
func (b *bytesImpl) used(i int) int {
	if i == len(b.exts)-1 {
		return b.filled - len(b.free)
	}
	return len(b.exts[i].mem)
}

// failSync makes a failed pacing call sticky: it is never retried and every later call returns it.
func (b *bytesImpl) failSync(err error) error {
	b.syncErr = err
	b.err = err
	return err
}

// copyChunk is the size of WriteTo's buffer: the most it passes to one Write call.
const copyChunk = 256 << 10

// copyBufs holds WriteTo's buffers (*[]byte of copyChunk bytes).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyChunk); return &b }}

// WriteTo writes every byte written so far to w, copied out of the mapping into a pooled buffer,
// at most copyChunk bytes a Write call (see the package doc for why not straight from the
// mapping). A failing w fails this call only.
func (b *bytesImpl) WriteTo(w io.Writer) (int64, error) {
	if err := b.readable("write to"); err != nil {
		return 0, err
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var total int64
	for i := range b.exts {
		for c := b.exts[i].mem[:b.used(i)]; len(c) > 0; {
			n := copy(buf, c)
			c = c[n:]
			k, err := backendIO.WriteFull(w, buf[:n])
			total += int64(k)
			if err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// ReadAt copies bytes written so far, from offset off, out of the mapping. Fewer than len(p)
// bytes come with io.EOF.
func (b *bytesImpl) ReadAt(p []byte, off int64) (int, error) {
	if err := b.readable("read at"); err != nil {
		return 0, err
	}
	if done, err := backendIO.ReadAtBounds(p, off, b.size); done {
		return 0, err
	}
	i := sort.Search(len(b.exts), func(i int) bool { return b.exts[i].start > off }) - 1
	n := 0
	for ; i < len(b.exts) && n < len(p); i++ {
		within := off + int64(n) - b.exts[i].start
		n += copy(p[n:], b.exts[i].mem[within:b.used(i)])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
