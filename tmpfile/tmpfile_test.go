package tmpfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/faultfs"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/medium/mediumtest"
)

// leftovers lists the files in dir of this package's name pattern.
func leftovers(t *testing.T, fsys afero.Fs, dir string) []string {
	t.Helper()
	entries, err := afero.ReadDir(fsys, dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// openIn returns an Open for the suite that also checks, when the test ends, that the
// directory holds no file of the medium's.
func openIn(opts Options, calls *sys.Calls) mediumtest.Open[*testing.T] {
	return func(t *testing.T) medium.Medium {
		o := opts
		if o.Fs == nil {
			o.Fs = afero.NewOsFs()
		}
		if o.Dir == "" {
			o.Dir = t.TempDir()
		} else {
			require.NoError(t, o.Fs.MkdirAll(o.Dir, 0o755))
		}
		if calls == nil {
			calls = &sys.Default
		}
		m, err := newWithCalls(o, calls)
		require.NoError(t, err)
		t.Cleanup(func() {
			require.NoError(t, m.Close())
			assert.Empty(t, leftovers(t, o.Fs, o.Dir), "files left behind")
		})
		return m
	}
}

// noTmpfile is the real call table without O_TMPFILE: named files on the OS file system.
func noTmpfile() *sys.Calls {
	c := sys.Default
	c.OpenTmpfile = func(string) (*os.File, error) { return nil, sys.ErrUnsupported }
	return &c
}

func tiny(o Options) Options {
	o.MinBufferSize, o.BufferSize, o.BufferBudget = 16, 256, 4<<10
	return o
}

func TestConformance(t *testing.T) {
	t.Run("fs=os", func(t *testing.T) { mediumtest.Run(t, openIn(Options{}, nil)) })
	t.Run("fs=os/named", func(t *testing.T) {
		if raceEnabled {
			t.Skip("the named file's paths are the unnamed one's once open; run without -race")
		}
		mediumtest.Run(t, openIn(Options{}, noTmpfile()))
	})
	t.Run("fs=memmap", func(t *testing.T) {
		if raceEnabled {
			t.Skip("fs=os runs the medium's own concurrency under -race; MemMapFs runs without it")
		}
		mediumtest.Run(t, openIn(Options{Fs: afero.NewMemMapFs(), Dir: "/tmp/w"}, nil))
	})
	t.Run("fs=os/buffers=tiny", func(t *testing.T) { mediumtest.Run(t, openIn(tiny(Options{}), nil)) })
	t.Run("fs=memmap/buffers=tiny", func(t *testing.T) {
		if raceEnabled {
			// afero's MemMapFs moves the file's tail on every write inside the file (reused free
			// space): quadratic, and 80 s under the detector. fs=memmap and fs=os/buffers=tiny
			// cover the same concurrency under -race; this variant runs without it.
			t.Skip("slow under -race: MemMapFs writes inside the file move its tail")
		}
		mediumtest.Run(t, openIn(tiny(Options{Fs: afero.NewMemMapFs(), Dir: "/w"}), nil))
	})
	for _, mode := range []medium.SyncMode{medium.SyncNone, medium.SyncOutput, medium.SyncAll} {
		t.Run("fs=os/sync="+mode.String(), func(t *testing.T) {
			if raceEnabled && mode != medium.SyncAll {
				t.Skip("sync=all (the most background work) stands for the modes under -race")
			}
			mediumtest.Run(t, openIn(Options{Durability: medium.Durability{Sync: mode}, BufferSize: 64 << 10}, nil))
		})
	}
}

func TestUsesUnnamedFileOnLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("O_TMPFILE is Linux only")
	}
	dir := t.TempDir()
	m, err := New(Options{Dir: dir})
	require.NoError(t, err)
	defer m.Close()
	require.Empty(t, m.fileName())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "an unnamed file has no directory entry")
}

