// Package crashfs is an in-memory afero.Fs that simulates power loss, in the manner of Pebble's
// strict in-memory file system: it remembers, per file and per directory, what has been synced,
// and Crash drops everything else.
//
// # What is modelled
//
//   - A file's contents (data and size) are durable as of its last File.Sync (fsync and
//     fdatasync both map to it). A file never synced has, after a crash, length 0 if its
//     directory entry survives.
//   - A directory's set of entries (name -> file or directory) is durable as of its last Sync:
//     Open the directory and call Sync on the handle. Creating, removing and renaming an entry,
//     and creating a subdirectory, are directory changes; none survives a crash unless the
//     directory holding the entry is synced afterwards.
//   - Each directory reverts on its own, to exactly its entry set as of its last sync. So a
//     rename within one directory is atomic across a crash: the directory shows the old entry
//     set or the new one, never a mix. A rename between two directories is undone per
//     directory: if only the destination was synced, the file shows under both names after a
//     crash; if only the source, under neither (it is lost, as on a real system that syncs the
//     wrong directory).
//   - An entry is identified with its inode: hard links are not offered, but a file renamed and
//     synced keeps the synced data it had, and a file removed then created anew under the same
//     name is a new file.
//   - The root "/" always exists. A directory made by Mkdir and never named by a synced parent
//     disappears with everything in it.
//   - Crash also invalidates every open handle: any later use fails with ErrCrashed.
//   - CrashKeepingDirs is a second, harsher kind of power loss for the same state: directory
//     changes all persist, file data still reverts to its last Sync. Between the two, code is
//     tested against both orders a real file system may write metadata and data in.
//
// # What is not modelled
//
//   - No torn writes: each Write, WriteAt and Truncate applies whole, and a Sync makes the whole
//     file durable at once; a crash never leaves part of one write, or a file with some of its
//     unsynced writes but not others. Real disks may persist any subset of unsynced pages.
//   - No reordering beyond the model: unsynced changes are all lost, never partly kept (a real
//     file system may persist an unsynced rename, or unsynced data, if it happens to write it
//     back; code must not rely on that, and the model never does it).
//   - Metadata other than the entry set and the contents (permissions, times) is kept as it is
//     at the crash, not reverted.
//   - Syncing a file does not sync its directory entry, and syncing a directory does not sync
//     its own entry in its parent (as on Linux).
//
// # Crash points
//
// Every mutating operation (creating or truncating open, Mkdir, Remove, Rename, Chmod, Chown,
// Chtimes, Write, WriteAt, WriteString, Truncate, Sync) is counted; Ops returns the count. With
// SetCrashAfter(n) the first n mutating operations succeed and the next one fails with
// ErrCrashed without any effect, as does every operation after it, of any kind: the machine
// is off. A test runs its workload with n = 0, 1, 2, ... then calls Crash and checks what
// survived, until the workload completes within n operations (Crashed is then false). Clone
// gives each run the same starting state:
//
//	start := crashfs.New() // ... set up and sync the starting state
//	for k := 0; ; k++ {
//		fsys := start.Clone()
//		fsys.SetCrashAfter(k)
//		err := workload(fsys)
//		finished := !fsys.Crashed()
//		fsys.Crash()
//		// check fsys against err and finished
//		if finished {
//			break
//		}
//	}
package crashfs

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/afero"
)

// ErrCrashed is returned by every operation past the crash point set with SetCrashAfter, and by
// every use of a handle opened before Crash.
var ErrCrashed = errors.New("crashfs: simulated crash")

// node is a file or a directory (an inode).
type node struct {
	dir     bool
	mode    os.FileMode
	modTime time.Time
	// files
	data   []byte
	synced []byte // contents as of the last Sync; nil if never synced
	// directories
	entries       map[string]*node
	syncedEntries map[string]*node
}

func newDir(perm os.FileMode) *node {
	return &node{dir: true, mode: os.ModeDir | perm.Perm(), modTime: time.Now(),
		entries: map[string]*node{}, syncedEntries: map[string]*node{}}
}

// FS is the crash-simulating file system. Its zero value is not usable; call New.
type FS struct {
	mu         sync.Mutex
	root       *node
	gen        int // bumped by Crash: handles of older generations are dead
	ops        int // mutating operations done
	crashAfter int // -1: never
	crashed    bool
}

