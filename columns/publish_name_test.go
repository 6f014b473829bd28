package columns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/internal/testhook"
	"github.com/writeout/writeout/medium"
)

// A naming mode of publish: which calls it has, as a function that edits a copy of the calls.
type namingMode struct {
	name    string
	edit    func(c *sys.Calls)
	unnamed bool // the output is an unnamed file until it is named
}

func namingModes(t *testing.T) []namingMode {
	unsupported := func(what string) error { return fmt.Errorf("test: %s: %w", what, sys.ErrUnsupported) }
	modes := []namingMode{
		{name: "named+renameat2", edit: func(c *sys.Calls) {
			c.OpenTmpfile = func(string) (*os.File, error) { return nil, unsupported("O_TMPFILE") }
		}},
		{name: "named+link", edit: func(c *sys.Calls) {
			c.OpenTmpfile = func(string) (*os.File, error) { return nil, unsupported("O_TMPFILE") }
			c.Renameat2 = func(string, string, uint) error { return unsupported("renameat2") }
		}},
	}
	f, err := sys.Default.OpenTmpfile(t.TempDir())
	switch {
	case err == nil && sys.CanLinkUnnamed():
		_ = f.Close()
		modes = append([]namingMode{{name: "unnamed", edit: func(*sys.Calls) {}, unnamed: true}}, modes...)
	case err == nil:
		_ = f.Close()
		t.Log("no /proc/self/fd here: the unnamed mode is not tested")
	default:
		t.Logf("no O_TMPFILE here (%v): the unnamed mode is not tested", err)
	}
	return modes
}

// withCalls returns w using a copy of the default calls edited by edit.
func withCalls(w *writer, edit func(c *sys.Calls)) *writer {
	c := sys.Default
	edit(&c)
	w.calls = &c
	return w
}

// raceBarrier sets the before-publish hook for dst: each of n publications waits there until
// all n have arrived, so that every one is past its checks before any names its file.
func raceBarrier(t *testing.T, dst string, n int) {
	t.Helper()
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	restore := testhook.SetBeforePublish(func(d string) {
		if d != dst {
			return
		}
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(20 * time.Second):
			t.Errorf("only %d of %d publications reached the hook", arrived, n)
		}
	})
	t.Cleanup(restore)
}

// TestPublishRace: bar 5 at the library's level. Two publications to one dst without Replace,
// held by the hook until both are past every check: exactly one succeeds, the other fails with
// an error wrapping fs.ErrExist that says the output exists, and dst is the winner's file,
// alone in the directory. In every naming mode: unnamed file and linkat, named file and
// renameat2(RENAME_NOREPLACE), named file and link then unlink.
func TestPublishRace(t *testing.T) {
	s, rows := publishRows(t, 40)
	want := [2][]byte{writeRows(t, s, rows[:20], writerOptions{}), writeRows(t, s, rows[20:], writerOptions{})}
	require.NotEqual(t, want[0], want[1])
	for _, mode := range namingModes(t) {
		t.Run(mode.name, func(t *testing.T) {
			for round := range 5 {
				dir := t.TempDir()
				dst := filepath.Join(dir, "out.seg")
				raceBarrier(t, dst, 2)
				var errs [2]error
				var wg sync.WaitGroup
				for k := range 2 {
					w := withCalls(filledWriter(t, s, rows[20*k:20*k+20], writerOptions{}), mode.edit)
					wg.Go(func() { _, errs[k] = w.Finish(dst, PublishOptions{}) })
				}
				wg.Wait()
				winner := -1
				for k, err := range errs {
					if err == nil {
						require.Equal(t, -1, winner, "round %d: both publications succeeded", round)
						winner = k
						continue
					}
					require.ErrorIs(t, err, fs.ErrExist, "round %d", round)
					require.ErrorContains(t, err, "publish "+dst+": output exists")
				}
				require.NotEqual(t, -1, winner, "round %d: neither publication succeeded: %v", round, errs)
				got, err := os.ReadFile(dst)
				require.NoError(t, err)
				require.True(t, bytes.Equal(want[winner], got), "round %d: dst is not the winner's file", round)
				require.Equal(t, []string{"out.seg"}, listDir(t, afero.NewOsFs(), dir), "round %d", round)
			}
		})
	}
}