func TestNewBadDir(t *testing.T) {
	mem := afero.NewMemMapFs()
	require.NoError(t, afero.WriteFile(mem, "/file", []byte("x"), 0o644))
	require.NoError(t, mem.MkdirAll("/ro", 0o755))

	_, err := New(Options{Fs: mem, Dir: "/missing"})
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorContains(t, err, "/missing")

	_, err = New(Options{Fs: mem, Dir: "/file"})
	require.ErrorIs(t, err, medium.ErrInvalid)
	require.ErrorContains(t, err, "not a directory")

	_, err = New(Options{Fs: afero.NewReadOnlyFs(mem), Dir: "/ro"})
	require.Error(t, err, "an unwritable directory")

	_, err = New(Options{Dir: filepath.Join(t.TempDir(), "missing")})
	require.ErrorIs(t, err, os.ErrNotExist)

	_, err = New(Options{Fs: mem, Dir: "/ro", MinBufferSize: 10, BufferSize: 5})
	require.ErrorIs(t, err, medium.ErrInvalid)
}

// TestNewInvalidOptions: every failure of New wraps a sentinel (medium.ErrInvalid for an invalid
// option) or the file system's error, names the package, and returns no medium.
func TestNewInvalidOptions(t *testing.T) {
	mem := afero.NewMemMapFs()
	require.NoError(t, afero.WriteFile(mem, "/file", []byte("x"), 0o644))
	require.NoError(t, mem.MkdirAll("/d", 0o755))

	for _, tc := range []struct {
		name string
		opts Options
		want error
	}{
		{"negative MinBufferSize", Options{MinBufferSize: -1}, medium.ErrInvalid},
		{"negative BufferSize", Options{BufferSize: -1}, medium.ErrInvalid},
		{"negative BufferBudget", Options{BufferBudget: -1}, medium.ErrInvalid},
		{"MinBufferSize above BufferSize", Options{MinBufferSize: 10, BufferSize: 5}, medium.ErrInvalid},
		{"bad sync mode", Options{Durability: medium.Durability{Sync: 9}}, medium.ErrInvalid},
		{"negative trickle", Options{Durability: medium.Durability{TrickleBytes: -1}}, medium.ErrInvalid},
		{"dir is a file", Options{Dir: "/file"}, medium.ErrInvalid},
		{"missing dir", Options{Dir: "/missing"}, os.ErrNotExist},
		{"read-only fs", Options{Fs: afero.NewReadOnlyFs(mem)}, syscall.EPERM},
	} {
		opts := tc.opts
		if opts.Fs == nil {
			opts.Fs = mem
		}
		if opts.Dir == "" {
			opts.Dir = "/d"
		}
		m, err := New(opts)
		require.Nil(t, m, tc.name)
		require.ErrorIs(t, err, tc.want, tc.name)
		require.True(t, strings.HasPrefix(err.Error(), "tmpfile: "), "%s: %q names the package", tc.name, err)
	}
}

// shortReadFs hands out files whose ReadAt reads half of what it is asked for and returns err.
type shortReadFs struct {
	afero.Fs
	err error
}

func (f shortReadFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	file, err := f.Fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return shortReadFile{file, f.err}, nil
}

type shortReadFile struct {
	afero.File
	err error
}

func (f shortReadFile) ReadAt(p []byte, off int64) (int, error) {
	n, _ := f.File.ReadAt(p[:len(p)/2], off)
	return n, f.err
}

// TestShortFileRead: a file that returns fewer bytes than the medium wrote there, with no error
// or with io.EOF, is an error wrapping io.ErrUnexpectedEOF: never io.EOF, which a caller of
// ReadAt would take for the end of the Bytes.
func TestShortFileRead(t *testing.T) {
	for _, fileErr := range []error{nil, io.EOF} {
		mem := afero.NewMemMapFs()
		require.NoError(t, mem.MkdirAll("/d", 0o755))
		m, err := New(tiny(Options{Fs: shortReadFs{mem, fileErr}, Dir: "/d"}))
		require.NoError(t, err)
		b, err := m.NewBytes()
		require.NoError(t, err)
		_, err = b.Write(bytes.Repeat([]byte("x"), 4096))
		require.NoError(t, err)
		require.Positive(t, m.FileBytes(), "some bytes are in the file")

		n, err := b.ReadAt(make([]byte, 100), 0)
		require.Less(t, n, 100)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, "file error %v", fileErr)
		require.NotErrorIs(t, err, io.EOF, "file error %v", fileErr)
		require.ErrorContains(t, err, "tmpfile: read")

		_, err = b.WriteTo(io.Discard)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		require.NoError(t, m.Close())
	}
}

