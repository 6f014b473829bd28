package crashfs_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/crashfs"
)

// tree returns every file and directory under the root: a file's path maps to its contents,
// a directory's path (with a trailing slash) to "".
func tree(t *testing.T, fsys afero.Fs) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		infos, err := afero.ReadDir(fsys, dir)
		require.NoError(t, err)
		for _, fi := range infos {
			p := path.Join(dir, fi.Name())
			if fi.IsDir() {
				out[p+"/"] = ""
				walk(p)
				continue
			}
			b, err := afero.ReadFile(fsys, p)
			require.NoError(t, err)
			require.Equal(t, int64(len(b)), fi.Size())
			out[p] = string(b)
		}
	}
	walk("/")
	return out
}

// A few steps, each failing the test on error.
func write(t *testing.T, fsys afero.Fs, name, data string, sync bool) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString(data)
	require.NoError(t, err)
	if sync {
		require.NoError(t, f.Sync())
	}
	require.NoError(t, f.Close())
}

func syncFile(t *testing.T, fsys afero.Fs, name string) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

func syncDir(t *testing.T, fsys afero.Fs, name string) {
	t.Helper()
	d, err := fsys.Open(name)
	require.NoError(t, err)
	require.NoError(t, d.Sync())
	require.NoError(t, d.Close())
}

func appendTo(t *testing.T, fsys afero.Fs, name, data string, sync bool) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte(data))
	require.NoError(t, err)
	if sync {
		require.NoError(t, f.Sync())
	}
	require.NoError(t, f.Close())
}

// TestCrashModel runs sequences of operations, crashes, and checks what survived; it also
// checks that before the crash everything is visible.
func TestCrashModel(t *testing.T) {
	crashModelWrites(t)
	crashModelRenames(t)
	crashModelRemovesAndDirs(t)
}

// crashCase returns f, which runs one case of TestCrashModel as a subtest of t: in a file
// system holding the synced directory /d, steps, then the tree before (unless nil) and after
// a crash, and after a second crash.
func crashCase(t *testing.T) func(name string, steps func(t *testing.T, fsys afero.Fs), before, after map[string]string) {
	return func(name string, steps func(t *testing.T, fsys afero.Fs), before, after map[string]string) {
		t.Helper()
		t.Run(name, func(t *testing.T) {
			fsys := crashfs.New()
			require.NoError(t, fsys.Mkdir("/d", 0o755))
			syncDir(t, fsys, "/")
			steps(t, fsys)
			if before != nil {
				require.Equal(t, before, tree(t, fsys), "before the crash")
			}
			fsys.Crash()
			require.Equal(t, after, tree(t, fsys), "after the crash")
			// A second crash changes nothing: what survived is durable.
			fsys.Crash()
			require.Equal(t, after, tree(t, fsys), "after a second crash")
		})
	}
}

