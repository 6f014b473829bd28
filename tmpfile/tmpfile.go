// Package tmpfile is a medium.Medium backend that stages bytes in one temp file per medium.
//
// # Few files, whatever the number of Bytes
//
// A medium and all its children share one append-only file. Each Bytes keeps a small memory
// buffer and a list of extents of that file; when its buffer fills, the buffer is appended to the
// file at an offset reserved atomically and becomes an extent. A merge of a 1,000-column table
// therefore holds one descriptor, not 1,000, and creates one file.
//
// A Bytes' buffer starts small (MinBufferSize) and doubles, while the medium's buffer memory is
// under BufferBudget, up to BufferSize: a small Bytes never touches the disk at all, and a large
// one writes to the file in BufferSize pieces, as a bufio.Writer would. A write at least as large
// as the buffer goes to the file directly when the buffer is empty. When a child medium closes,
// the full-size buffers of its Bytes are kept (up to half of BufferBudget) and handed to the
// Bytes made next, which start with them empty; a Bytes that needs a buffer or a larger one
// takes a kept one before it allocates, so the kept buffers never cost a live one its budget.
// The file space of a closed child's Bytes is reused by later extents before the file grows. A
// Bytes is a medium.Discarder: Discard gives its buffer and space back at once, the space
// punched out of the file first (its pages leave the page cache), which is what a segment's
// publication does with each part it has copied. It is a medium.PrefixDiscarder too:
// DiscardPrefix gives back the space of its bytes before an offset the same way, which a
// publication does every few MiB of a part as it copies it.
//
// # No litter
//
// On Linux with the OS file system the file is unnamed (O_TMPFILE): even a crash leaves nothing.
// Elsewhere it is created under a name of the pattern
//
//	writeout-tmpfile-<pid>-<random>.tmp
//
// and, except on Windows, unlinked at once while it stays open; on Windows it is removed at
// Close. Sweep removes leftovers of the pattern, for example those of a process that was killed
// between creating a file and unlinking it (empty files: Sweep removes no file it cannot prove
// this package made).
//
// # Reading back
//
// WriteTo into an *os.File copies in the kernel with copy_file_range (explicit source offsets,
// the destination's own position) when the medium's file is an OS file, and falls back to a
// buffered copy otherwise.
//
// # Durability
//
// The file is never synced, in any durability mode: it has no name (O_TMPFILE, or unlinked at
// once), so after a crash nothing can find it, and syncing it could never help; the published
// segment's own fdatasync is the one that counts, and it is the job of the code that publishes
// (columns). Only Durability.TrickleBytes matters here: it paces the file's writeback as the
// file grows, so that staging a large merge does not fill the page cache with dirty pages. A
// failed pacing call is never retried, and the medium fails from then on.
package tmpfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/internal/backend"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// The name pattern of named temp files: Prefix + pid + "-" + random hex + Suffix.
const (
	Prefix = "writeout-tmpfile-"
	Suffix = ".tmp"
)

// Defaults for the zero Options.
const (
	defaultMinBufferSize = 4 << 10
	defaultBufferSize    = 1 << 20
	defaultBufferBudget  = 64 << 20
)

// Options configure a Medium. The zero value means: the OS file system, the system temp
// directory, default buffer sizes, default durability (stages are not synced).
type Options struct {
	// Fs is the file system; nil means afero.NewOsFs().
	Fs afero.Fs
	// Dir is the directory of the temp file; "" means os.TempDir(). It must exist and be
	// writable: New fails otherwise.
	Dir string
	// MinBufferSize is the first buffer of a Bytes; 0 means 4 KiB.
	MinBufferSize int
	// BufferSize is the largest buffer of a Bytes, and so the size of most file writes;
	// 0 means 1 MiB.
	BufferSize int
	// BufferBudget caps the memory of all buffers of the medium and its children; buffers stop
	// growing at the cap (they never shrink below MinBufferSize). 0 means 64 MiB.
	BufferBudget int64
	// Durability: only TrickleBytes is used. Durability.Sync is not: the file is a stage, an
	// unnamed temp file that no mode syncs (syncing it can never help after a crash; the
	// published file's sync is the publisher's job). With TrickleBytes the writeback of the
	// file (an OS file) is paced as it grows, every TrickleBytes (sys.Pacer: sync_file_range,
	// or an fdatasync per interval where that is missing), so that staging a large merge does
	// not fill the page cache with dirty pages. A failed pacing call fails the medium from then
	// on: the file's writeback state is unknown, and it is never retried.
	Durability medium.Durability
}