// TestSizeMakesNoFileOperations is bar 3: a million Size calls between small writes cost no
// file operation beyond the writes that buffering needs.
func TestSizeMakesNoFileOperations(t *testing.T) {
	run := func(withSize bool) map[faultfs.Kind]int64 {
		fsys := faultfs.New(afero.NewMemMapFs(), nil)
		require.NoError(t, fsys.MkdirAll("/w", 0o755))
		m, err := New(Options{Fs: fsys, Dir: "/w"})
		require.NoError(t, err)
		defer m.Close()
		b, err := m.NewBytes()
		require.NoError(t, err)
		fsys.ResetCounts()
		p := []byte("0123456789abcdef")
		var want int64
		for i := range 1_000_000 {
			if i%10 == 0 {
				_, err := b.Write(p)
				require.NoError(t, err)
				want += int64(len(p))
			}
			if withSize && b.Size() != want {
				require.Equal(t, want, b.Size())
			}
		}
		require.Equal(t, want, b.Size())
		return fsys.Counts()
	}
	with := run(true)
	without := run(false)
	require.Equal(t, without, with, "Size calls added file operations")
	// 1.6 MB of 16-byte writes: the buffer grows to 1 MiB, and only full buffers reach the file.
	require.Equal(t, map[faultfs.Kind]int64{faultfs.KindWrite: 1}, with)
}

// TestManyBytesFewDescriptors is bar 4: 2,000 Bytes of 1 MiB each, written interleaved, read
// back exactly, with at most 4 descriptors held by the medium.
func TestManyBytesFewDescriptors(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts /proc/self/fd")
	}
	if raceEnabled {
		t.Skip("2 GiB of copies is slow under -race and has no concurrency to check")
	}
	const n, each, piece = 2000, 1 << 20, 16 << 10
	fdsBefore := countFDs(t)
	m, err := New(Options{Dir: t.TempDir()})
	require.NoError(t, err)
	defer m.Close()
	bs := make([]medium.Bytes, n)
	for i := range bs {
		bs[i], err = m.NewBytes()
		require.NoError(t, err)
	}
	maxFDs := 0
	p := make([]byte, piece)
	for round := range each / piece {
		for i, b := range bs {
			fillPattern(p, i, round*piece)
			_, err := b.Write(p)
			require.NoError(t, err)
		}
		maxFDs = max(maxFDs, countFDs(t)-fdsBefore)
	}
	got := make([]byte, each)
	want := make([]byte, each)
	for i, b := range bs {
		require.Equal(t, int64(each), b.Size())
		k, err := b.ReadAt(got, 0)
		require.NoError(t, err)
		require.Equal(t, each, k)
		fillPattern(want, i, 0)
		if !bytes.Equal(want, got) {
			t.Fatalf("bytes %d differs", i)
		}
	}
	maxFDs = max(maxFDs, countFDs(t)-fdsBefore)
	t.Logf("2000 Bytes x 1 MiB: %d descriptors held at most, %d MiB in the file", maxFDs, m.FileBytes()>>20)
	require.LessOrEqual(t, maxFDs, 4)
	require.NoError(t, m.Close())
	require.LessOrEqual(t, countFDs(t), fdsBefore)
}

func countFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// fillPattern fills p with bytes that depend on the Bytes index i and the offset.
func fillPattern(p []byte, i, off int) {
	for j := range p {
		x := uint32(off+j)*2654435761 ^ uint32(i)*40503
		p[j] = byte(x >> 13)
	}
}