var _ afero.Fs = (*FS)(nil)

// New returns an empty file system holding only the directory "/", durable.
func New() *FS {
	return &FS{root: newDir(0o755), crashAfter: -1}
}

// Clone returns an independent copy of the file system: every file's and directory's current
// and synced state, with files shared by several entries still shared. Open handles, the
// count of operations and the crash point are not carried over. A test builds its starting
// state once and runs each crash point on a clone of it.
func (f *FS) Clone() *FS {
	f.mu.Lock()
	defer f.mu.Unlock()
	copies := map[*node]*node{}
	var cp func(n *node) *node
	cp = func(n *node) *node {
		if c, ok := copies[n]; ok {
			return c
		}
		c := &node{dir: n.dir, mode: n.mode, modTime: n.modTime, data: slices.Clone(n.data), synced: slices.Clone(n.synced)}
		copies[n] = c
		if n.dir {
			c.entries = make(map[string]*node, len(n.entries))
			c.syncedEntries = make(map[string]*node, len(n.syncedEntries))
			for name, e := range n.entries {
				c.entries[name] = cp(e)
			}
			for name, e := range n.syncedEntries {
				c.syncedEntries[name] = cp(e)
			}
		}
		return c
	}
	return &FS{root: cp(f.root), crashAfter: -1, crashed: f.crashed}
}

// SetCrashAfter makes the (n+1)-th mutating operation from now on, counted as by Ops, and
// every operation after it fail with ErrCrashed; n < 0 removes the limit. It resets Ops to 0.
func (f *FS) SetCrashAfter(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops, f.crashAfter = 0, n
}

// Ops returns the mutating operations done since New, Crash or SetCrashAfter.
func (f *FS) Ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// Crashed reports whether the crash point set by SetCrashAfter has been reached.
func (f *FS) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// Crash simulates a power loss and reboot: every file's contents revert to those of its last
// Sync, every directory's entries to those of its last Sync, open handles die, and the crash
// point and the count of operations are cleared.
func (f *FS) Crash() { f.crash(false) }

// CrashKeepingDirs simulates a harsher power loss for code that skips syncs: every directory
// change persists, synced or not (as if the file system's metadata journal had committed just
// before the power went), while every file's contents still revert to those of its last Sync.
// An unsynced file renamed into place then survives empty: the torn publication that
// fdatasync-before-rename exists to prevent. Handles, crash point and count are cleared as by
// Crash.
func (f *FS) CrashKeepingDirs() { f.crash(true) }

func (f *FS) crash(keepDirs bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[*node]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if !n.dir {
			n.data = slices.Clone(n.synced)
			return
		}
		if keepDirs {
			n.syncedEntries = maps.Clone(n.entries)
		}
		n.entries = maps.Clone(n.syncedEntries)
		for _, c := range n.entries {
			walk(c)
		}
	}
	walk(f.root)
	f.gen++
	f.ops, f.crashAfter, f.crashed = 0, -1, false
}

// mutate counts a mutating operation; it fails it (and marks the crash) past the crash point.
// The caller holds f.mu.
func (f *FS) mutate() error {
	if f.crashed {
		return ErrCrashed
	}
	if f.crashAfter >= 0 && f.ops >= f.crashAfter {
		f.crashed = true
		return ErrCrashed
	}
	f.ops++
	return nil
}

// alive fails any operation once crashed. The caller holds f.mu.
func (f *FS) alive() error {
	if f.crashed {
		return ErrCrashed
	}
	return nil
}

// split cleans name into its path elements below the root.
func split(name string) []string {
	name = filepath.ToSlash(filepath.Clean("/" + name))
	if name == "/" {
		return nil
	}
	return strings.Split(name[1:], "/")
}

// lookup finds the node at name. The caller holds f.mu.
func (f *FS) lookup(name string) (*node, error) {
	n := f.root
	for _, e := range split(name) {
		if !n.dir {
			return nil, errors.New("not a directory")
		}
		c, ok := n.entries[e]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = c
	}
	return n, nil
}

