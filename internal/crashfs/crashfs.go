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
// Every mutating operation (creating or truncating open, Mkdir, Remove, Rename,
// RenameNoReplace, Chmod, Chown, Chtimes, Write, WriteAt, WriteString, Truncate, Sync) is
// counted; Ops returns the count. With
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
