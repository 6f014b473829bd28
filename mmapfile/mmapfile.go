// Package mmapfile is a medium backend whose Bytes are staged in a file-backed shared mapping
// (MAP_SHARED) and read back without copies: ReadAt copies straight out of the mapping and
// WriteTo hands the mapped memory to the destination, one extent per Write call.
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
// from every later write. Where the file system has no fallocate, the region is reserved by
// writing zeros to it with pwrite, which fails the same way. (On a copy-on-write file system
// such as btrfs, no reservation covers rewriting a page after its writeback; use ext4 or xfs.)
//
// # Prefill
//
// After fallocate, the region is also filled with zeros through pwrite, so that the first touch
// of each page through the mapping finds it in the page cache. On the development machine this
// makes staging several times faster (up to about 3.4 GB/s instead of 0.5-0.7 GB/s for 256 MiB
// in 64 KiB writes): write(2) fills the page cache much faster than one page fault per fresh
// page of a shared file mapping does. It costs the region's pages up front (at most 4 MiB ahead
// of the writes of a Bytes).
//
// # Durability
//
// With Durability.Sync set to medium.SyncAll, the bytes a Bytes received since its last
// read-back are flushed with msync(MS_SYNC) before ReadAt or WriteTo reads them (on Linux,
// MS_SYNC on a shared file mapping also runs fdatasync on the range). The other modes never sync a
// stage. msync is given a page-aligned address (the offset rounded down to the page, the length
// extended to match) and is never called on an empty, read-only or unmapped range. Extents of a
// Bytes that follow each other in one window are flushed with one call, so a Bytes whose regions
// are interleaved with other Bytes' costs one msync per run: hundreds for a large merge.
//
// What SyncAll buys here is narrow. The file has no name (O_TMPFILE, or unlinked at once), so
// after a crash nothing can find it: syncing it can never help recovery, and it makes no promise
// about the published segment, whose own fdatasync and directory fsync (medium.SyncOutput) are
// the ones that count. What it does give: a writeback error (EIO, ENOSPC on a thin device) of a
// stage is reported, wrapping medium.ErrSync, before its bytes are read back and copied into the
// output, instead of being lost with the file; and the stages' dirty pages are written back
// before they are read, not left to the kernel. It costs a synchronous write of every staged
// byte (about 0.7 s per 428 MB merge on the development machine). TrickleBytes paces the same
// writeback without waiting for it.
//
// Medium.Syncs counts every msync call made on the medium's file and on its children's files
// (failed ones too); merger adds it to Result.Syncs.
//
// # A failed sync is sticky for the file
//
// A failed msync (or pacing call, below) is never retried: after a failed writeback the kernel
// may have dropped the dirty pages, so a later successful sync would prove nothing (fsyncgate).
// The error wraps medium.ErrSync and the system's error. The Bytes whose call failed returns that
// error from every later call; every other Bytes of the same Medium, whether it existed then or
// is made later, returns from every later call but Size an error that wraps the first failure
// and says that an earlier sync of the file failed. A child Medium has a file of its own, which a
// failure of its parent's file does not fail (nor the other way around). Close makes no sync, so
// it does not report the failure; it still unmaps and closes everything.
//
// # Pacing
//
// With Durability.TrickleBytes = T > 0 (in every sync mode, SyncNone included), each Bytes paces
// the writeback of what is written through the mapping, the way Cassandra's trickle fsync does:
// as soon as a Bytes holds N+1 whole intervals of T bytes (a write that crosses several boundaries
// paces after each region it fills), the file ranges holding its interval N are submitted for
// writeback with sync_file_range(SYNC_FILE_RANGE_WRITE), then those of interval N-1 are waited
// for with SYNC_FILE_RANGE_WAIT_BEFORE. The writer waits for the disk only when it is more than
// one interval ahead, and the dirty pages of a Bytes being written stay within about two
// intervals plus its prefilled region (at most 4 MiB) instead of growing with the stage. An interval spans several file ranges when the Bytes' regions are
// interleaved with other Bytes'; contiguous ones are one call. The last, partial interval is not
// paced; the pages dirtied by the zero prefill of a region are not paced before they are written.
// sync_file_range on the file's descriptor covers pages dirtied through the shared mapping
// (msync with MS_ASYNC would not: on Linux it does nothing).
//
// Medium.Trickles counts these calls, apart from Syncs. Where sync_file_range is unsupported
// (ENOSYS, EOPNOTSUPP, or sys.ErrUnsupported from the system-call layer), the first call finds
// out, pacing is off for that file from then on, and that call is not counted. Any other failure
// of a pacing call is a failed sync of the file, as above.
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
	// Durability says whether stages are synced: with SyncAll each Bytes is msynced before its
	// bytes are read back; the other modes never sync a stage. TrickleBytes, in every mode,
	// paces the writeback of each Bytes (see Pacing in the package doc).
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

	parent *Medium // counts this file's syncs and trickles too (nil for a root)

	syncs    atomic.Int64          // msync calls on this file and its children's files
	trickles atomic.Int64          // sync_file_range calls on this file and its children's files
	failed   atomic.Pointer[error] // the first failed sync of this file: sticky, never retried
	noPacing atomic.Bool           // sync_file_range is unsupported here: pacing is off

	mu       sync.Mutex // guards what follows
	windows  []*window
	next     int64 // file offset of the next free region
	zeroFill bool  // fallocate is unsupported: reserve by writing zeros
	released bool
}