func (o *Options) ensureDefaults() error {
	if o.Fs == nil {
		o.Fs = afero.NewOsFs()
	}
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	if o.MinBufferSize == 0 {
		o.MinBufferSize = defaultMinBufferSize
	}
	if o.BufferSize == 0 {
		o.BufferSize = defaultBufferSize
	}
	if o.BufferBudget == 0 {
		o.BufferBudget = defaultBufferBudget
	}
	switch {
	case o.MinBufferSize < 0 || o.BufferSize < 0 || o.BufferBudget < 0:
		return fmt.Errorf("tmpfile: %w: negative buffer option", medium.ErrInvalid)
	case o.MinBufferSize > o.BufferSize:
		return fmt.Errorf("tmpfile: %w: MinBufferSize %d > BufferSize %d", medium.ErrInvalid, o.MinBufferSize, o.BufferSize)
	}
	if err := o.Durability.Validate(); err != nil {
		return fmt.Errorf("tmpfile: %w", err)
	}
	return nil
}

// Medium stages Bytes in one temp file. Create it with New; its methods are safe for concurrent
// use.
type Medium struct {
	lc    backend.Lifecycle
	store *store
	root  bool

	mu    sync.Mutex
	bytes []*tmpBytes
}

var _ medium.Medium = (*Medium)(nil)

// New creates the medium's file in opts.Dir and returns the medium. A missing or unwritable
// directory is an error here, not at a later write.
func New(opts Options) (*Medium, error) {
	return newWithCalls(opts, &sys.Default)
}

func newWithCalls(opts Options, calls *sys.Calls) (*Medium, error) {
	if err := opts.ensureDefaults(); err != nil {
		return nil, err
	}
	st, err := openStore(opts, calls)
	if err != nil {
		return nil, err
	}
	m := &Medium{store: st, root: true}
	m.lc.OnClose(m.release)
	return m, nil
}

// NewBytes returns an empty Bytes staged in the medium's file.
func (m *Medium) NewBytes() (medium.Bytes, error) {
	b := &tmpBytes{m: m, st: m.store}
	added := m.lc.IfOpen(func() {
		m.mu.Lock()
		m.bytes = append(m.bytes, b)
		m.mu.Unlock()
	})
	if !added {
		return nil, fmt.Errorf("tmpfile: new bytes: %w", medium.ErrClosed)
	}
	return b, nil
}

// NewChild returns a medium that shares this one's file and settings. Closing the child
// releases its buffers (kept for the next Bytes, see the package doc) and its space in the file,
// which the next extents of any Bytes of the medium reuse before the file grows.
func (m *Medium) NewChild() (medium.Medium, error) {
	child := &Medium{store: m.store}
	child.lc.OnClose(child.release)
	if !m.lc.AddChild(child) {
		_ = child.Close()
		return nil, fmt.Errorf("tmpfile: new child: %w", medium.ErrClosed)
	}
	return child, nil
}

// OnClose registers fn to run at Close, last registered first.
func (m *Medium) OnClose(fn func() error) { m.lc.OnClose(fn) }

// Close closes the children, runs the OnClose hooks, releases every buffer and, for the root
// medium, closes the file and removes it if it still has a name. The first error is returned
// with later ones joined behind it; a second Close returns nil.
func (m *Medium) Close() error { return m.lc.Close() }

// Syncs returns how many times the medium's file was fdatasynced: only the fdatasyncs that pace
// its writeback (TrickleBytes) where sync_file_range is missing, since stages are never synced
// otherwise. It is 0 where sync_file_range works or TrickleBytes is 0.
func (m *Medium) Syncs() int64 {
	_, syncs := m.store.pacer.Counts()
	return int64(syncs)
}

// Trickles returns how many sync_file_range calls paced the medium's file.
func (m *Medium) Trickles() int64 {
	trickles, _ := m.store.pacer.Counts()
	return int64(trickles)
}

// FileBytes returns the size of the medium's file: how many bytes have been written to it,
// less those rewritten in place (the space of closed children is reused before the file grows;
// freeBytes says how much of it is free now).
func (m *Medium) FileBytes() int64 { return m.store.end.Load() }

