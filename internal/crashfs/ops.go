package crashfs

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/afero"
)

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
func (f *FS) Rename(oldname, newname string) error { return f.rename(oldname, newname, false) }

// RenameNoReplace renames oldname to newname only if newname does not exist, as Linux
// renameat2 with RENAME_NOREPLACE does: an existing newname (file or directory, even oldname
// itself) fails with an error wrapping fs.ErrExist and changes nothing. It is a mutating
// operation modelled as Rename is: a directory change of each directory involved, durable
// only once that directory is synced.
func (f *FS) RenameNoReplace(oldname, newname string) error { return f.rename(oldname, newname, true) }

func (f *FS) rename(oldname, newname string, noReplace bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	op := "crashfs: rename"
	if noReplace {
		op = "crashfs: rename (no replace)"
	}
	lerr := func(err error) error {
		return &os.LinkError{Op: op, Old: oldname, New: newname, Err: err}
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
	if _, ok := nd.entries[nbase]; ok && noReplace {
		return lerr(fs.ErrExist)
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