var errInjected = errors.New("injected failure")

// workload writes, reads back and closes a medium; it returns the first error, or an error
// if the bytes read back differ.
func workload(fsys afero.Fs, dir string, durability medium.Durability) (err error) {
	m, err := New(Options{Fs: fsys, Dir: dir, MinBufferSize: 64, BufferSize: 1024, BufferBudget: 8 << 10, Durability: durability})
	if err != nil {
		return err
	}
	defer func() { err = multierr.Join(err, m.Close()) }()
	child, err := m.NewChild()
	if err != nil {
		return err
	}
	var bs []medium.Bytes
	for _, md := range []medium.Medium{m, m, child} {
		b, err := md.NewBytes()
		if err != nil {
			return err
		}
		bs = append(bs, b)
	}
	models := make([]bytes.Buffer, len(bs))
	for round := range 20 {
		for i, b := range bs {
			p := bytes.Repeat([]byte{byte('a' + i)}, 100+round*37+i)
			if _, err := b.Write(p); err != nil {
				return err
			}
			models[i].Write(p)
		}
	}
	for i, b := range bs {
		var got bytes.Buffer
		if _, err := b.WriteTo(&got); err != nil {
			return err
		}
		if !bytes.Equal(models[i].Bytes(), got.Bytes()) {
			return fmt.Errorf("bytes %d: WriteTo differs", i)
		}
		p := make([]byte, models[i].Len()-10)
		if _, err := b.ReadAt(p, 10); err != nil {
			return err
		}
		if !bytes.Equal(models[i].Bytes()[10:], p) {
			return fmt.Errorf("bytes %d: ReadAt differs", i)
		}
	}
	return child.Close()
}

// TestFailEachOperation is bar 6: failing file operation 0, 1, 2, ... in turn, every run
// returns an error wrapping the injected one, and no file of the medium's is left.
func TestFailEachOperation(t *testing.T) {
	for _, tc := range []struct {
		name string
		base func(t *testing.T) (afero.Fs, string)
		dur  medium.Durability
	}{
		{"fs=memmap", func(t *testing.T) (afero.Fs, string) { return afero.NewMemMapFs(), "/w" }, medium.Durability{}},
		{"fs=memmap/sync=all", func(t *testing.T) (afero.Fs, string) { return afero.NewMemMapFs(), "/w" }, medium.Durability{Sync: medium.SyncAll}},
		{"fs=os", func(t *testing.T) (afero.Fs, string) { return afero.NewOsFs(), t.TempDir() }, medium.Durability{}},
		{"fs=os/sync=all", func(t *testing.T) (afero.Fs, string) { return afero.NewOsFs(), t.TempDir() }, medium.Durability{Sync: medium.SyncAll}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n int64
			for ; ; n++ {
				base, dir := tc.base(t)
				require.NoError(t, base.MkdirAll(dir, 0o755))
				fsys := faultfs.New(base, faultfs.FailNth(n, errInjected))
				err := workload(fsys, dir, tc.dur)
				assert.Empty(t, leftovers(t, base, dir), "op %d: files left behind", n)
				if fsys.Injected() == 0 {
					require.NoError(t, err, "a run with no failure")
					break
				}
				require.ErrorIs(t, err, errInjected, "op %d", n)
			}
			t.Logf("%d runs with a failure, then one clean run", n)
			require.Greater(t, n, int64(10))
		})
	}
}

