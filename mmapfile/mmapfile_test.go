//go:build linux

package mmapfile_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/medium/mediumtest"
	"github.com/writeout/writeout/mmapfile"
)

// requireEmptyDir checks that dir holds no file.
func requireEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.Empty(t, names, "files left in %s", dir)
}

// opener returns a mediumtest.Open for opts, with each medium's directory checked empty at the
// end of the test.
func opener(opts mmapfile.Options) mediumtest.Open[*testing.T] {
	return func(t *testing.T) medium.Medium {
		o := opts
		o.Dir = t.TempDir()
		m, err := mmapfile.New(o)
		require.NoError(t, err)
		t.Cleanup(func() {
			require.NoError(t, m.Close())
			requireEmptyDir(t, o.Dir)
		})
		return m
	}
}

// TestConformance is bar 1 for mmapfile, with the default window, in every durability mode. The
// in-package TestConformanceRecorded runs the suite with 64 KiB windows (growth through many
// windows), in every durability mode, with pacing (TrickleBytes) on and off, with every system
// call checked.
func TestConformance(t *testing.T) {
	t.Run("default", func(t *testing.T) { mediumtest.Run(t, opener(mmapfile.Options{})) })
	for _, mode := range []medium.SyncMode{medium.SyncNone, medium.SyncAll} {
		t.Run("durability="+mode.String(), func(t *testing.T) {
			mediumtest.Run(t, opener(mmapfile.Options{Durability: medium.Durability{Sync: mode}}))
		})
	}
	t.Run("trickle=64KiB", func(t *testing.T) {
		mediumtest.Run(t, opener(mmapfile.Options{Durability: medium.Durability{TrickleBytes: 64 << 10}}))
	})
}

func TestOptions(t *testing.T) {
	dir := t.TempDir()
	page := int64(os.Getpagesize())
	notDir := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(notDir, []byte("x"), 0o600))

	// Every failure wraps a sentinel (medium.ErrInvalid for an invalid option) or the system's
	// error, and names the package.
	f := func(name string, opts mmapfile.Options, want error) {
		t.Helper()
		m, err := mmapfile.New(opts)
		require.Error(t, err, name)
		require.Nil(t, m, name)
		require.ErrorIs(t, err, want, name)
		require.True(t, strings.HasPrefix(err.Error(), "mmapfile: "), "%s: %q names the package", name, err)
		t.Logf("%s: %v", name, err)
	}
	f("mem fs", mmapfile.Options{Fs: afero.NewMemMapFs(), Dir: dir}, medium.ErrInvalid)
	f("base path fs", mmapfile.Options{Fs: afero.NewBasePathFs(afero.NewOsFs(), dir), Dir: dir}, medium.ErrInvalid)
	f("read-only os fs", mmapfile.Options{Fs: afero.NewReadOnlyFs(afero.NewOsFs()), Dir: dir}, medium.ErrInvalid)
	f("window not a page multiple", mmapfile.Options{Dir: dir, WindowSize: page + 1}, medium.ErrInvalid)
	f("window smaller than a page", mmapfile.Options{Dir: dir, WindowSize: 1000}, medium.ErrInvalid)
	f("negative window", mmapfile.Options{Dir: dir, WindowSize: -page}, medium.ErrInvalid)
	f("bad sync mode", mmapfile.Options{Dir: dir, Durability: medium.Durability{Sync: 9}}, medium.ErrInvalid)
	f("negative trickle", mmapfile.Options{Dir: dir, Durability: medium.Durability{TrickleBytes: -1}}, medium.ErrInvalid)
	f("dir is a file", mmapfile.Options{Dir: notDir}, medium.ErrInvalid)
	f("missing dir", mmapfile.Options{Dir: filepath.Join(dir, "missing")}, os.ErrNotExist)
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		require.NoError(t, os.Mkdir(ro, 0o500))
		f("unwritable dir", mmapfile.Options{Dir: ro}, os.ErrPermission)
	}

	// The OS file system is accepted, as a pointer or a value, and so is an empty Dir.
	for _, fs := range []afero.Fs{nil, afero.NewOsFs(), afero.OsFs{}} {
		m, err := mmapfile.New(mmapfile.Options{Fs: fs, Dir: dir, WindowSize: page})
		require.NoError(t, err, "%T", fs)
		require.NoError(t, m.Close())
	}
	m, err := mmapfile.New(mmapfile.Options{})
	require.NoError(t, err)
	require.NoError(t, m.Close())
}

