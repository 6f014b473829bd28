// Package faultfs wraps an afero.Fs to count its operations and to fail chosen ones, in the
// manner of Pebble's vfs/errorfs. Tests use it to fail operation 0, 1, 2, ... in turn until a
// run succeeds, or to fail every operation that matches a predicate (a write past some size, a
// sync, a rename) with an error such as ENOSPC or EIO.
//
// Every method of the Fs and of the files it opens counts as one operation, numbered from 0 in
// the order they start. An injected failure is returned as an *os.PathError wrapping the
// injector's error, so errors.Is finds it.
package faultfs

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/afero"
)

// Kind names a class of operation.
type Kind string

// The operation kinds.
const (
	KindOpen     Kind = "open" // Open, OpenFile and Create
	KindMkdir    Kind = "mkdir"
	KindRemove   Kind = "remove"
	KindRename   Kind = "rename"
	KindStat     Kind = "stat"
	KindChange   Kind = "change" // Chmod, Chown, Chtimes
	KindRead     Kind = "read"   // Read, ReadAt, Readdir, Readdirnames
	KindWrite    Kind = "write"  // Write, WriteAt, WriteString
	KindSeek     Kind = "seek"
	KindSync     Kind = "sync"
	KindTruncate Kind = "truncate"
	KindClose    Kind = "close"
)

// Op describes one operation as it starts.
type Op struct {
	N    int64  // index among all operations of the FS, from 0
	Kind Kind   // what it does
	Name string // the method, such as "WriteAt"
	Path string // the path it names, or the file's name
	Off  int64  // for ReadAt and WriteAt, the offset; else -1
	Len  int    // for reads and writes, the length asked for; else 0
}

// Injector decides whether an operation fails: a non-nil error fails it.
type Injector func(Op) error

// FailNth fails the operation numbered n (from 0), and no other.
func FailNth(n int64, err error) Injector {
	return func(op Op) error {
		if op.N == n {
			return err
		}
		return nil
	}
}

// FailKind fails the n-th operation (from 0) of the given kind, and no other.
func FailKind(kind Kind, n int64, err error) Injector {
	var seen atomic.Int64
	return func(op Op) error {
		if op.Kind != kind {
			return nil
		}
		if seen.Add(1)-1 == n {
			return err
		}
		return nil
	}
}

// FailWhen fails every operation for which pred is true.
func FailWhen(pred func(Op) bool, err error) Injector {
	return func(op Op) error {
		if pred(op) {
			return err
		}
		return nil
	}
}

// FS is an afero.Fs that counts and may fail the operations it passes to its base.
type FS struct {
	base     afero.Fs
	n        atomic.Int64
	injected atomic.Int64
	mu       sync.Mutex
	inject   Injector
	counts   map[Kind]int64
}

var _ afero.Fs = (*FS)(nil)

// New wraps base. A nil inject fails nothing.
func New(base afero.Fs, inject Injector) *FS {
	return &FS{base: base, inject: inject, counts: make(map[Kind]int64)}
}

// SetInjector replaces the injector; nil fails nothing.
func (fs *FS) SetInjector(inject Injector) {
	fs.mu.Lock()
	fs.inject = inject
	fs.mu.Unlock()
}

// Ops returns how many operations have started.
func (fs *FS) Ops() int64 { return fs.n.Load() }

// Injected returns how many operations were failed on purpose.
func (fs *FS) Injected() int64 { return fs.injected.Load() }

// Counts returns how many operations of each kind have started.
func (fs *FS) Counts() map[Kind]int64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := make(map[Kind]int64, len(fs.counts))
	for k, v := range fs.counts {
		out[k] = v
	}
	return out
}

// ResetCounts sets every count, and the operation numbering, back to zero.
func (fs *FS) ResetCounts() {
	fs.mu.Lock()
	fs.counts = make(map[Kind]int64)
	fs.n.Store(0)
	fs.mu.Unlock()
}

// Base returns the wrapped file system.
func (fs *FS) Base() afero.Fs { return fs.base }

// check numbers the operation and asks the injector.
func (fs *FS) check(kind Kind, name, path string, off int64, n int) error {
	fs.mu.Lock()
	op := Op{N: fs.n.Add(1) - 1, Kind: kind, Name: name, Path: path, Off: off, Len: n}
	fs.counts[kind]++
	inject := fs.inject
	fs.mu.Unlock()
	if inject == nil {
		return nil
	}
	if err := inject(op); err != nil {
		fs.injected.Add(1)
		return &os.PathError{Op: fmt.Sprintf("%s (injected at op %d)", name, op.N), Path: path, Err: err}
	}
	return nil
}

func (fs *FS) Name() string { return "faultfs(" + fs.base.Name() + ")" }

func (fs *FS) Create(name string) (afero.File, error) {
	if err := fs.check(KindOpen, "Create", name, -1, 0); err != nil {
		return nil, err
	}
	f, err := fs.base.Create(name)
	return fs.wrap(f, err)
}

func (fs *FS) Open(name string) (afero.File, error) {
	if err := fs.check(KindOpen, "Open", name, -1, 0); err != nil {
		return nil, err
	}
	f, err := fs.base.Open(name)
	return fs.wrap(f, err)
}