// TestPublishNaming: each mode names the file the way it says: at the hook, an unnamed output
// has left no name in the directory and a named one has its TempPattern name; afterwards only
// dst is there, with the file's bytes and permission. With Replace, an old dst is replaced.
func TestPublishNaming(t *testing.T) {
	s, rows := publishRows(t, 30)
	want := writeRows(t, s, rows, writerOptions{})
	for _, mode := range namingModes(t) {
		t.Run(mode.name, func(t *testing.T) {
			for _, replace := range []bool{false, true} {
				dir := t.TempDir()
				dst := filepath.Join(dir, "out.seg")
				if replace {
					require.NoError(t, os.WriteFile(dst, []byte("old"), 0o644))
				}
				var atHook []string
				t.Cleanup(testhook.SetBeforePublish(func(string) { atHook = listDir(t, afero.NewOsFs(), dir) }))
				var links []string
				w := withCalls(filledWriter(t, s, rows, writerOptions{}), func(c *sys.Calls) {
					mode.edit(c)
					linkat := c.Linkat
					c.Linkat = func(f *os.File, newpath string) error {
						links = append(links, newpath)
						return linkat(f, newpath)
					}
				})
				info, err := w.Finish(dst, PublishOptions{Replace: replace, Perm: 0o640})
				require.NoError(t, err)
				require.Equal(t, 2, info.Syncs)
				var before []string
				if replace {
					before = []string{"out.seg"}
				}
				if mode.unnamed {
					require.Equal(t, before, atHook, "an unnamed output has no name before it is named dst")
					if replace {
						require.Len(t, links, 1)
						require.True(t, IsTempName(filepath.Base(links[0])), "linked first to a temp name: %s", links[0])
					} else {
						require.Equal(t, []string{dst}, links, "linked straight to dst")
					}
				} else {
					require.Len(t, atHook, len(before)+1)
					require.Empty(t, links)
				}
				got, err := os.ReadFile(dst)
				require.NoError(t, err)
				require.True(t, bytes.Equal(want, got))
				st, err := os.Stat(dst)
				require.NoError(t, err)
				require.Equal(t, os.FileMode(0o640), st.Mode().Perm())
				require.Equal(t, []string{"out.seg"}, listDir(t, afero.NewOsFs(), dir))
			}
		})
	}
}

// TestPublishNamingFailures: a failure of each naming call, and of the directory sync after it,
// leaves the directory as it was (an old dst untouched, or, after a replacing rename, gone),
// and the error is returned.
func TestPublishNamingFailures(t *testing.T) {
	s, rows := publishRows(t, 30)
	eio := fmt.Errorf("injected: %w", syscall.EIO)
	f := func(name string, replace bool, edit func(c *sys.Calls)) {
		t.Run(name, func(t *testing.T) {
			for _, mode := range namingModes(t) {
				dir := t.TempDir()
				dst := filepath.Join(dir, "out.seg")
				var before []string
				if replace {
					require.NoError(t, os.WriteFile(dst, []byte("old"), 0o644))
					before = []string{"out.seg"}
				}
				w := withCalls(filledWriter(t, s, rows, writerOptions{}), func(c *sys.Calls) { mode.edit(c); edit(c) })
				_, err := w.Finish(dst, PublishOptions{Replace: replace})
				if err == nil {
					// This mode does not make the failing call.
					require.Equal(t, []string{"out.seg"}, listDir(t, afero.NewOsFs(), dir), mode.name)
					continue
				}
				require.ErrorIs(t, err, syscall.EIO, mode.name)
				require.Equal(t, before, listDir(t, afero.NewOsFs(), dir), mode.name)
				if replace {
					got, err := os.ReadFile(dst)
					require.NoError(t, err)
					require.Equal(t, "old", string(got), mode.name)
				}
			}
		})
	}
	f("linkat", false, func(c *sys.Calls) { c.Linkat = func(*os.File, string) error { return eio } })
	f("linkat-replace", true, func(c *sys.Calls) { c.Linkat = func(*os.File, string) error { return eio } })
	f("renameat2", false, func(c *sys.Calls) { c.Renameat2 = func(string, string, uint) error { return eio } })
	f("link", false, func(c *sys.Calls) {
		c.Renameat2 = func(string, string, uint) error { return fmt.Errorf("test: %w", sys.ErrUnsupported) }
		c.Link = func(string, string) error { return eio }
	})

	// A directory sync that fails after the naming: the new dst stays, complete, and the error
	// says so; with Replace too (the old output is gone by then: removing the new one would
	// leave neither).
	for _, mode := range namingModes(t) {
		for _, replace := range []bool{false, true} {
			dir := t.TempDir()
			dst := filepath.Join(dir, "out.seg")
			if replace {
				require.NoError(t, os.WriteFile(dst, []byte("old"), 0o644))
			}
			w := withCalls(filledWriter(t, s, rows, writerOptions{}), func(c *sys.Calls) {
				mode.edit(c)
				c.Fsync = func(*os.File) error { return eio }
			})
			_, err := w.Finish(dst, PublishOptions{Replace: replace})
			require.ErrorIs(t, err, medium.ErrSync, mode.name)
			require.ErrorContains(t, err, "is in place, complete", mode.name)
			require.Equal(t, []string{"out.seg"}, listDir(t, afero.NewOsFs(), dir), mode.name)
			seg, err := Open(dst)
			require.NoError(t, err, mode.name)
			require.NoError(t, seg.Verify(), mode.name)
			require.NoError(t, seg.Close())
		}
	}

	// Replace over a directory: the rename fails, and the temp name (of an unnamed output, its
	// link) goes with it.
	for _, mode := range namingModes(t) {
		dir := t.TempDir()
		dst := filepath.Join(dir, "out.seg")
		require.NoError(t, os.MkdirAll(filepath.Join(dst, "sub"), 0o755))
		_, err := withCalls(filledWriter(t, s, rows, writerOptions{}), mode.edit).Finish(dst, PublishOptions{Replace: true})
		require.Error(t, err, mode.name)
		require.Equal(t, []string{"out.seg"}, listDir(t, afero.NewOsFs(), dir), mode.name)
	}
}