// with returns the tree of /d holding the paths and contents kv.
func with(kv ...string) map[string]string {
	out := map[string]string{"/d/": ""}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// crashModelWrites: creating, writing, truncating and syncing files.
func crashModelWrites(t *testing.T) {
	f, d := crashCase(t), with()
	f("nothing", func(*testing.T, afero.Fs) {}, d, d)
	f("create+write, no sync", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "hello", false)
	}, with("/d/a", "hello"), d)
	f("file synced, dir not", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "hello", true)
	}, with("/d/a", "hello"), d)
	f("dir synced, file not: empty file", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "hello", false)
		syncDir(t, fsys, "/d")
	}, with("/d/a", "hello"), with("/d/a", ""))
	f("file and dir synced", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "hello", true)
		syncDir(t, fsys, "/d")
	}, with("/d/a", "hello"), with("/d/a", "hello"))
	f("dir synced before the file: order does not matter", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "hello", false)
		syncDir(t, fsys, "/d")
		syncFile(t, fsys, "/d/a")
	}, with("/d/a", "hello"), with("/d/a", "hello"))
	f("writes after the sync are lost", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "hello", true)
		syncDir(t, fsys, "/d")
		appendTo(t, fsys, "/d/a", " world", false)
	}, with("/d/a", "hello world"), with("/d/a", "hello"))
	f("multiple syncs: the last counts", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "one", true)
		syncDir(t, fsys, "/d")
		appendTo(t, fsys, "/d/a", "+two", true)
		appendTo(t, fsys, "/d/a", "+three", false)
	}, with("/d/a", "one+two+three"), with("/d/a", "one+two"))
	f("O_TRUNC rewrite unsynced: old contents back", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "old", true)
		syncDir(t, fsys, "/d")
		write(t, fsys, "/d/a", "new!", false)
	}, with("/d/a", "new!"), with("/d/a", "old"))
	f("truncate unsynced", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "hello", true)
		syncDir(t, fsys, "/d")
		g, err := fsys.OpenFile("/d/a", os.O_RDWR, 0)
		require.NoError(t, err)
		require.NoError(t, g.Truncate(2))
		require.NoError(t, g.Close())
	}, with("/d/a", "he"), with("/d/a", "hello"))
	f("truncate synced, grown", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "hello", true)
		syncDir(t, fsys, "/d")
		g, err := fsys.OpenFile("/d/a", os.O_RDWR, 0)
		require.NoError(t, err)
		require.NoError(t, g.Truncate(2))
		require.NoError(t, g.Sync())
		require.NoError(t, g.Truncate(4))
		require.NoError(t, g.Sync())
		require.NoError(t, g.Close())
	}, with("/d/a", "he\x00\x00"), with("/d/a", "he\x00\x00"))
}

// crashModelRenames: renames within and across directories.
func crashModelRenames(t *testing.T) {
	f := crashCase(t)
	f("rename without dir sync is undone", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "hello", true)
		syncDir(t, fsys, "/d")
		require.NoError(t, fsys.Rename("/d/a", "/d/b"))
	}, with("/d/b", "hello"), with("/d/a", "hello"))
	f("rename with dir sync", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "hello", true)
		syncDir(t, fsys, "/d")
		require.NoError(t, fsys.Rename("/d/a", "/d/b"))
		syncDir(t, fsys, "/d")
	}, with("/d/b", "hello"), with("/d/b", "hello"))
	f("rename over a file, unsynced: the old file is back", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/dst", "old", true)
		syncDir(t, fsys, "/d")
		write(t, fsys, "/d/tmp", "new", true)
		require.NoError(t, fsys.Rename("/d/tmp", "/d/dst"))
	}, with("/d/dst", "new"), with("/d/dst", "old"))
	f("rename over a file, synced", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/dst", "old", true)
		syncDir(t, fsys, "/d")
		write(t, fsys, "/d/tmp", "new", true)
		require.NoError(t, fsys.Rename("/d/tmp", "/d/dst"))
		syncDir(t, fsys, "/d")
	}, with("/d/dst", "new"), with("/d/dst", "new"))
	f("rename of an unsynced file over a file, dir synced: empty", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/dst", "old", true)
		syncDir(t, fsys, "/d")
		write(t, fsys, "/d/tmp", "new", false)
		require.NoError(t, fsys.Rename("/d/tmp", "/d/dst"))
		syncDir(t, fsys, "/d")
	}, with("/d/dst", "new"), with("/d/dst", ""))
	f("rename across dirs, only the destination synced: under both names", func(t *testing.T, fsys afero.Fs) {
		require.NoError(t, fsys.Mkdir("/e", 0o755))
		syncDir(t, fsys, "/")
		write(t, fsys, "/d/a", "hello", true)
		syncDir(t, fsys, "/d")
		require.NoError(t, fsys.Rename("/d/a", "/e/b"))
		syncDir(t, fsys, "/e")
	}, map[string]string{"/d/": "", "/e/": "", "/e/b": "hello"},
		map[string]string{"/d/": "", "/d/a": "hello", "/e/": "", "/e/b": "hello"})
	f("rename across dirs, only the source synced: lost", func(t *testing.T, fsys afero.Fs) {
		require.NoError(t, fsys.Mkdir("/e", 0o755))
		syncDir(t, fsys, "/")
		write(t, fsys, "/d/a", "hello", true)
		syncDir(t, fsys, "/d")
		require.NoError(t, fsys.Rename("/d/a", "/e/b"))
		syncDir(t, fsys, "/d")
	}, map[string]string{"/d/": "", "/e/": "", "/e/b": "hello"},
		map[string]string{"/d/": "", "/e/": ""})
}