func TestStickyWriteError(t *testing.T) {
	base := afero.NewMemMapFs()
	require.NoError(t, base.MkdirAll("/w", 0o755))
	fsys := faultfs.New(base, faultfs.FailKind(faultfs.KindWrite, 2, syscall.ENOSPC))
	m, err := New(Options{Fs: fsys, Dir: "/w", MinBufferSize: 64, BufferSize: 64, BufferBudget: 1 << 20})
	require.NoError(t, err)
	defer m.Close()
	b, err := m.NewBytes()
	require.NoError(t, err)
	var model bytes.Buffer
	var first error
	for i := 0; i < 10 && first == nil; i++ {
		p := bytes.Repeat([]byte{byte('0' + i)}, 50)
		n, err := b.Write(p)
		model.Write(p[:n])
		first = err
	}
	require.ErrorIs(t, first, syscall.ENOSPC)
	_, err = b.Write([]byte("more"))
	require.ErrorIs(t, err, syscall.ENOSPC, "the first error is sticky")
	require.ErrorIs(t, b.WriteByte('x'), syscall.ENOSPC)
	_, err = b.WriteString("x")
	require.ErrorIs(t, err, syscall.ENOSPC)
	_, err = b.ReadFrom(strings.NewReader("x"))
	require.ErrorIs(t, err, syscall.ENOSPC)
	// Nothing written before the failure is lost.
	require.Equal(t, int64(model.Len()), b.Size())
	got := make([]byte, model.Len())
	_, err = b.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, model.Bytes(), got)
	var out bytes.Buffer
	_, err = b.WriteTo(&out)
	require.NoError(t, err)
	require.Equal(t, model.Bytes(), out.Bytes())
}

// TestStagesNeverSynced: in every durability mode, SyncAll included, the medium's file is never
// synced, on the OS file system (no fdatasync through the system-call layer) nor on another
// afero.Fs (no File.Sync), however often its bytes are read back; Syncs stays 0. Only pacing
// (TrickleBytes) may fdatasync, where sync_file_range is missing (TestTrickleExtentsFails).
func TestStagesNeverSynced(t *testing.T) {
	for _, mode := range []medium.SyncMode{medium.SyncNone, medium.SyncOutput, medium.SyncAll} {
		for _, trickle := range []int64{0, 8192} {
			d := medium.Durability{Sync: mode, TrickleBytes: trickle}
			t.Run(fmt.Sprintf("sync=%s/trickle=%d", mode, trickle), func(t *testing.T) {
				calls := sys.Default
				var fdatasyncs atomic.Int64
				calls.Fdatasync = func(f *os.File) error { fdatasyncs.Add(1); return sys.Default.Fdatasync(f) }
				base := afero.NewMemMapFs()
				require.NoError(t, base.MkdirAll("/w", 0o755))
				fsys := faultfs.New(base, nil)
				for _, o := range []Options{
					{Dir: t.TempDir()},
					{Fs: fsys, Dir: "/w"},
				} {
					o.BufferSize, o.Durability = 4096, d
					m, err := newWithCalls(o, &calls)
					require.NoError(t, err)
					b, err := m.NewBytes()
					require.NoError(t, err)
					for range 3 {
						_, err = b.Write(make([]byte, 10000))
						require.NoError(t, err)
						_, err = b.WriteTo(io.Discard)
						require.NoError(t, err)
						_, err = b.ReadAt(make([]byte, 10), 0)
						require.NoError(t, err)
					}
					require.Greater(t, m.FileBytes(), int64(0), "bytes were flushed to the file")
					require.Zero(t, m.Syncs())
					require.NoError(t, m.Close())
				}
				require.Zero(t, fdatasyncs.Load(), "fdatasync of a stage")
				require.Zero(t, fsys.Counts()[faultfs.KindSync], "File.Sync of a stage")
			})
		}
	}
}

func TestWriteToFileUsesCopyFileRange(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("copy_file_range is Linux only")
	}
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("unsupported=%v", fallback), func(t *testing.T) {
			calls := sys.Default
			var kernelCopies int
			calls.CopyFileRange = func(dst, src *os.File, off *int64, n int) (int, error) {
				kernelCopies++
				if fallback {
					return 0, &os.PathError{Op: "copy_file_range", Path: src.Name(), Err: syscall.EXDEV}
				}
				return sys.Default.CopyFileRange(dst, src, off, n)
			}
			m, err := newWithCalls(Options{Dir: t.TempDir(), BufferSize: 4096}, &calls)
			require.NoError(t, err)
			defer m.Close()
			b, err := m.NewBytes()
			require.NoError(t, err)
			want := make([]byte, 100_000)
			fillPattern(want, 1, 0)
			_, err = b.Write(want)
			require.NoError(t, err)
			out, err := os.Create(filepath.Join(t.TempDir(), "out"))
			require.NoError(t, err)
			defer out.Close()
			n, err := b.WriteTo(out)
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), n)
			require.Positive(t, kernelCopies)
			got, err := os.ReadFile(out.Name())
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got))
		})
	}
}

