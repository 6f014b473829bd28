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
	"math"
	"os"
	"sync"
	"sync/atomic"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/internal/backend"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// defaultWindowSize is the size of a mapping window when Options.WindowSize is zero.
const defaultWindowSize = 64 << 20

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
	// WindowSize is the length of one mapping of the file; zero means 64 MiB. It must be
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
		o.WindowSize = defaultWindowSize
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