// TestPublishLinkUnsupported: with neither O_TMPFILE, renameat2's flag nor hard links (a FAT
// file system), publishing without Replace still works, through a check and a rename, and still
// refuses an existing dst.
func TestPublishLinkUnsupported(t *testing.T) {
	s, rows := publishRows(t, 10)
	edit := func(c *sys.Calls) {
		c.OpenTmpfile = func(string) (*os.File, error) { return nil, fmt.Errorf("test: %w", sys.ErrUnsupported) }
		c.Renameat2 = func(string, string, uint) error { return fmt.Errorf("test: %w", sys.ErrUnsupported) }
		c.Link = func(o, n string) error { return &os.LinkError{Op: "link", Old: o, New: n, Err: syscall.EPERM} }
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "out.seg")
	_, err := withCalls(filledWriter(t, s, rows, writerOptions{}), edit).Finish(dst, PublishOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"out.seg"}, listDir(t, afero.NewOsFs(), dir))
	_, err = withCalls(filledWriter(t, s, rows, writerOptions{}), edit).Finish(dst, PublishOptions{})
	require.ErrorIs(t, err, fs.ErrExist)
	require.Equal(t, []string{"out.seg"}, listDir(t, afero.NewOsFs(), dir))
}

// TestPublishIntoFile: PublishOptions.File receives the segment (whatever it held before),
// OpenFile reads it back under the name given, and an unnamed file leaves nothing in the
// directory.
func TestPublishIntoFile(t *testing.T) {
	s, rows := publishRows(t, 30)
	want := writeRows(t, s, rows, writerOptions{})
	dir := t.TempDir()
	file, err := sys.Default.OpenTmpfile(dir)
	if errors.Is(err, sys.ErrUnsupported) {
		file, err = os.CreateTemp(dir, "into-*")
	}
	require.NoError(t, err)
	_, err = file.WriteString("some earlier bytes, longer than nothing")
	require.NoError(t, err)
	var fdatasyncs int
	w := withCalls(filledWriter(t, s, rows, writerOptions{}), func(c *sys.Calls) {
		c.Fdatasync = func(f *os.File) error { fdatasyncs++; return sys.Default.Fdatasync(f) }
	})
	info, err := w.Finish("intermediate segment 0 of phase 1", PublishOptions{File: file, Durability: medium.Durability{TrickleBytes: 4096}})
	require.NoError(t, err)
	require.Equal(t, 1, info.Syncs, "the file, not a directory")
	require.Equal(t, 1, fdatasyncs)
	require.Positive(t, info.Trickles)
	require.Equal(t, "intermediate segment 0 of phase 1", info.Path)
	got := make([]byte, len(want)+1)
	n, _ := file.ReadAt(got, 0)
	require.True(t, bytes.Equal(want, got[:n]), "the file holds the segment and nothing more")

	seg, err := OpenFile(file, "intermediate segment 0 of phase 1")
	require.NoError(t, err)
	require.Equal(t, "intermediate segment 0 of phase 1", seg.Name())
	require.Equal(t, 30, seg.Rows())
	require.NoError(t, seg.Verify())
	require.NoError(t, seg.Close())
	require.ErrorIs(t, file.Close(), os.ErrClosed, "the segment closed the file")

	// A failed write leaves the file to the caller, and nothing in the directory.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	file2, err := os.CreateTemp(dir, "into-*")
	require.NoError(t, err)
	defer file2.Close()
	_, err = filledWriter(t, s, rows, writerOptions{}).FinishContext(ctx, "x", PublishOptions{File: file2})
	require.ErrorIs(t, err, context.Canceled)
	_, err = file2.Stat()
	require.NoError(t, err, "still open")
}

// TestOpenFileFailures: OpenFile closes the file it was given on every failure, and says what
// it was given.
func TestOpenFileFailures(t *testing.T) {
	dir := t.TempDir()
	f, err := os.CreateTemp(dir, "bad-*")
	require.NoError(t, err)
	_, err = f.WriteString("not a segment at all, but long enough to be mapped and read")
	require.NoError(t, err)
	_, err = OpenFile(f, "intermediate segment 3 of phase 2")
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "intermediate segment 3 of phase 2")
	require.ErrorIs(t, f.Close(), os.ErrClosed)

	d, err := os.Open(dir)
	require.NoError(t, err)
	_, err = OpenFile(d, "a directory")
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorIs(t, d.Close(), os.ErrClosed)

	_, err = OpenFile(nil, "nothing")
	require.ErrorIs(t, err, ErrInvalid)
}