// TestWriteToPipe: copy_file_range refuses a pipe (such as a redirected os.Stdout); WriteTo
// falls back to a buffered copy.
func TestWriteToPipe(t *testing.T) {
	m, err := New(Options{Dir: t.TempDir(), BufferSize: 4096})
	require.NoError(t, err)
	defer m.Close()
	b, err := m.NewBytes()
	require.NoError(t, err)
	want := make([]byte, 100_000)
	fillPattern(want, 2, 0)
	_, err = b.Write(want)
	require.NoError(t, err)
	require.Positive(t, m.FileBytes())

	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	got := make(chan []byte, 1)
	go func() {
		p, _ := io.ReadAll(r)
		got <- p
	}()
	n, err := b.WriteTo(w)
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), n)
	require.NoError(t, w.Close())
	require.True(t, bytes.Equal(want, <-got))
}

// TestSweep: only empty regular files of the pattern go (what a process killed between
// creating its file and unlinking it leaves); a file of the pattern with bytes in it, a
// directory or a symlink of the pattern, and other names stay.
func TestSweep(t *testing.T) {
	fsys := afero.NewMemMapFs()
	require.NoError(t, fsys.MkdirAll("/w/sub", 0o755))
	require.NoError(t, fsys.MkdirAll("/w/writeout-tmpfile-5-ab.tmp", 0o755))
	keep := []string{"segment.seg", "writeout-tmpfile-.tmp", "writeout-tmpfile-12-zz.tmp", "writeout-tmpfile-x-ab.tmp", "other.tmp"}
	gone := []string{"writeout-tmpfile-123-0a1b2c3d4e5f6a7b.tmp", "writeout-tmpfile-9-ff.tmp"}
	for _, name := range append(append([]string{}, keep...), gone...) {
		require.NoError(t, afero.WriteFile(fsys, "/w/"+name, nil, 0o644))
	}
	// The pattern, but bytes in it: not provably ours.
	full := "writeout-tmpfile-77-0123.tmp"
	require.NoError(t, afero.WriteFile(fsys, "/w/"+full, []byte("user data"), 0o644))
	keep = append(keep, full, "writeout-tmpfile-5-ab.tmp")
	removed, err := Sweep(fsys, "/w")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"/w/" + gone[0], "/w/" + gone[1]}, removed)
	for _, name := range keep {
		ok, err := afero.Exists(fsys, "/w/"+name)
		require.NoError(t, err)
		require.True(t, ok, "kept %s", name)
	}
	for _, name := range gone {
		ok, err := afero.Exists(fsys, "/w/"+name)
		require.NoError(t, err)
		require.False(t, ok, "removed %s", name)
	}
	_, err = Sweep(fsys, "/missing")
	require.Error(t, err)
}

func TestSweepLeavesLiveMediumAlone(t *testing.T) {
	dir := t.TempDir()
	m, err := newWithCalls(Options{Dir: dir}, noTmpfile())
	require.NoError(t, err)
	defer m.Close()
	b, err := m.NewBytes()
	require.NoError(t, err)
	_, err = b.Write(make([]byte, 3<<20))
	require.NoError(t, err)
	removed, err := Sweep(nil, dir)
	require.NoError(t, err)
	require.Empty(t, removed)
	p := make([]byte, 3<<20)
	_, err = b.ReadAt(p, 0)
	require.NoError(t, err)
}