// crashModelRemovesAndDirs: removes, new directories, writes past the end.
func crashModelRemovesAndDirs(t *testing.T) {
	f, d := crashCase(t), with()
	f("remove unsynced comes back", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "hello", true)
		syncDir(t, fsys, "/d")
		require.NoError(t, fsys.Remove("/d/a"))
	}, d, with("/d/a", "hello"))
	f("remove synced", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "hello", true)
		syncDir(t, fsys, "/d")
		require.NoError(t, fsys.Remove("/d/a"))
		syncDir(t, fsys, "/d")
	}, d, d)
	f("remove and recreate: a new file", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/a", "hello", true)
		syncDir(t, fsys, "/d")
		require.NoError(t, fsys.Remove("/d/a"))
		write(t, fsys, "/d/a", "other", false)
		syncDir(t, fsys, "/d")
	}, with("/d/a", "other"), with("/d/a", ""))
	f("new dir, parent not synced: gone with its files", func(t *testing.T, fsys afero.Fs) {
		require.NoError(t, fsys.MkdirAll("/d/x/y", 0o755))
		write(t, fsys, "/d/x/y/a", "hello", true)
		syncDir(t, fsys, "/d/x/y")
		syncDir(t, fsys, "/d/x")
	}, with("/d/x/", "", "/d/x/y/", "", "/d/x/y/a", "hello"), d)
	f("new dir, parents synced", func(t *testing.T, fsys afero.Fs) {
		require.NoError(t, fsys.MkdirAll("/d/x", 0o755))
		write(t, fsys, "/d/x/a", "hello", true)
		syncDir(t, fsys, "/d/x")
		syncDir(t, fsys, "/d")
	}, with("/d/x/", "", "/d/x/a", "hello"), with("/d/x/", "", "/d/x/a", "hello"))
	f("new dir, / not synced since: gone", func(t *testing.T, fsys afero.Fs) {
		require.NoError(t, fsys.Mkdir("/e", 0o755))
	}, map[string]string{"/d/": "", "/e/": ""}, d)
	f("WriteAt past the end, synced", func(t *testing.T, fsys afero.Fs) {
		g, err := fsys.Create("/d/a")
		require.NoError(t, err)
		_, err = g.WriteAt([]byte("xy"), 3)
		require.NoError(t, err)
		require.NoError(t, g.Sync())
		_, err = g.WriteAt([]byte("ab"), 0)
		require.NoError(t, err)
		require.NoError(t, g.Close())
		syncDir(t, fsys, "/d")
	}, with("/d/a", "ab\x00xy"), with("/d/a", "\x00\x00\x00xy"))
}

// TestCrashKillsHandles checks a handle opened before a crash fails with ErrCrashed, even if
// its file survived, and that Close still works.
func TestCrashKillsHandles(t *testing.T) {
	fsys := crashfs.New()
	write(t, fsys, "/a", "hello", true)
	syncDir(t, fsys, "/")
	g, err := fsys.OpenFile("/a", os.O_RDWR, 0)
	require.NoError(t, err)
	fsys.Crash()
	_, err = g.Write([]byte("x"))
	require.ErrorIs(t, err, crashfs.ErrCrashed)
	require.ErrorIs(t, g.Sync(), crashfs.ErrCrashed)
	_, err = g.Read(make([]byte, 1))
	require.ErrorIs(t, err, crashfs.ErrCrashed)
	require.NoError(t, g.Close())
	b, err := afero.ReadFile(fsys, "/a")
	require.NoError(t, err)
	require.Equal(t, "hello", string(b))
}

