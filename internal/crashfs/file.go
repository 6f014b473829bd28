package crashfs

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/afero"
)

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

func (i *fileInfo) Name() string { return i.name }

func (i *fileInfo) Size() int64 { return i.size }

func (i *fileInfo) Mode() os.FileMode { return i.mode }

func (i *fileInfo) ModTime() time.Time { return i.modTime }

func (i *fileInfo) IsDir() bool { return i.mode.IsDir() }

func (i *fileInfo) Sys() any { return nil }

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