// parent finds the directory holding name and name's last element. The caller holds f.mu.
func (f *FS) parent(name string) (*node, string, error) {
	els := split(name)
	if len(els) == 0 {
		return nil, "", fs.ErrInvalid // the root has no parent
	}
	d, err := f.lookup("/" + strings.Join(els[:len(els)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !d.dir {
		return nil, "", errors.New("not a directory")
	}
	return d, els[len(els)-1], nil
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: "crashfs: " + op, Path: name, Err: err}
}

// Name returns "crashfs".
func (f *FS) Name() string { return "crashfs" }

// Create creates or truncates name for reading and writing.
func (f *FS) Create(name string) (afero.File, error) {
	return f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open opens name read-only; a directory's handle can be synced.
func (f *FS) Open(name string) (afero.File, error) {
	return f.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile opens name with the flags of os.OpenFile (O_RDONLY, O_WRONLY, O_RDWR, O_APPEND,
// O_CREATE, O_EXCL, O_TRUNC). Opening that creates or truncates is a mutating operation.
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.alive(); err != nil {
		return nil, pathErr("open", name, err)
	}
	d, base, err := f.parent(name)
	var n *node
	switch {
	case errors.Is(err, fs.ErrInvalid):
		n = f.root
	case err != nil:
		return nil, pathErr("open", name, err)
	default:
		n = d.entries[base]
	}
	writes := flag&(os.O_WRONLY|os.O_RDWR) != 0
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case n != nil && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, fs.ErrExist)
	case n != nil && n.dir && (writes || flag&os.O_TRUNC != 0):
		return nil, pathErr("open", name, errors.New("is a directory"))
	}
	if n == nil || flag&os.O_TRUNC != 0 {
		if err := f.mutate(); err != nil {
			return nil, pathErr("open", name, err)
		}
		if n == nil {
			n = &node{mode: perm.Perm(), modTime: time.Now()}
			d.entries[base] = n
		} else {
			n.data, n.modTime = nil, time.Now()
		}
	}
	return &file{fs: f, n: n, name: name, gen: f.gen, read: flag&os.O_WRONLY == 0, write: writes,
		append: flag&os.O_APPEND != 0}, nil
}

// Mkdir makes the directory name.
func (f *FS) Mkdir(name string, perm os.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.alive(); err != nil {
		return pathErr("mkdir", name, err)
	}
	d, base, err := f.parent(name)
	if errors.Is(err, fs.ErrInvalid) {
		return pathErr("mkdir", name, fs.ErrExist)
	}
	if err != nil {
		return pathErr("mkdir", name, err)
	}
	if _, ok := d.entries[base]; ok {
		return pathErr("mkdir", name, fs.ErrExist)
	}
	if err := f.mutate(); err != nil {
		return pathErr("mkdir", name, err)
	}
	d.entries[base] = newDir(perm)
	return nil
}

// MkdirAll makes name and any missing parents; each directory made is one operation.
func (f *FS) MkdirAll(name string, perm os.FileMode) error {
	els := split(name)
	for i := range els {
		p := "/" + strings.Join(els[:i+1], "/")
		err := f.Mkdir(p, perm)
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		if fi, err := f.Stat(p); err != nil || !fi.IsDir() {
			return pathErr("mkdir", p, errors.New("not a directory"))
		}
	}
	return nil
}

// Remove removes the file or empty directory name.
func (f *FS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.alive(); err != nil {
		return pathErr("remove", name, err)
	}
	d, base, err := f.parent(name)
	if err != nil {
		return pathErr("remove", name, err)
	}
	n, ok := d.entries[base]
	if !ok {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if n.dir && len(n.entries) > 0 {
		return pathErr("remove", name, errors.New("directory not empty"))
	}
	if err := f.mutate(); err != nil {
		return pathErr("remove", name, err)
	}
	delete(d.entries, base)
	return nil
}

// RemoveAll removes name and everything under it, as one operation; a missing name is no
// error.
func (f *FS) RemoveAll(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.alive(); err != nil {
		return pathErr("removeall", name, err)
	}
	d, base, err := f.parent(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return pathErr("removeall", name, err)
	}
	if _, ok := d.entries[base]; !ok {
		return nil
	}
	if err := f.mutate(); err != nil {
		return pathErr("removeall", name, err)
	}
	delete(d.entries, base)
	return nil
}

// Rename renames oldname to newname, replacing a file there; a directory can only be renamed
// to a name that does not exist.
func (f *FS) Rename(oldname, newname string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	lerr := func(err error) error {
		return &os.LinkError{Op: "crashfs: rename", Old: oldname, New: newname, Err: err}
	}
	if err := f.alive(); err != nil {
		return lerr(err)
	}
	od, obase, err := f.parent(oldname)
	if err != nil {
		return lerr(err)
	}
	n, ok := od.entries[obase]
	if !ok {
		return lerr(fs.ErrNotExist)
	}
	nd, nbase, err := f.parent(newname)
	if err != nil {
		return lerr(err)
	}
	if od == nd && obase == nbase {
		return nil
	}
	if old, ok := nd.entries[nbase]; ok && (old.dir || n.dir) {
		return lerr(fs.ErrExist)
	}
	if n.dir && f.under(nd, n) {
		return lerr(fs.ErrInvalid)
	}
	if err := f.mutate(); err != nil {
		return lerr(err)
	}
	delete(od.entries, obase)
	nd.entries[nbase] = n
	return nil
}

// under reports whether d is dir or lies below it. The caller holds f.mu.
func (f *FS) under(d, dir *node) bool {
	if d == dir {
		return true
	}
	for _, c := range dir.entries {
		if c.dir && f.under(d, c) {
			return true
		}
	}
	return false
}

// Stat describes name.
func (f *FS) Stat(name string) (os.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.alive(); err != nil {
		return nil, pathErr("stat", name, err)
	}
	n, err := f.lookup(name)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	return info(name, n), nil
}

// change applies a metadata change to name as one operation.
func (f *FS) change(op, name string, do func(*node)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.alive(); err != nil {
		return pathErr(op, name, err)
	}
	n, err := f.lookup(name)
	if err != nil {
		return pathErr(op, name, err)
	}
	if err := f.mutate(); err != nil {
		return pathErr(op, name, err)
	}
	do(n)
	return nil
}

// Chmod sets name's permission bits.
func (f *FS) Chmod(name string, mode os.FileMode) error {
	return f.change("chmod", name, func(n *node) { n.mode = n.mode&^os.ModePerm | mode.Perm() })
}

// Chown does nothing but count.
func (f *FS) Chown(name string, _, _ int) error {
	return f.change("chown", name, func(*node) {})
}

// Chtimes sets name's modification time.
func (f *FS) Chtimes(name string, _, mtime time.Time) error {
	return f.change("chtimes", name, func(n *node) { n.modTime = mtime })
}

// fileInfo is an os.FileInfo.
type fileInfo struct {
	name    string
	size    int64
	mode    os.FileMode
	modTime time.Time
}

func info(name string, n *node) *fileInfo {
	return &fileInfo{name: filepath.Base(name), size: int64(len(n.data)), mode: n.mode, modTime: n.modTime}
}

func (i *fileInfo) Name() string       { return i.name }
func (i *fileInfo) Size() int64        { return i.size }
func (i *fileInfo) Mode() os.FileMode  { return i.mode }
func (i *fileInfo) ModTime() time.Time { return i.modTime }
func (i *fileInfo) IsDir() bool        { return i.mode.IsDir() }
func (i *fileInfo) Sys() any           { return nil }

// file is an open handle.
type file struct {
	fs                  *FS
	n                   *node
	name                string
	gen                 int
	read, write, append bool
	closed              bool
	off                 int64
	dirOff              int // entries already returned by Readdir
}

var _ afero.File = (*file)(nil)

// use checks the handle can be used. The caller holds f.fs.mu.
func (f *file) use(op string) error {
	switch {
	case f.closed:
		return pathErr(op, f.name, fs.ErrClosed)
	case f.gen != f.fs.gen:
		return pathErr(op, f.name, ErrCrashed)
	}
	if err := f.fs.alive(); err != nil {
		return pathErr(op, f.name, err)
	}
	return nil
}

func (f *file) Name() string { return f.name }

// Close closes the handle; it changes nothing durable and is not counted. A handle can be
// closed after a crash.
func (f *file) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}

func (f *file) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	n, err := f.readAt(p, f.off)
	f.off += int64(n)
	return n, err
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.readAt(p, off)
}

func (f *file) readAt(p []byte, off int64) (int, error) {
	if err := f.use("read"); err != nil {
		return 0, err
	}
	switch {
	case f.n.dir || !f.read:
		return 0, pathErr("read", f.name, errors.New("bad file descriptor"))
	case off < 0:
		return 0, pathErr("read", f.name, fs.ErrInvalid)
	case off >= int64(len(f.n.data)):
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *file) Seek(offset int64, whence int) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.use("seek"); err != nil {
		return 0, err
	}
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = f.off + offset
	case io.SeekEnd:
		abs = int64(len(f.n.data)) + offset
	default:
		return 0, pathErr("seek", f.name, fs.ErrInvalid)
	}
	if abs < 0 {
		return 0, pathErr("seek", f.name, fs.ErrInvalid)
	}
	f.off = abs
	return abs, nil
}