// fileMappings counts the lines of /proc/self/maps, and those naming a file in dir.
func fileMappings(t *testing.T, dir string) (all, inDir int) {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		all++
		if strings.Contains(s.Text(), dir+"/") {
			inDir++
		}
	}
	require.NoError(t, s.Err())
	return all, inDir
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// TestMappingsReleased is bar 3 for mmapfile: after Close the count of mappings in
// /proc/self/maps is back where it started and the directory holds no file.
//
// The Go runtime and libc map memory of their own (heaps, stacks of the threads that block in
// system calls; more under -race), so the workload runs once to warm them up and the counts
// are taken around four more runs of it: a mapping leaked by each run adds at least four,
// while the runtime's own may add one or two at any time (seen under -race: 81 for 80).
func TestMappingsReleased(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	got := make([]byte, 3<<20)
	workload := func(dir string, window int64) (inDirOpen int) {
		m, err := mmapfile.New(mmapfile.Options{Dir: dir, WindowSize: window})
		require.NoError(t, err)
		child, err := m.NewChild()
		require.NoError(t, err)
		for _, md := range []medium.Medium{m, child} {
			for range 3 {
				b, err := md.NewBytes()
				require.NoError(t, err)
				for range 48 { // 3 MiB
					_, err := b.Write(payload)
					require.NoError(t, err)
				}
				_, err = b.ReadAt(got, 0)
				require.NoError(t, err)
				_, err = b.WriteTo(io.Discard)
				require.NoError(t, err)
			}
		}
		_, inDirOpen = fileMappings(t, dir)
		require.NoError(t, m.Close())
		return inDirOpen
	}
	for _, window := range []int64{64 << 10, 64 << 20} { // 64 MiB: the default
		dir := t.TempDir()
		workload(dir, window)

		allBefore, inDirBefore := fileMappings(t, dir)
		fdsBefore := openFDs(t)
		inDirOpen := workload(dir, window)
		for range 3 {
			workload(dir, window)
		}
		allAfter, inDirAfter := fileMappings(t, dir)
		fdsAfter := openFDs(t)
		t.Logf("window=%d: mappings before %d (%d of the medium), %d of the medium while open, after Close %d (%d); fds %d -> %d",
			window, allBefore, inDirBefore, inDirOpen, allAfter, inDirAfter, fdsBefore, fdsAfter)
		require.Zero(t, inDirBefore)
		require.Greater(t, inDirOpen, 0, "the medium's windows are in /proc/self/maps while it is open")
		require.Zero(t, inDirAfter, "a window of the medium is still mapped after Close")
		require.InDelta(t, allBefore, allAfter, 2, "count of mappings after Close, four runs later")
		require.Equal(t, fdsBefore, fdsAfter, "open file descriptors after Close")
		requireEmptyDir(t, dir)
	}
}

func TestNoFileInDirWhileOpen(t *testing.T) {
	dir := t.TempDir()
	m, err := mmapfile.New(mmapfile.Options{Dir: dir})
	require.NoError(t, err)
	b, err := m.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 1<<20))
	require.NoError(t, err)
	requireEmptyDir(t, dir)
	assert.NoError(t, m.Close())
	assert.NoError(t, m.Close(), "second Close")
}

// TestFullFileSystem fills a small real file system (set WRITEOUT_SMALL_FS_DIR to a directory on
// one, such as a tmpfs mounted with size=1m) until a write fails: the failure is ENOSPC from the
// write, not a SIGBUS, and every byte written before reads back.
func TestFullFileSystem(t *testing.T) {
	dir := os.Getenv("WRITEOUT_SMALL_FS_DIR")
	if dir == "" {
		t.Skip("set WRITEOUT_SMALL_FS_DIR to a directory on a small file system")
	}
	dir, err := os.MkdirTemp(dir, "mmapfile-test-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	m, err := mmapfile.New(mmapfile.Options{Dir: dir, WindowSize: 1 << 20})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	b, err := m.NewBytes()
	require.NoError(t, err)
	var model bytes.Buffer
	p := make([]byte, 1000)
	for i := 0; ; i++ {
		for j := range p {
			p[j] = byte(i ^ j)
		}
		n, err := b.Write(p)
		model.Write(p[:n])
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			t.Logf("after %d bytes: %v", model.Len(), err)
			break
		}
		require.Less(t, i, 1<<20, "the file system never filled up")
	}
	got := make([]byte, model.Len())
	_, err = b.ReadAt(got, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(model.Bytes(), got))
}