// window is one mapping of the file.
type window struct {
	mem      []byte
	off      int64 // file offset of mem[0]
	prot     int
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

// Syncs returns how many msync calls were made on the medium's file and on the files of its
// children (those of closed children included), failed ones too. It is the count merger adds to
// Result.Syncs. Pacing calls (sync_file_range) are not syncs: Trickles counts them.
func (m *Medium) Syncs() int64 { return m.syncs.Load() }

// Trickles returns how many sync_file_range calls pacing made (Durability.TrickleBytes) on the
// medium's file and on the files of its children. Where sync_file_range is unsupported, pacing is
// off and nothing is counted.
func (m *Medium) Trickles() int64 { return m.trickles.Load() }

// countSync counts one msync of m's file in m and in every ancestor.
func (m *Medium) countSync() {
	for a := m; a != nil; a = a.parent {
		a.syncs.Add(1)
	}
}

// countTrickle counts one sync_file_range call on m's file in m and in every ancestor.
func (m *Medium) countTrickle() {
	for a := m; a != nil; a = a.parent {
		a.trickles.Add(1)
	}
}

// failure returns the error every call on a Bytes of m returns once a sync of m's file failed:
// it wraps medium.ErrSync and the first failure, and says that the sync was not retried.
func (m *Medium) failure() error {
	if p := m.failed.Load(); p != nil {
		return fmt.Errorf("mmapfile: an earlier sync of the medium's file failed and is not retried (its pages may be lost): %w", *p)
	}
	return nil
}

// fail records err, a failed sync of m's file, unless an earlier failure is recorded already.
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

// alloc hands out a region of want bytes (a positive multiple of the page size), or less where
// the current window ends. Its file space is reserved and its window mapped before it is
// returned.
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
// mapping cannot fault, and fills it with zeros through write(2) so that the first touch of
// each page through the mapping finds it in the page cache: pwrite fills the page cache several
// times faster than page faults on fresh pages of a shared mapping do. Where fallocate is
// unsupported, the zeros alone reserve the space (the file system allocates or reserves blocks
// for them and fails the pwrite with ENOSPC when it cannot).
func (m *Medium) reserve(off, n int64) error {
	if !m.zeroFill {
		err := m.calls.Fallocate(m.f, off, n)
		if err != nil && !fallocateUnsupported(err) {
			return fmt.Errorf("mmapfile: reserve %d bytes at file offset %d: %w", n, off, err)
		}
		if err != nil {
			m.zeroFill = true
		}
	}
	for end := off + n; off < end; {
		k := min(end-off, int64(len(zeros)))
		if _, err := m.f.WriteAt(zeros[:k], off); err != nil {
			return fmt.Errorf("mmapfile: reserve %d bytes at file offset %d: write zeros: %w", end-off, off, err)
		}
		off += k
	}
	return nil
}

// zeros is only ever read: untouched, it costs no memory.
var zeros [1 << 20]byte

func (m *Medium) mapWindow(off int64) (*window, error) {
	prot := sys.ProtRead | sys.ProtWrite
	mem, err := m.calls.Mmap(int(m.f.Fd()), off, int(m.opts.WindowSize), prot, sys.MapShared)
	if err != nil {
		return nil, fmt.Errorf("mmapfile: map %d bytes at file offset %d: %w", m.opts.WindowSize, off, err)
	}
	return &window{mem: mem, off: off, prot: prot}, nil
}

// msync flushes n bytes at offset off of w with MS_SYNC. The address is rounded down to the page
// and the length extended to match. An empty range, a read-only window and an unmapped one are
// never synced. A failure wraps medium.ErrSync and the system's error; it is not retried.
func (m *Medium) msync(w *window, off, n int) error {
	if n <= 0 || len(w.mem) == 0 || w.prot&sys.ProtWrite == 0 || w.unmapped.Load() {
		return nil
	}
	if err := m.failure(); err != nil {
		return err
	}
	lo := off - off%int(m.page)
	m.countSync()
	if err := m.calls.Msync(w.mem[lo:off+n], sys.MsSync); err != nil {
		err = fmt.Errorf("mmapfile: %d bytes at file offset %d: %w: %w",
			off+n-lo, w.off+int64(lo), medium.ErrSync, os.NewSyscallError("msync", err))
		m.fail(err)
		return err
	}
	return nil
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
	free       []byte // the unwritten rest of the last extent
	size       int64
	nextRegion int64 // size of the next region asked for
	synced     int64 // bytes before this offset have been msynced (SyncAll)
	paced      int64 // start of the next range submitted for writeback (TrickleBytes)
	err        error // sticky: fails every later write
	syncErr    error // sticky: a failed msync fails every later call
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

// grow adds a region for at least one more byte, sized for a pending write of hint bytes.
// A failure is sticky.
func (b *bytesImpl) grow(hint int) error {
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
	b.free = e.mem
	b.nextRegion = min(2*want, b.m.maxRg)
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
		if err := b.pace(); err != nil {
			return n, err
		}
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
		if err := b.pace(); err != nil {
			return n, err
		}
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
	return b.pace()
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
		if perr := b.pace(); perr != nil {
			return total, perr
		}
		if done {
			return total, err
		}
	}
}

// used returns how many bytes of extent i hold data.
func (b *bytesImpl) used(i int) int {
	if i == len(b.exts)-1 {
		return len(b.exts[i].mem) - len(b.free)
	}
	return len(b.exts[i].mem)
}

// syncForRead msyncs the bytes written since the last read-back, where the durability asks for
// it. Extents that follow each other in one window are synced with one call.
func (b *bytesImpl) syncForRead() error {
	if !b.m.opts.Durability.SyncsStages() || b.synced >= b.size {
		return nil
	}
	i := sort.Search(len(b.exts), func(i int) bool { return b.exts[i].start > b.synced }) - 1
	var (
		win    *window
		lo, hi int
	)
	flush := func() error {
		if win == nil {
			return nil
		}
		return b.m.msync(win, lo, hi-lo)
	}
	for ; i < len(b.exts); i++ {
		e := &b.exts[i]
		from := e.winOff + int(max(b.synced-e.start, 0))
		to := e.winOff + b.used(i)
		if from >= to {
			continue
		}
		if e.win == win && from == hi {
			hi = to
			continue
		}
		if err := flush(); err != nil {
			return b.failSync(err)
		}
		win, lo, hi = e.win, from, to
	}
	if err := flush(); err != nil {
		return b.failSync(err)
	}
	b.synced = b.size
	return nil
}

// pace paces the writeback of the bytes written so far (Durability.TrickleBytes): for each whole
// interval [N*T, (N+1)*T) of the Bytes not yet paced, the file ranges holding it are submitted
// for writeback (SYNC_FILE_RANGE_WRITE), then those of the interval before it are waited for
// (SYNC_FILE_RANGE_WAIT_BEFORE): the writer waits for the disk only when it is more than one
// interval ahead. A failure is sticky, for the whole file.
func (b *bytesImpl) pace() error {
	every := b.m.opts.Durability.TrickleBytes
	if every <= 0 || b.size-b.paced < every {
		return nil
	}
	for b.size-b.paced >= every && !b.m.noPacing.Load() {
		if err := b.paceRange(b.paced, every, sys.SyncFileRangeWrite); err != nil {
			return b.failSync(err)
		}
		if b.paced >= every {
			if err := b.paceRange(b.paced-every, every, sys.SyncFileRangeWaitBefore); err != nil {
				return b.failSync(err)
			}
		}
		b.paced += every
	}
	return nil
}

// paceRange runs sync_file_range with flags on the file ranges holding [from, from+n) of the
// Bytes, one call per run of extents that follow each other in the file.
func (b *bytesImpl) paceRange(from, n int64, flags int) error {
	to := from + n
	i := sort.Search(len(b.exts), func(i int) bool { return b.exts[i].start > from }) - 1
	var lo, hi int64 = -1, -1 // the pending file range
	flush := func() error {
		if lo < 0 || hi <= lo {
			return nil
		}
		return b.m.syncFileRange(lo, hi-lo, flags)
	}
	for ; i < len(b.exts) && b.exts[i].start < to; i++ {
		e := &b.exts[i]
		base := e.win.off + int64(e.winOff) // file offset of the extent
		s := base + max(from-e.start, 0)
		t := base + min(to-e.start, int64(b.used(i)))
		if s >= t {
			continue
		}
		if s == hi {
			hi = t
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		lo, hi = s, t
	}
	return flush()
}

// failSync makes a failed msync sticky: it is never retried and every later call returns it.
func (b *bytesImpl) failSync(err error) error {
	b.syncErr = err
	b.err = err
	return err
}

// WriteTo writes every byte written so far to w, one Write call per extent, straight from the
// mapping. A failing w fails this call only.
func (b *bytesImpl) WriteTo(w io.Writer) (int64, error) {
	if err := b.readable("write to"); err != nil {
		return 0, err
	}
	if err := b.syncForRead(); err != nil {
		return 0, err
	}
	var total int64
	for i := range b.exts {
		c := b.exts[i].mem[:b.used(i)]
		if len(c) == 0 {
			continue
		}
		k, err := backendIO.WriteFull(w, c)
		total += int64(k)
		if err != nil {
			return total, err
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
	if err := b.syncForRead(); err != nil {
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