// TestCrashAfter counts the mutating operations of a workload and crashes after each in turn.
func TestCrashAfter(t *testing.T) {
	// The workload: a durable publish by rename of a new file over an old one.
	run := func(fsys afero.Fs) error {
		g, err := fsys.Create("/d/tmp")
		if err != nil {
			return err
		}
		_, err = g.Write([]byte("new"))
		if err == nil {
			_, err = g.Write([]byte("!"))
		}
		if err == nil {
			err = g.Sync()
		}
		err = errors.Join(err, g.Close())
		if err != nil {
			return err
		}
		if _, err := fsys.Stat("/d/dst"); err != nil { // not mutating: not counted
			return err
		}
		if err := fsys.Rename("/d/tmp", "/d/dst"); err != nil {
			return err
		}
		d, err := fsys.Open("/d")
		if err != nil {
			return err
		}
		return errors.Join(d.Sync(), d.Close())
	}
	fsys := crashfs.New()
	require.NoError(t, fsys.Mkdir("/d", 0o755))
	write(t, fsys, "/d/dst", "old", true)
	syncDir(t, fsys, "/d")
	syncDir(t, fsys, "/")
	var seen []string
	for k := 0; ; k++ {
		fsys.SetCrashAfter(k)
		err := run(fsys)
		crashed := fsys.Crashed()
		if !crashed {
			require.NoError(t, err)
			require.Equal(t, 6, k, "create, write, write, sync, rename, dir sync")
			require.Equal(t, 6, fsys.Ops())
		} else {
			require.ErrorIs(t, err, crashfs.ErrCrashed, "k=%d", k)
			require.Equal(t, k, fsys.Ops())
			// Past the crash point, everything fails, reads included.
			_, err := fsys.Stat("/d")
			require.ErrorIs(t, err, crashfs.ErrCrashed)
		}
		fsys.Crash()
		got := tree(t, fsys)
		seen = append(seen, got["/d/dst"])
		if k < 6 {
			// Until the directory sync, the rename is undone; tmp's entry never survives.
			require.Equal(t, map[string]string{"/d/": "", "/d/dst": "old"}, got, "k=%d", k)
		} else {
			require.Equal(t, map[string]string{"/d/": "", "/d/dst": "new!"}, got, "k=%d", k)
		}
		if !crashed {
			break
		}
		// Reset for the next round.
		write(t, fsys, "/d/dst", "old", true)
		syncDir(t, fsys, "/d")
	}
	require.Len(t, seen, 7)
}