func (f *file) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	off := f.off
	if f.append {
		off = int64(len(f.n.data))
	}
	n, err := f.writeAt(p, off)
	if err == nil {
		f.off = off + int64(n)
	}
	return n, err
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.writeAt(p, off)
}

func (f *file) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

// writeAt writes p whole at off, as one operation. The caller holds f.fs.mu.
func (f *file) writeAt(p []byte, off int64) (int, error) {
	if err := f.use("write"); err != nil {
		return 0, err
	}
	switch {
	case f.n.dir || !f.write:
		return 0, pathErr("write", f.name, errors.New("bad file descriptor"))
	case off < 0:
		return 0, pathErr("write", f.name, fs.ErrInvalid)
	}
	if err := f.fs.mutate(); err != nil {
		return 0, pathErr("write", f.name, err)
	}
	if end := off + int64(len(p)); end > int64(len(f.n.data)) {
		f.n.data = append(f.n.data, make([]byte, end-int64(len(f.n.data)))...)
	}
	copy(f.n.data[off:], p)
	f.n.modTime = time.Now()
	return len(p), nil
}

func (f *file) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.use("truncate"); err != nil {
		return err
	}
	switch {
	case f.n.dir || !f.write:
		return pathErr("truncate", f.name, errors.New("bad file descriptor"))
	case size < 0:
		return pathErr("truncate", f.name, fs.ErrInvalid)
	}
	if err := f.fs.mutate(); err != nil {
		return pathErr("truncate", f.name, err)
	}
	if size <= int64(len(f.n.data)) {
		f.n.data = f.n.data[:size:size]
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	return nil
}