// fileName returns the file's path, or "" for an unnamed (O_TMPFILE) file.
func (m *Medium) fileName() string { return m.store.name }

func (m *Medium) release() error {
	m.mu.Lock()
	bs := m.bytes
	m.bytes = nil
	m.mu.Unlock()
	for _, b := range bs {
		b.releaseBuf(!m.root) // the root's file closes next: no space to give back
	}
	if m.root {
		return m.store.close()
	}
	return nil
}

// store is the file a root medium and its children share.
type store struct {
	opts   Options
	calls  *sys.Calls
	file   afero.File
	osFile *os.File // the same file when it is an OS file: pread/pwrite and copy_file_range
	name   string   // path while the file has one; "" when unnamed or unlinked
	path   string   // the path it was created under, for error messages
	end    atomic.Int64
	bufMem atomic.Int64 // capacity of the live buffers and of the kept ones (recycle)

	recycle recycler  // buffers of released Bytes, for the next ones
	free    freeSpace // file space of released Bytes, for the next extents
	punches puncher   // file space of discarded Bytes, punched out before it is free

	ioMu  sync.Mutex // serializes I/O on files that are not OS files (afero's mem files are not safe for concurrent ReadAt/WriteAt)
	posMu sync.Mutex // serializes the copies that use the OS file's position (readExtentsInto)

	failed atomic.Pointer[error] // a failed pacing call: the file's state is unknown, nothing is read back
	pacer  *sys.Pacer            // nil: not paced
	closed bool
}

func openStore(opts Options, calls *sys.Calls) (*store, error) {
	st := &store{opts: opts, calls: calls}
	info, err := opts.Fs.Stat(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("tmpfile: dir %s: %w", opts.Dir, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("tmpfile: dir %s: %w: not a directory", opts.Dir, medium.ErrInvalid)
	}
	_, osfs := opts.Fs.(*afero.OsFs)
	if osfs {
		f, err := calls.OpenTmpfile(opts.Dir)
		switch {
		case err == nil:
			st.file, st.osFile, st.path = f, f, filepath.Join(opts.Dir, "(unnamed)")
			st.pace()
			return st, nil
		case !errors.Is(err, sys.ErrUnsupported):
			return nil, fmt.Errorf("tmpfile: create in %s: %w", opts.Dir, err)
		}
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	path := filepath.Join(opts.Dir, Prefix+strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(rnd[:])+Suffix)
	f, err := opts.Fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("tmpfile: create in %s: %w", opts.Dir, err)
	}
	st.file, st.name, st.path = f, path, path
	st.osFile, _ = f.(*os.File)
	st.pace()
	// Unlink at once where an open file survives it, so a crash leaves nothing behind.
	if runtime.GOOS != "windows" || !osfs {
		if err := opts.Fs.Remove(path); err != nil {
			return nil, multierr.Join(fmt.Errorf("tmpfile: unlink %s: %w", path, err), st.close())
		}
		st.name = ""
	}
	return st, nil
}

// pace sets up the pacing of an OS file's writeback per the durability.
func (st *store) pace() {
	if st.osFile != nil && st.opts.Durability.TrickleBytes > 0 {
		// In the background: the writers are not charged for submitting ranges (see sys.Pacer).
		st.pacer = &sys.Pacer{Calls: st.calls, File: st.osFile, Every: st.opts.Durability.TrickleBytes, Background: true}
	}
}

// close closes the file and removes its name if it still has one. Both are attempted.
func (st *store) close() error {
	if st.closed {
		return nil
	}
	st.closed = true
	st.stopPunching()
	st.closeRecycler()
	// A pacing failure was reported by the writes and reads that followed it; Close only waits
	// for the pacer's goroutine, so that no call is made on a closed file.
	_ = st.pacer.Close()
	var errs []error
	if err := st.file.Close(); err != nil {
		errs = append(errs, fmt.Errorf("tmpfile: close %s: %w", st.path, err))
	}
	if st.name != "" {
		if err := st.opts.Fs.Remove(st.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("tmpfile: remove %s: %w", st.name, err))
		} else {
			st.name = ""
		}
	}
	return multierr.Join(errs...)
}