// TestCrashFsBasics checks the afero semantics the model relies on.
func TestCrashFsBasics(t *testing.T) {
	fsys := crashfs.New()
	_, err := fsys.Open("/nope")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, fsys.MkdirAll("/a/b", 0o755))
	require.NoError(t, fsys.MkdirAll("/a/b", 0o755))
	require.ErrorIs(t, fsys.Mkdir("/a", 0o755), fs.ErrExist)
	tf, err := afero.TempFile(fsys, "/a", ".x-*.tmp")
	require.NoError(t, err)
	tf2, err := afero.TempFile(fsys, "/a", ".x-*.tmp")
	require.NoError(t, err)
	require.NotEqual(t, tf.Name(), tf2.Name())
	require.NoError(t, tf2.Close())
	_, err = fsys.OpenFile(tf.Name(), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	require.ErrorIs(t, err, fs.ErrExist)
	_, err = tf.WriteString("0123456789")
	require.NoError(t, err)
	pos, err := tf.Seek(2, io.SeekStart)
	require.NoError(t, err)
	require.Equal(t, int64(2), pos)
	buf := make([]byte, 3)
	_, err = io.ReadFull(tf, buf)
	require.NoError(t, err)
	require.Equal(t, "234", string(buf))
	n, err := tf.ReadAt(buf, 8)
	require.Equal(t, 2, n)
	require.ErrorIs(t, err, io.EOF)
	fi, err := tf.Stat()
	require.NoError(t, err)
	require.Equal(t, int64(10), fi.Size())
	require.NoError(t, tf.Close())
	require.ErrorIs(t, tf.Close(), fs.ErrClosed)
	require.NoError(t, fsys.Chmod(tf.Name(), 0o640))
	fi, err = fsys.Stat(tf.Name())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), fi.Mode())

	ro, err := fsys.Open(tf.Name())
	require.NoError(t, err)
	_, err = ro.Write([]byte("x"))
	require.Error(t, err)
	require.NoError(t, ro.Close())

	d, err := fsys.Open("/a")
	require.NoError(t, err)
	names, err := d.Readdirnames(-1)
	require.NoError(t, err)
	require.Len(t, names, 3) // b and two temp files
	require.Equal(t, "b", names[2], "sorted")
	require.NoError(t, d.Close())
	d, err = fsys.Open("/a")
	require.NoError(t, err)
	one, err := d.Readdir(2)
	require.NoError(t, err)
	require.Len(t, one, 2)
	rest, err := d.Readdir(2)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	_, err = d.Readdir(2)
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, d.Close())

	require.Error(t, fsys.Remove("/a"), "not empty")
	require.ErrorIs(t, fsys.Rename("/a/nope", "/a/x"), fs.ErrNotExist)
	require.ErrorIs(t, fsys.Rename("/a/b", tf.Name()), fs.ErrExist)
	require.Error(t, fsys.Rename("/a", "/a/b/c"), "into itself")
	require.NoError(t, fsys.RemoveAll("/a"))
	require.NoError(t, fsys.RemoveAll("/a"))
	_, err = fsys.Stat("/a")
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// TestCrashKeepingDirs checks the harsher crash keeps every directory change and still drops
// unsynced data.
func TestCrashKeepingDirs(t *testing.T) {
	fsys := crashfs.New()
	require.NoError(t, fsys.MkdirAll("/d/x", 0o755))
	write(t, fsys, "/d/dst", "old", true)
	write(t, fsys, "/d/synced", "s", true)
	write(t, fsys, "/d/tmp", "new", false)
	write(t, fsys, "/d/gone", "g", true)
	require.NoError(t, fsys.Rename("/d/tmp", "/d/dst"))
	require.NoError(t, fsys.Remove("/d/gone"))
	appendTo(t, fsys, "/d/synced", "+more", false)
	write(t, fsys, "/d/x/a", "a", true)
	fsys.CrashKeepingDirs()
	want := map[string]string{"/d/": "", "/d/x/": "", "/d/x/a": "a", "/d/dst": "", "/d/synced": "s"}
	require.Equal(t, want, tree(t, fsys))
	// What it kept is durable now.
	fsys.Crash()
	require.Equal(t, want, tree(t, fsys))
}

// TestCrashClone checks a clone carries the live and the synced state, shares nothing with its
// original, and keeps a file under two names one file.
func TestCrashClone(t *testing.T) {
	base := crashfs.New()
	require.NoError(t, base.Mkdir("/d", 0o755))
	syncDir(t, base, "/")
	write(t, base, "/d/a", "synced", true)
	syncDir(t, base, "/d")
	appendTo(t, base, "/d/a", "+live", false)
	write(t, base, "/d/new", "n", false)
	// /d/a under a second name in /e, durable there: one file under two names after a crash.
	require.NoError(t, base.Mkdir("/e", 0o755))
	syncDir(t, base, "/")
	require.NoError(t, base.Rename("/d/a", "/e/a"))
	syncDir(t, base, "/e")
	require.NoError(t, base.Rename("/e/a", "/d/a"))
	before := tree(t, base)

	c := base.Clone()
	require.Equal(t, before, tree(t, c))
	appendTo(t, c, "/d/a", "+clone", true)
	require.NoError(t, c.Remove("/d/new"))
	require.Equal(t, before, tree(t, base), "the clone changed its original")

	c.Crash()
	require.Equal(t, map[string]string{"/d/": "", "/e/": "", "/d/a": "synced+live+clone", "/e/a": "synced+live+clone"}, tree(t, c))
	base.Crash()
	require.Equal(t, map[string]string{"/d/": "", "/e/": "", "/d/a": "synced", "/e/a": "synced"}, tree(t, base))
}