// Sync makes the file's contents, or the directory's entry set, durable.
func (f *file) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.use("sync"); err != nil {
		return err
	}
	if err := f.fs.mutate(); err != nil {
		return pathErr("sync", f.name, err)
	}
	if f.n.dir {
		f.n.syncedEntries = maps.Clone(f.n.entries)
		return nil
	}
	f.n.synced = append(make([]byte, 0, len(f.n.data)), f.n.data...)
	return nil
}

func (f *file) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.use("stat"); err != nil {
		return nil, err
	}
	return info(f.name, f.n), nil
}

// Readdir returns the directory's entries, sorted by name, as os.ReadDir's File.Readdir does.
func (f *file) Readdir(count int) ([]os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.use("readdir"); err != nil {
		return nil, err
	}
	if !f.n.dir {
		return nil, pathErr("readdir", f.name, errors.New("not a directory"))
	}
	names := make([]string, 0, len(f.n.entries))
	for name := range f.n.entries {
		names = append(names, name)
	}
	slices.Sort(names)
	if f.dirOff > len(names) {
		f.dirOff = len(names)
	}
	names = names[f.dirOff:]
	if count > 0 {
		if len(names) == 0 {
			return nil, io.EOF
		}
		names = names[:min(count, len(names))]
	}
	f.dirOff += len(names)
	out := make([]os.FileInfo, len(names))
	for i, name := range names {
		out[i] = info(name, f.n.entries[name])
	}
	return out, nil
}

// Readdirnames returns the names Readdir would describe.
func (f *file) Readdirnames(n int) ([]string, error) {
	infos, err := f.Readdir(n)
	names := make([]string, len(infos))
	for i, fi := range infos {
		names[i] = fi.Name()
	}
	return names, err
}