func (st *store) failure() error {
	if p := st.failed.Load(); p != nil {
		return *p
	}
	if err := st.pacer.Err(); err != nil {
		// Met in the background, after the write that handed the range over.
		err = fmt.Errorf("tmpfile: pace writeback of %s: %w: %w", st.path, medium.ErrSync, err)
		st.failed.CompareAndSwap(nil, &err)
		return *st.failed.Load()
	}
	return nil
}

// appendAt writes a first piece of p, p[:k], at a newly reserved place: free space of the file
// (freeSpace) or its end. It returns the place and k; the caller loops for the rest.
func (st *store) appendAt(p []byte) (off int64, k int, err error) {
	if err := st.failure(); err != nil {
		return 0, 0, err
	}
	off, n := st.reserve(int64(len(p)))
	q := p[:n]
	if st.osFile != nil {
		_, err = st.osFile.WriteAt(q, off)
	} else {
		st.ioMu.Lock()
		_, err = st.file.WriteAt(q, off)
		st.ioMu.Unlock()
	}
	if err != nil {
		st.release([]extent{{off: off, n: n}}) // nobody reads it: free again
		return 0, 0, fmt.Errorf("tmpfile: write %d bytes at %d of %s: %w", len(q), off, st.path, err)
	}
	// Pacing follows the file's growth: a rewrite of free space below the end paces nothing.
	if err := st.pacer.Advance(off + n); err != nil {
		// The file's writeback state is unknown, as after a failed sync: nothing is read back.
		err = fmt.Errorf("tmpfile: pace writeback of %s: %w: %w", st.path, medium.ErrSync, err)
		st.failed.CompareAndSwap(nil, &err)
		return 0, 0, err
	}
	return off, int(n), nil
}

func (st *store) readAt(p []byte, off int64) error {
	var n int
	var err error
	if st.osFile != nil {
		n, err = st.osFile.ReadAt(p, off)
	} else {
		st.ioMu.Lock()
		n, err = st.file.ReadAt(p, off)
		st.ioMu.Unlock()
	}
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		// The file ends before bytes this medium wrote there: not the end of the Bytes, and no
		// io.EOF for a caller of ReadAt to take for one.
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("tmpfile: read %d bytes at %d of %s: %w", len(p), off, st.path, err)
}

// beforeRead returns the failure of a pacing call, if any: after it nothing is read back.
func (st *store) beforeRead() error { return st.failure() }

// Sweep removes from dir the files that crashed or killed processes left behind and that it can
// prove this package made: a regular file (not a link, a directory or a FIFO) with the
// temp-name pattern (IsTempName) that is empty. A medium's named file is unlinked right after
// its creation, before its first byte, except on Windows (named until Close); so what a
// killed process leaves is empty, and a non-empty file of the pattern is kept: it is not
// provably ours (on Windows, remove a killed process's leftovers by hand). On Linux and other
// unix systems a live medium's file has no name, so Sweep cannot touch it. Call it when no
// medium of another process is creating files in dir. It returns the paths removed; every
// removal is attempted, the first error is returned with later ones joined.
func Sweep(fsys afero.Fs, dir string) ([]string, error) {
	if fsys == nil {
		fsys = afero.NewOsFs()
	}
	entries, err := afero.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("tmpfile: sweep %s: %w", dir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !IsTempName(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		var fi fs.FileInfo
		if l, ok := fsys.(afero.Lstater); ok {
			fi, _, err = l.LstatIfPossible(path)
		} else {
			fi, err = fsys.Stat(path)
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("tmpfile: sweep %q: %w", path, err))
			continue
		}
		if !fi.Mode().IsRegular() || fi.Size() != 0 {
			continue
		}
		if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("tmpfile: sweep %q: %w", path, err))
			continue
		}
		removed = append(removed, path)
	}
	return removed, multierr.Join(errs...)
}

// IsTempName reports whether a file name has the pattern of this package's temp files.
func IsTempName(name string) bool {
	if !strings.HasPrefix(name, Prefix) || !strings.HasSuffix(name, Suffix) {
		return false
	}
	mid := strings.TrimSuffix(strings.TrimPrefix(name, Prefix), Suffix)
	pid, rnd, ok := strings.Cut(mid, "-")
	if !ok || pid == "" || rnd == "" {
		return false
	}
	for _, c := range pid {
		if c < '0' || c > '9' {
			return false
		}
	}
	_, err := hex.DecodeString(rnd)
	return err == nil
}