// TestRenameNoReplace checks the rename that never replaces: a taken name (file, directory, or
// the source itself) fails with fs.ErrExist and changes nothing, counted as one operation; a
// free one renames as Rename does, undone by a crash unless the directory is synced.
func TestRenameNoReplace(t *testing.T) {
	f := crashCase(t)
	f("free name, dir synced", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/tmp", "new", true)
		require.NoError(t, fsys.(*crashfs.FS).RenameNoReplace("/d/tmp", "/d/dst"))
		syncDir(t, fsys, "/d")
	}, with("/d/dst", "new"), with("/d/dst", "new"))
	f("free name, dir not synced: undone", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/tmp", "new", true)
		syncDir(t, fsys, "/d")
		require.NoError(t, fsys.(*crashfs.FS).RenameNoReplace("/d/tmp", "/d/dst"))
	}, with("/d/dst", "new"), with("/d/tmp", "new"))
	f("taken name: refused, both kept", func(t *testing.T, fsys afero.Fs) {
		write(t, fsys, "/d/dst", "old", true)
		write(t, fsys, "/d/tmp", "new", true)
		syncDir(t, fsys, "/d")
		err := fsys.(*crashfs.FS).RenameNoReplace("/d/tmp", "/d/dst")
		require.ErrorIs(t, err, fs.ErrExist)
		var le *os.LinkError
		require.ErrorAs(t, err, &le)
	}, map[string]string{"/d/": "", "/d/dst": "old", "/d/tmp": "new"},
		map[string]string{"/d/": "", "/d/dst": "old", "/d/tmp": "new"})
	f("onto a directory or itself: refused", func(t *testing.T, fsys afero.Fs) {
		require.NoError(t, fsys.Mkdir("/d/sub", 0o755))
		write(t, fsys, "/d/tmp", "new", true)
		syncDir(t, fsys, "/d")
		require.ErrorIs(t, fsys.(*crashfs.FS).RenameNoReplace("/d/tmp", "/d/sub"), fs.ErrExist)
		require.ErrorIs(t, fsys.(*crashfs.FS).RenameNoReplace("/d/tmp", "/d/tmp"), fs.ErrExist)
		require.ErrorIs(t, fsys.(*crashfs.FS).RenameNoReplace("/d/none", "/d/x"), fs.ErrNotExist)
	}, map[string]string{"/d/": "", "/d/sub/": "", "/d/tmp": "new"},
		map[string]string{"/d/": "", "/d/sub/": "", "/d/tmp": "new"})

	// A crash point: the rename is one mutating operation; a refused one is not counted, and
	// past the crash point the call fails with ErrCrashed and does nothing.
	fsys := crashfs.New()
	require.NoError(t, fsys.Mkdir("/d", 0o755))
	write(t, fsys, "/d/a", "a", true)
	write(t, fsys, "/d/b", "b", true)
	syncDir(t, fsys, "/d")
	syncDir(t, fsys, "/")
	fsys.SetCrashAfter(1)
	require.ErrorIs(t, fsys.RenameNoReplace("/d/a", "/d/b"), fs.ErrExist)
	require.Equal(t, 0, fsys.Ops())
	require.NoError(t, fsys.RenameNoReplace("/d/a", "/d/c"))
	require.Equal(t, 1, fsys.Ops())
	require.ErrorIs(t, fsys.RenameNoReplace("/d/c", "/d/e"), crashfs.ErrCrashed)
	require.True(t, fsys.Crashed())
	fsys.CrashKeepingDirs()
	require.Equal(t, map[string]string{"/d/": "", "/d/b": "b", "/d/c": "a"}, tree(t, fsys))
}