func (fs *FS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if err := fs.check(KindOpen, "OpenFile", name, -1, 0); err != nil {
		return nil, err
	}
	f, err := fs.base.OpenFile(name, flag, perm)
	return fs.wrap(f, err)
}

func (fs *FS) wrap(f afero.File, err error) (afero.File, error) {
	if err != nil {
		return nil, err
	}
	return &File{fs: fs, f: f}, nil
}

func (fs *FS) Mkdir(name string, perm os.FileMode) error {
	if err := fs.check(KindMkdir, "Mkdir", name, -1, 0); err != nil {
		return err
	}
	return fs.base.Mkdir(name, perm)
}

func (fs *FS) MkdirAll(path string, perm os.FileMode) error {
	if err := fs.check(KindMkdir, "MkdirAll", path, -1, 0); err != nil {
		return err
	}
	return fs.base.MkdirAll(path, perm)
}

func (fs *FS) Remove(name string) error {
	if err := fs.check(KindRemove, "Remove", name, -1, 0); err != nil {
		return err
	}
	return fs.base.Remove(name)
}

func (fs *FS) RemoveAll(path string) error {
	if err := fs.check(KindRemove, "RemoveAll", path, -1, 0); err != nil {
		return err
	}
	return fs.base.RemoveAll(path)
}

func (fs *FS) Rename(oldname, newname string) error {
	if err := fs.check(KindRename, "Rename", oldname+" -> "+newname, -1, 0); err != nil {
		return err
	}
	return fs.base.Rename(oldname, newname)
}

func (fs *FS) Stat(name string) (os.FileInfo, error) {
	if err := fs.check(KindStat, "Stat", name, -1, 0); err != nil {
		return nil, err
	}
	return fs.base.Stat(name)
}

func (fs *FS) Chmod(name string, mode os.FileMode) error {
	if err := fs.check(KindChange, "Chmod", name, -1, 0); err != nil {
		return err
	}
	return fs.base.Chmod(name, mode)
}

func (fs *FS) Chown(name string, uid, gid int) error {
	if err := fs.check(KindChange, "Chown", name, -1, 0); err != nil {
		return err
	}
	return fs.base.Chown(name, uid, gid)
}

func (fs *FS) Chtimes(name string, atime, mtime time.Time) error {
	if err := fs.check(KindChange, "Chtimes", name, -1, 0); err != nil {
		return err
	}
	return fs.base.Chtimes(name, atime, mtime)
}

// File is a file opened through an FS; its operations count and may fail too.
type File struct {
	fs *FS
	f  afero.File
}

var _ afero.File = (*File)(nil)

// Unwrap returns the base file.
func (f *File) Unwrap() afero.File { return f.f }

func (f *File) Name() string { return f.f.Name() }

func (f *File) Close() error {
	if err := f.fs.check(KindClose, "Close", f.f.Name(), -1, 0); err != nil {
		// A failed close still releases the descriptor, as close(2) does on Linux.
		_ = f.f.Close()
		return err
	}
	return f.f.Close()
}

func (f *File) Read(p []byte) (int, error) {
	if err := f.fs.check(KindRead, "Read", f.f.Name(), -1, len(p)); err != nil {
		return 0, err
	}
	return f.f.Read(p)
}

func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(KindRead, "ReadAt", f.f.Name(), off, len(p)); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *File) Seek(offset int64, whence int) (int64, error) {
	if err := f.fs.check(KindSeek, "Seek", f.f.Name(), offset, 0); err != nil {
		return 0, err
	}
	return f.f.Seek(offset, whence)
}

func (f *File) Write(p []byte) (int, error) {
	if err := f.fs.check(KindWrite, "Write", f.f.Name(), -1, len(p)); err != nil {
		return 0, err
	}
	return f.f.Write(p)
}

func (f *File) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(KindWrite, "WriteAt", f.f.Name(), off, len(p)); err != nil {
		return 0, err
	}
	return f.f.WriteAt(p, off)
}

func (f *File) WriteString(s string) (int, error) {
	if err := f.fs.check(KindWrite, "WriteString", f.f.Name(), -1, len(s)); err != nil {
		return 0, err
	}
	return f.f.WriteString(s)
}

func (f *File) Readdir(count int) ([]os.FileInfo, error) {
	if err := f.fs.check(KindRead, "Readdir", f.f.Name(), -1, 0); err != nil {
		return nil, err
	}
	return f.f.Readdir(count)
}

func (f *File) Readdirnames(n int) ([]string, error) {
	if err := f.fs.check(KindRead, "Readdirnames", f.f.Name(), -1, 0); err != nil {
		return nil, err
	}
	return f.f.Readdirnames(n)
}

func (f *File) Stat() (os.FileInfo, error) {
	if err := f.fs.check(KindStat, "File.Stat", f.f.Name(), -1, 0); err != nil {
		return nil, err
	}
	return f.f.Stat()
}

func (f *File) Sync() error {
	if err := f.fs.check(KindSync, "Sync", f.f.Name(), -1, 0); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *File) Truncate(size int64) error {
	if err := f.fs.check(KindTruncate, "Truncate", f.f.Name(), size, 0); err != nil {
		return err
	}
	return f.f.Truncate(size)
}