func TestChildSharesFile(t *testing.T) {
	fsys := faultfs.New(afero.NewMemMapFs(), nil)
	require.NoError(t, fsys.MkdirAll("/w", 0o755))
	m, err := New(Options{Fs: fsys, Dir: "/w"})
	require.NoError(t, err)
	for range 50 {
		c, err := m.NewChild()
		require.NoError(t, err)
		_, err = c.NewBytes()
		require.NoError(t, err)
	}
	require.Equal(t, int64(1), fsys.Counts()[faultfs.KindOpen], "children share the medium's one file")
	require.NoError(t, m.Close())
}

// readerFromOnly is an io.ReaderFrom that is not an *os.File: it records the sources it was
// handed and copies them into w.
type readerFromOnly struct {
	w       io.Writer
	sources []io.Reader
	fail    error // returned after the first source, when set
}

func (r *readerFromOnly) Write(p []byte) (int, error) { return r.w.Write(p) }

func (r *readerFromOnly) ReadFrom(src io.Reader) (int64, error) {
	r.sources = append(r.sources, src)
	if r.fail != nil && len(r.sources) > 1 {
		return 0, r.fail
	}
	return io.Copy(r.w, src)
}

// TestWriteToReaderFrom: WriteTo into an io.ReaderFrom that is not a file (a bufio.Writer on a
// file, as parquet-go writes) hands it the medium's file, limited to each extent, so that
// os.File.ReadFrom can copy in the kernel; Bytes copied so at once from several goroutines
// each give their own content (the file's position is shared); a failing ReadFrom's error is
// returned.
func TestWriteToReaderFrom(t *testing.T) {
	m, err := New(Options{Dir: t.TempDir(), MinBufferSize: 1 << 10, BufferSize: 4 << 10})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	const n = 6
	want := make([][]byte, n)
	bs := make([]medium.Bytes, n)
	for i := range bs {
		bs[i], err = m.NewBytes()
		require.NoError(t, err)
	}
	// Interleaved writes: every Bytes has many extents, scattered over the file.
	for round := range 50 {
		for i, b := range bs {
			p := bytes.Repeat([]byte{byte('a' + i)}, 1000+round*37+i)
			_, err := b.Write(p)
			require.NoError(t, err)
			want[i] = append(want[i], p...)
		}
	}

	one := &readerFromOnly{w: new(bytes.Buffer)}
	k, err := bs[0].(io.WriterTo).WriteTo(one)
	require.NoError(t, err)
	require.Equal(t, int64(len(want[0])), k)
	require.Equal(t, want[0], one.w.(*bytes.Buffer).Bytes())
	require.NotEmpty(t, one.sources)
	lr, ok := one.sources[0].(*io.LimitedReader)
	require.True(t, ok, "ReadFrom is handed %T, not the file limited to an extent", one.sources[0])
	_, ok = lr.R.(*os.File)
	require.True(t, ok, "ReadFrom is handed a limited %T, not the file", lr.R)

	// Concurrent copies through bufio.Writers on files.
	dir := t.TempDir()
	errs := make(chan error, n)
	for i, b := range bs {
		go func() {
			errs <- func() error {
				f, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
				if err != nil {
					return err
				}
				w := bufio.NewWriterSize(f, 512)
				_, _ = w.WriteString("head")
				if _, err := b.(io.WriterTo).WriteTo(w); err != nil {
					return multierr.Join(err, f.Close())
				}
				return multierr.Join(w.Flush(), f.Close())
			}()
		}()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	for i := range bs {
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(i)))
		require.NoError(t, err)
		require.True(t, bytes.Equal(append([]byte("head"), want[i]...), got), "Bytes %d copied wrong", i)
	}

	// A failing ReadFrom: its error, wrapped, and the bytes copied before it.
	boom := errors.New("boom")
	bad := &readerFromOnly{w: new(bytes.Buffer), fail: boom}
	k, err = bs[1].(io.WriterTo).WriteTo(bad)
	require.ErrorIs(t, err, boom)
	require.Equal(t, int64(bad.w.(*bytes.Buffer).Len()), k)
}
