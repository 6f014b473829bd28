package columns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/faultfs"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// publishRows is a small segment's rows.
func publishRows(t testing.TB, n int) (Schema, []Row) {
	s := allSchema()
	gen := newRowGen(12, s)
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = gen.next()
	}
	return s, rows
}

func filledWriter(t testing.TB, s Schema, rows []Row, opts writerOptions) *writer {
	w, err := newRowsWriter(s, opts)
	require.NoError(t, err)
	for _, r := range rows {
		require.NoError(t, w.AddRow(r))
	}
	require.NoError(t, w.flush())
	return w.writer
}

// listDir returns the names in dir, sorted.
func listDir(t testing.TB, fsys afero.Fs, dir string) []string {
	infos, err := afero.ReadDir(fsys, dir)
	require.NoError(t, err)
	var names []string
	for _, fi := range infos {
		names = append(names, fi.Name())
	}
	sort.Strings(names)
	return names
}

// requireNothingOrFinished checks dir holds what it held before plus, at most, dst as a
// complete, valid segment equal to want.
func requireNothingOrFinished(t testing.TB, fsys afero.Fs, dir string, before []string, dst string, want []byte) bool {
	t.Helper()
	names := listDir(t, fsys, dir)
	got, err := afero.ReadFile(fsys, dst)
	if errors.Is(err, fs.ErrNotExist) {
		require.Equal(t, before, names, "the directory holds something new")
		return false
	}
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "dst is not the finished file")
	require.Equal(t, sortedWith(before, filepath.Base(dst)), names)
	return true
}

func sortedWith(names []string, add string) []string {
	out := append([]string(nil), names...)
	out = append(out, add)
	sort.Strings(out)
	return out
}

func TestPublish(t *testing.T) {
	s, rows := publishRows(t, 50)
	want := writeRows(t, s, rows, writerOptions{})
	dir := t.TempDir()
	for _, tc := range []struct {
		d     medium.Durability
		syncs int
	}{
		{medium.Durability{}, 2},
		{medium.Durability{Sync: medium.SyncNone}, 0},
		{medium.Durability{Sync: medium.SyncAll}, 2},
	} {
		dst := filepath.Join(dir, "seg-"+tc.d.Sync.String())
		info, err := filledWriter(t, s, rows, writerOptions{}).Finish(dst, PublishOptions{Durability: tc.d})
		require.NoError(t, err)
		require.Equal(t, tc.syncs, info.Syncs, "%s", tc.d.Sync)
		require.Equal(t, dst, info.Path)
		got, err := os.ReadFile(dst)
		require.NoError(t, err)
		require.Equal(t, want, got)
		st, err := os.Stat(dst)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	}
	require.Equal(t, []string{"seg-all", "seg-none", "seg-output"}, listDir(t, afero.NewOsFs(), dir))

	// An existing destination: refused unless Replace.
	dst := filepath.Join(dir, "seg-output")
	require.NoError(t, os.WriteFile(dst, []byte("old"), 0o644))
	_, err := filledWriter(t, s, rows, writerOptions{}).Finish(dst, PublishOptions{})
	require.ErrorIs(t, err, fs.ErrExist)
	old, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, "old", string(old))
	require.Equal(t, []string{"seg-all", "seg-none", "seg-output"}, listDir(t, afero.NewOsFs(), dir))
	_, err = filledWriter(t, s, rows, writerOptions{}).Finish(dst, PublishOptions{Replace: true})
	require.NoError(t, err)
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// A missing directory and a bad durability fail cleanly.
	_, err = filledWriter(t, s, rows, writerOptions{}).Finish(filepath.Join(dir, "no", "seg"), PublishOptions{})
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = filledWriter(t, s, rows, writerOptions{}).Finish(filepath.Join(dir, "x"), PublishOptions{Durability: medium.Durability{Sync: 9}})
	require.ErrorIs(t, err, medium.ErrInvalid)
	require.Equal(t, []string{"seg-all", "seg-none", "seg-output"}, listDir(t, afero.NewOsFs(), dir))
}

// TestPublishFaults fails every operation of the file system in turn, from the first until a
// publish succeeds: after each failure before the naming the directory holds nothing new;
// after it (the directory's fsync) dst is the complete new file; the error is returned; sync
// failures wrap medium.ErrSync.
func TestPublishFaults(t *testing.T) {
	s, rows := publishRows(t, 40)
	want := writeRows(t, s, rows, writerOptions{Compression: CompressionZstd})
	for _, base := range []struct {
		name string
		fs   func() afero.Fs
	}{{"os", afero.NewOsFs}, {"mem", afero.NewMemMapFs}} {
		t.Run("fs="+base.name, func(t *testing.T) {
			bfs := base.fs()
			dir := t.TempDir()
			require.NoError(t, bfs.MkdirAll(dir, 0o755))
			require.NoError(t, afero.WriteFile(bfs, filepath.Join(dir, "other"), []byte("x"), 0o644))
			before := listDir(t, bfs, dir)
			dst := filepath.Join(dir, "seg")
			kinds := map[faultfs.Kind]bool{}
			for n := int64(0); ; n++ {
				ffs := faultfs.New(bfs, faultfs.FailNth(n, syscall.EIO))
				var op faultfs.Op
				ffs.SetInjector(func(o faultfs.Op) error {
					if o.N == n {
						op = o
						return syscall.EIO
					}
					return nil
				})
				w := filledWriter(t, s, rows, writerOptions{Compression: CompressionZstd})
				info, err := w.Finish(dst, PublishOptions{Fs: ffs})
				if ffs.Injected() == 0 {
					require.NoError(t, err)
					require.Equal(t, 2, info.Syncs)
					require.True(t, requireNothingOrFinished(t, bfs, dir, before, dst, want))
					t.Logf("published after failing each of the first %d operations in turn (%v)", n, kinds)
					break
				}
				require.Error(t, err, "op %d %+v", n, op)
				require.ErrorIs(t, err, syscall.EIO)
				kinds[op.Kind] = true
				if op.Kind == faultfs.KindSync {
					require.ErrorIs(t, err, medium.ErrSync)
				}
				if op.Path == dir {
					// The directory's fsync (its open, sync or close) comes after the naming:
					// dst is the complete new file, kept, and the error says so.
					require.ErrorIs(t, err, medium.ErrSync, "op %d %+v", n, op)
					require.ErrorContains(t, err, "is in place, complete")
					require.True(t, requireNothingOrFinished(t, bfs, dir, before, dst, want), "op %d %+v", n, op)
					require.NoError(t, bfs.Remove(dst))
					continue
				}
				require.False(t, requireNothingOrFinished(t, bfs, dir, before, dst, want), "op %d %+v failed, yet dst exists", n, op)
			}
			for _, k := range []faultfs.Kind{faultfs.KindOpen, faultfs.KindWrite, faultfs.KindSync, faultfs.KindRename, faultfs.KindClose} {
				require.True(t, kinds[k], "no %s failure tried", k)
			}
		})
	}

	// A segment of several MiB takes many writes: fail each in turn, with ENOSPC.
	s = Schema{Dimensions: []Dimension{{Name: "payload", Raw: true}}}
	rows = make([]Row, 3000)
	for i := range rows {
		rows[i] = Row{Time: int64(i), Dims: [][]string{{string(randBytes(newRand(uint64(i)), 2000))}}}
	}
	want = writeRows(t, s, rows, writerOptions{})
	bfs := afero.NewOsFs()
	dir := t.TempDir()
	dst := filepath.Join(dir, "big")
	for n := int64(0); ; n++ {
		ffs := faultfs.New(bfs, faultfs.FailKind(faultfs.KindWrite, n, syscall.ENOSPC))
		_, err := filledWriter(t, s, rows, writerOptions{}).Finish(dst, PublishOptions{Fs: ffs})
		if ffs.Injected() == 0 {
			require.NoError(t, err)
			require.True(t, requireNothingOrFinished(t, bfs, dir, nil, dst, want))
			t.Logf("%d bytes published after failing each of its %d writes in turn", len(want), n)
			require.Greater(t, n, int64(5))
			break
		}
		require.ErrorIs(t, err, syscall.ENOSPC)
		require.False(t, requireNothingOrFinished(t, bfs, dir, nil, dst, want))
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }

// TestPublishFailingSyscalls replaces the system calls: a failing fdatasync, directory fsync or
// sync_file_range fails the publish with medium.ErrSync and leaves nothing behind.
func TestPublishFailingSyscalls(t *testing.T) {
	s, rows := publishRows(t, 30)
	dir := t.TempDir()
	dst := filepath.Join(dir, "seg")
	eio := fmt.Errorf("injected: %w", syscall.EIO)
	f := func(name string, edit func(c *sys.Calls), d medium.Durability) {
		t.Run(name, func(t *testing.T) {
			w := filledWriter(t, s, rows, writerOptions{})
			calls := sys.Default
			edit(&calls)
			w.calls = &calls
			_, err := w.Finish(dst, PublishOptions{Durability: d})
			require.ErrorIs(t, err, medium.ErrSync)
			require.ErrorIs(t, err, syscall.EIO)
			if name != "fsync-dir" {
				require.Empty(t, listDir(t, afero.NewOsFs(), dir))
				return
			}
			// The directory's fsync comes after the naming: the new file, complete and its data
			// synced, stays (with Replace, removing it would lose the old output and the new).
			require.ErrorContains(t, err, "is in place, complete")
			require.Equal(t, []string{"seg"}, listDir(t, afero.NewOsFs(), dir))
			seg, err := Open(dst)
			require.NoError(t, err)
			require.NoError(t, seg.Verify())
			require.NoError(t, seg.Close())
			require.NoError(t, os.Remove(dst))
		})
	}
	var fdatasyncs atomic.Int32
	f("fdatasync", func(c *sys.Calls) {
		c.Fdatasync = func(*os.File) error { fdatasyncs.Add(1); return eio }
	}, medium.Durability{})
	require.Equal(t, int32(1), fdatasyncs.Load(), "a failed fdatasync is not retried")
	f("fsync-dir", func(c *sys.Calls) { c.Fsync = func(*os.File) error { return eio } }, medium.Durability{Sync: medium.SyncAll})
	f("sync_file_range", func(c *sys.Calls) {
		c.SyncFileRange = func(*os.File, int64, int64, int) error { return eio }
	}, medium.Durability{TrickleBytes: 512})

	// Trickling works and is counted.
	w := filledWriter(t, s, rows, writerOptions{})
	var ranges []string
	calls := sys.Default
	calls.SyncFileRange = func(f *os.File, off, n int64, flags int) error {
		ranges = append(ranges, fmt.Sprintf("%d+%d/%d", off, n, flags))
		return sys.Default.SyncFileRange(f, off, n, flags)
	}
	w.calls = &calls
	info, err := w.Finish(dst, PublishOptions{Durability: medium.Durability{TrickleBytes: 1024}})
	require.NoError(t, err)
	require.Equal(t, len(ranges), info.Trickles)
	require.Greater(t, info.Trickles, 2)
	t.Logf("%d bytes published with %d sync_file_range calls: %v...", info.Size, info.Trickles, ranges[:4])
	seg, err := Open(dst)
	require.NoError(t, err)
	require.NoError(t, seg.Verify())
	require.NoError(t, seg.Close())
}

// flipMedium wraps a medium so that one Bytes (the target-th handed out) reads back a flipped
// byte from WriteTo, as a stale or corrupt read-back of a stage would.
type flipMedium struct {
	medium.Medium
	n      *atomic.Int32
	target int32
}

func (m flipMedium) NewChild() (medium.Medium, error) {
	c, err := m.Medium.NewChild()
	if err != nil {
		return nil, err
	}
	return flipMedium{c, m.n, m.target}, nil
}

func (m flipMedium) NewBytes() (medium.Bytes, error) {
	b, err := m.Medium.NewBytes()
	if err != nil {
		return nil, err
	}
	return &flipBytes{Bytes: b, flip: m.n.Add(1)-1 == m.target}, nil
}

type flipBytes struct {
	medium.Bytes
	flip bool
}

// ReadAt reads the bytes with the one in the middle flipped.
func (b *flipBytes) ReadAt(p []byte, off int64) (int, error) {
	n, err := b.Bytes.ReadAt(p, off)
	if mid := b.Size() / 2; b.flip && mid >= off && mid < off+int64(n) {
		p[mid-off] ^= 0x10
	}
	return n, err
}

func (b *flipBytes) WriteTo(w io.Writer) (int64, error) {
	if !b.flip || b.Size() == 0 {
		return b.Bytes.WriteTo(w)
	}
	var buf bytes.Buffer
	if _, err := b.Bytes.WriteTo(&buf); err != nil {
		return 0, err
	}
	p := buf.Bytes()
	p[len(p)/2] ^= 0x10
	n, err := w.Write(p)
	return int64(n), err
}

// TestPublishStageAltered alters the bytes of one stage behind the writer's back: the CRC check
// on the way out catches it, and nothing is published.
func TestPublishStageAltered(t *testing.T) {
	s, rows := publishRows(t, 30)
	dir := t.TempDir()
	dst := filepath.Join(dir, "seg")
	nparts := int32(len(layout(s, maxVersion)))
	for _, target := range []int32{0, nparts / 2, nparts - 1} {
		var n atomic.Int32
		w := filledWriter(t, s, rows, writerOptions{Medium: flipMedium{medium.NewHeap(), &n, target}})
		_, err := w.Finish(dst, PublishOptions{})
		require.ErrorIs(t, err, ErrCorrupt, "part %d altered", target)
		require.ErrorContains(t, err, "copied")
		require.Empty(t, listDir(t, afero.NewOsFs(), dir))
		// The same through FinishTo.
		n.Store(0)
		w = filledWriter(t, s, rows, writerOptions{Medium: flipMedium{medium.NewHeap(), &n, target}})
		_, err = w.FinishTo(io.Discard)
		require.ErrorIs(t, err, ErrCorrupt)
	}
}

// TestAbort discards a writer: its stages are released (the caller's medium stays usable),
// nothing is published, and every later call fails.
func TestAbort(t *testing.T) {
	s, rows := publishRows(t, 10)
	m := medium.NewHeap()
	defer m.Close()
	closed := false
	w := filledWriter(t, s, rows, writerOptions{Medium: m})
	w.med.OnClose(func() error { closed = true; return nil })
	require.NoError(t, w.Abort())
	require.True(t, closed, "the stages' child medium is closed")
	require.NoError(t, w.Abort(), "a second Abort")
	_, err := w.Time()
	require.ErrorIs(t, err, ErrState)
	dir := t.TempDir()
	_, err = w.Finish(filepath.Join(dir, "seg"), PublishOptions{})
	require.ErrorIs(t, err, ErrState)
	require.Empty(t, listDir(t, afero.NewOsFs(), dir))
	b, err := m.NewBytes()
	require.NoError(t, err, "the caller's medium is still open")
	_, err = b.Write([]byte("x"))
	require.NoError(t, err)

	// After a Finish, Abort is a no-op, and the stages are gone.
	w = filledWriter(t, s, rows, writerOptions{Medium: m})
	_, err = w.FinishTo(io.Discard)
	require.NoError(t, err)
	require.NoError(t, w.Abort())
	_, err = w.FinishTo(io.Discard)
	require.ErrorIs(t, err, ErrState)
}

// TestWriterMisuse checks the writer's state errors.
func TestWriterMisuse(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "d"}, {Name: "m", MultiValue: true}, {Name: "r", Raw: true}}, Metrics: []Metric{{Name: "c", Aggregator: agg.Count}}}
	w, err := newWriter(s, writerOptions{})
	require.NoError(t, err)
	d, err := w.Dim("d")
	require.NoError(t, err)
	_, err = w.Dim("r")
	require.ErrorIs(t, err, ErrSchema)
	_, err = w.Raw("d")
	require.ErrorIs(t, err, ErrSchema)
	_, err = w.Double("c")
	require.ErrorIs(t, err, ErrSchema)
	_, err = d.AddValue("b")
	require.NoError(t, err)
	_, err = d.AddValue("a")
	require.ErrorIs(t, err, medium.ErrInvalid)
	require.Error(t, d.AppendID(0), "sticky")
	require.NoError(t, w.Abort())

	w, _ = newWriter(s, writerOptions{})
	d, _ = w.Dim("d")
	require.ErrorIs(t, d.AddNull(), nil)
	_, _ = d.AddValue("a")
	require.ErrorIs(t, d.AppendIDs([]uint32{1, 1}), medium.ErrInvalid, "two ids in a single-value dimension")
	w.Abort()

	w, _ = newWriter(s, writerOptions{})
	d, _ = w.Dim("d")
	_, _ = d.AddValue("a")
	require.ErrorIs(t, d.(*dimWriter).appendNull(), medium.ErrInvalid, "null without AddNull")
	w.Abort()

	w, _ = newWriter(s, writerOptions{})
	m, _ := w.Dim("m")
	require.NoError(t, m.AddNull())
	_, _ = m.AddValue("a")
	require.ErrorIs(t, m.AppendIDs([]uint32{1, 0}), medium.ErrInvalid, "null inside a multi-value row")
	w.Abort()

	w, _ = newWriter(s, writerOptions{})
	d, _ = w.Dim("d")
	_, _ = d.AddValue("a")
	_, _ = d.AddValue("b")
	require.NoError(t, d.AppendID(1))
	require.ErrorIs(t, d.AppendID(2), medium.ErrInvalid, "id past the cardinality")
	w.Abort()

	// Bitmaps: in order, within the rows, matching the rows.
	w, _ = newWriter(s, writerOptions{})
	d, _ = w.Dim("d")
	_, _ = d.AddValue("a")
	_, _ = d.AddValue("b")
	require.NoError(t, d.AppendID(1))
	require.ErrorIs(t, d.WriteBitmap(1, nil), ErrState, "out of order")
	w.Abort()
	w, _ = newWriter(s, writerOptions{})
	d, _ = w.Dim("d")
	_, _ = d.AddValue("a")
	require.NoError(t, d.AppendID(0))
	require.ErrorIs(t, d.WriteBitmap(0, bitmapOf(5)), medium.ErrInvalid, "row past the end")
	w.Abort()

	// Rows in time order; every column the same length; bitmaps complete and right.
	w, _ = newWriter(s, writerOptions{})
	tw, _ := w.Time()
	require.NoError(t, tw.Append(5))
	require.ErrorIs(t, tw.Append(4), medium.ErrInvalid)
	w.Abort()
	w, _ = newWriter(Schema{Dimensions: []Dimension{{Name: "d"}}}, writerOptions{})
	tw, _ = w.Time()
	d, _ = w.Dim("d")
	require.NoError(t, tw.Append(1))
	require.NoError(t, tw.Append(2))
	_, _ = d.AddValue("a")
	_, _ = d.AddValue("b")
	require.NoError(t, d.AppendID(0))
	require.NoError(t, d.AppendID(1))
	require.NoError(t, d.WriteBitmap(0, bitmapOf(0)))
	require.NoError(t, d.WriteBitmap(1, bitmapOf(0))) // wrong: row 1 holds id 1
	_, err = w.FinishTo(io.Discard)
	if invariants {
		require.ErrorIs(t, err, medium.ErrInvalid)
		require.ErrorContains(t, err, "bitmaps do not hold the rows' ids")
	} else {
		require.NoError(t, err, "the pair hashes are computed only with -tags invariants")
	}

	w, _ = newWriter(Schema{Dimensions: []Dimension{{Name: "d"}}}, writerOptions{})
	tw, _ = w.Time()
	require.NoError(t, tw.Append(1))
	_, err = w.FinishTo(io.Discard)
	require.ErrorContains(t, err, `column "d" has 0 rows, __time has 1`)

	_, err = newWriter(s, writerOptions{ChunkRows: 1 << 17})
	require.ErrorIs(t, err, medium.ErrInvalid)
	_, err = newWriter(Schema{Dimensions: []Dimension{{Name: ""}}}, writerOptions{})
	require.ErrorIs(t, err, ErrSchema)

}

// TestFinishContext cancels a publish during the copy: it stops at the next write, returns the
// context's error and leaves nothing behind.
func TestFinishContext(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "payload", Raw: true}}}
	rows := make([]Row, 3000)
	for i := range rows {
		rows[i] = Row{Time: int64(i), Dims: [][]string{{string(randBytes(newRand(uint64(i)), 2000))}}}
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	writes := 0
	ffs := faultfs.New(afero.NewOsFs(), func(o faultfs.Op) error {
		if o.Kind == faultfs.KindWrite {
			if writes++; writes == 3 {
				cancel()
			}
		}
		return nil
	})
	_, err := filledWriter(t, s, rows, writerOptions{}).FinishContext(ctx, filepath.Join(dir, "seg"), PublishOptions{Fs: ffs})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 3, writes, "no write after the cancel")
	require.Empty(t, listDir(t, afero.NewOsFs(), dir))

	_, err = filledWriter(t, s, rows[:1], writerOptions{}).FinishContext(ctx, filepath.Join(dir, "seg"), PublishOptions{})
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, listDir(t, afero.NewOsFs(), dir))
}

// TestClosedSegment uses every cursor after Close: errors, never a read of the unmapped file.
func TestClosedSegment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	s, rows := publishRows(t, 20)
	_, err := filledWriter(t, s, rows, writerOptions{Compression: CompressionNone}).Finish(path, PublishOptions{})
	require.NoError(t, err)
	seg, err := Open(path)
	require.NoError(t, err)
	require.NotNil(t, seg.src.data, "mapped")
	raw, err := seg.Raw("body")
	require.NoError(t, err)
	rc := raw.Cursor()
	_, _, err = rc.Bytes(0)
	require.NoError(t, err)
	sk, err := seg.Sketch("hyperUnique_m")
	require.NoError(t, err)
	sc := sk.Cursor()
	_, err = sc.Bytes(0)
	require.NoError(t, err)
	dim, err := seg.Dim("page")
	require.NoError(t, err)
	it := dim.Dictionary()
	require.True(t, it.Next())
	require.NoError(t, seg.Close())
	_, _, err = rc.Bytes(1)
	require.ErrorIs(t, err, medium.ErrClosed)
	_, err = sc.Bytes(1)
	require.ErrorIs(t, err, medium.ErrClosed)
	require.False(t, it.Next())
	require.ErrorIs(t, it.Err(), medium.ErrClosed)
	_, err = dim.Bitmap(0)
	require.ErrorIs(t, err, medium.ErrClosed)
	_, err = dim.Value(0)
	require.ErrorIs(t, err, medium.ErrClosed)
	require.ErrorIs(t, seg.Verify(), medium.ErrClosed)
}

// TestPublishChmodBeforeSync: the output gets its permission before its data is synced, so that
// the sync covers the change too; the file's first sync comes after the chmod.
func TestPublishChmodBeforeSync(t *testing.T) {
	s, rows := publishRows(t, 10)
	dir := t.TempDir()
	var ops []string
	base := afero.NewMemMapFs()
	require.NoError(t, base.MkdirAll(dir, 0o755))
	ffs := faultfs.New(base, nil)
	ffs.SetInjector(func(o faultfs.Op) error {
		if o.Kind == faultfs.KindChange || o.Kind == faultfs.KindSync {
			ops = append(ops, string(o.Kind)+" "+filepath.Base(o.Path))
		}
		return nil
	})
	dst := filepath.Join(dir, "seg")
	_, err := filledWriter(t, s, rows, writerOptions{}).Finish(dst, PublishOptions{Fs: ffs, Perm: 0o640})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(ops), 2, "%v", ops)
	require.Regexp(t, `^change `, ops[0], "the chmod comes first: %v", ops)
	require.Regexp(t, `^sync `, ops[1], "then the file's sync: %v", ops)
	fi, err := ffs.Stat(dst)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
}

// TestRawAppendBytes writes a raw dimension through AppendBytes from one reused buffer: each
// value is copied as it is appended (chunks of 3 rows, so some flush while later ones wait).
func TestRawAppendBytes(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "r", Raw: true}}, Metrics: []Metric{{Name: "c", Aggregator: agg.LongSum}}}
	w, err := newWriter(s, writerOptions{ChunkRows: 3})
	require.NoError(t, err)
	tw, err := w.Time()
	require.NoError(t, err)
	rw, err := w.Raw("r")
	require.NoError(t, err)
	cw, err := w.Long("c")
	require.NoError(t, err)
	var want []string
	buf := make([]byte, 0, 64)
	for i := range 10 {
		buf = fmt.Appendf(buf[:0], "value-%d-%s", i, string(bytes.Repeat([]byte("x"), i)))
		want = append(want, string(buf))
		require.NoError(t, tw.Append(int64(i)))
		require.NoError(t, rw.AppendBytes(buf))
		require.NoError(t, cw.Append(1))
		clear(buf) // the writer must hold its own copy
	}
	path := filepath.Join(t.TempDir(), "seg")
	_, err = w.Finish(path, PublishOptions{})
	require.NoError(t, err)
	seg, err := Open(path)
	require.NoError(t, err)
	defer seg.Close()
	raw, err := seg.Raw("r")
	require.NoError(t, err)
	rc := raw.Cursor()
	for i, v := range want {
		b, ok, err := rc.Bytes(i)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, v, string(b), "row %d", i)
	}
}

// TestAppendValues writes the same rows through Append and through AppendValues (runs that
// cross chunk boundaries): the segments are byte for byte the same. __time keeps its checks
// in bulk, and a first/last metric refuses AppendValues as it refuses Append.
func TestAppendValues(t *testing.T) {
	s := Schema{Metrics: []Metric{{Name: "l", Aggregator: agg.LongSum}, {Name: "d", Aggregator: agg.DoubleSum}, {Name: "x", Aggregator: agg.DoubleMax}}}
	const rows = 23
	write := func(bulk bool) []byte {
		w, err := newWriter(s, writerOptions{ChunkRows: 5})
		require.NoError(t, err)
		tw, err := w.Time()
		require.NoError(t, err)
		lw, err := w.Long("l")
		require.NoError(t, err)
		dw, err := w.Double("d")
		require.NoError(t, err)
		xw, err := w.Double("x")
		require.NoError(t, err)
		var times, ls []int64
		var ds []float64
		for i := range rows {
			times = append(times, int64(i/3))
			ls = append(ls, int64(i*i-40))
			ds = append(ds, float64(i)/3)
		}
		if bulk {
			for lo := 0; lo < rows; lo += 7 {
				hi := min(rows, lo+7)
				require.NoError(t, tw.AppendValues(times[lo:hi]))
				require.NoError(t, lw.AppendValues(ls[lo:hi]))
				require.NoError(t, dw.AppendValues(ds[lo:hi]))
				require.NoError(t, xw.AppendValues(ds[lo:hi]))
			}
		} else {
			for i := range rows {
				require.NoError(t, tw.Append(times[i]))
				require.NoError(t, lw.Append(ls[i]))
				require.NoError(t, dw.Append(ds[i]))
				require.NoError(t, xw.Append(ds[i]))
			}
		}
		var buf bytes.Buffer
		_, err = w.FinishTo(&buf)
		require.NoError(t, err)
		return buf.Bytes()
	}
	require.Equal(t, write(false), write(true))

	w, err := newWriter(Schema{Metrics: []Metric{{Name: "f", Aggregator: agg.LongFirst}}}, writerOptions{})
	require.NoError(t, err)
	tw, err := w.Time()
	require.NoError(t, err)
	require.ErrorIs(t, tw.AppendValues([]int64{3, 2}), ErrInvalid, "__time out of order")
	fw, err := w.Long("f")
	require.NoError(t, err)
	require.ErrorIs(t, fw.AppendValues([]int64{1}), ErrState, "a first metric takes AppendTimed")
	require.NoError(t, w.Abort())
}

// TestAppendSingleIDs writes a single-value dimension with nulls through AppendID and through
// AppendSingleIDs (runs across chunk boundaries): the same segment. An id past the dictionary
// fails naming its row, and the writer stays failed.
func TestAppendSingleIDs(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "d"}}}
	const rows = 29
	ids := make([]uint32, rows)
	for i := range ids {
		ids[i] = uint32(i*7) % 4 // 0 is the null id
	}
	write := func(bulk bool) []byte {
		w, err := newWriter(s, writerOptions{ChunkRows: 6})
		require.NoError(t, err)
		tw, err := w.Time()
		require.NoError(t, err)
		d, err := w.Dim("d")
		require.NoError(t, err)
		require.NoError(t, d.AddNull())
		for _, v := range []string{"a", "b", "c"} {
			_, err := d.AddValue(v)
			require.NoError(t, err)
		}
		for i := range rows {
			require.NoError(t, tw.Append(int64(i)))
		}
		if bulk {
			for lo := 0; lo < rows; lo += 8 {
				require.NoError(t, d.AppendSingleIDs(ids[lo:min(rows, lo+8)]))
			}
		} else {
			for _, id := range ids {
				require.NoError(t, d.AppendID(id))
			}
		}
		for id := range 4 {
			var rs []uint32
			for r, x := range ids {
				if x == uint32(id) {
					rs = append(rs, uint32(r))
				}
			}
			require.NoError(t, d.WriteBitmapRows(uint32(id), rs))
		}
		var buf bytes.Buffer
		_, err = w.FinishTo(&buf)
		require.NoError(t, err)
		return buf.Bytes()
	}
	require.Equal(t, write(false), write(true))

	w, err := newWriter(s, writerOptions{})
	require.NoError(t, err)
	d, err := w.Dim("d")
	require.NoError(t, err)
	_, err = d.AddValue("a")
	require.NoError(t, err)
	err = d.AppendSingleIDs([]uint32{0, 0, 1, 0})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "row 2: id 1 not below the cardinality 1")
	require.ErrorIs(t, d.AppendSingleIDs([]uint32{0}), ErrInvalid, "sticky")
	require.NoError(t, w.Abort())
}

// TestAppendValuesTimeChecks: __time's bulk path checks every value as Append does, across
// calls too, and its error names the row of the first bad value; the first and last times
// (the segment's interval) come out as value by value.
func TestAppendValuesTimeChecks(t *testing.T) {
	hour := int64(3600_000)
	for _, c := range []struct {
		name  string
		gran  Granularity
		calls [][]int64
		row   string
	}{
		{"order within a call", GranularityNone, [][]int64{{1, 2, 5, 4}}, "row 3:"},
		{"order across calls", GranularityNone, [][]int64{{1, 2}, {2, 3}, {1}}, "row 4:"},
		{"order within a later call", GranularityNone, [][]int64{{1, 2}, {10, 5}}, "row 3:"},
		{"past MaxTime at a later call's end", GranularityNone, [][]int64{{1, 2}, {3, 4, MaxTime + 1}}, "row 4:"},
		{"not truncated", GranularityHour, [][]int64{{0, hour}, {2*hour + 1}}, "row 2:"},
		{"before MinTime", GranularityNone, [][]int64{{MinTime - 1}}, "row 0:"},
		{"after MaxTime", GranularityNone, [][]int64{{0}, {MaxTime, MaxTime + 1}}, "row 2:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := newWriter(Schema{Granularity: c.gran}, writerOptions{ChunkRows: 3})
			require.NoError(t, err)
			tw, err := w.Time()
			require.NoError(t, err)
			for i, vs := range c.calls {
				err = tw.AppendValues(vs)
				if i < len(c.calls)-1 {
					require.NoError(t, err)
				}
			}
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, c.row)
			require.Error(t, tw.Append(0), "the writer stays failed")
			require.NoError(t, w.Abort())
		})
	}
	// Good times in bulk: the interval runs from the first to the last.
	w, err := newWriter(Schema{Granularity: GranularityHour}, writerOptions{ChunkRows: 3})
	require.NoError(t, err)
	tw, err := w.Time()
	require.NoError(t, err)
	require.NoError(t, tw.AppendValues([]int64{2 * hour, 2 * hour, 3 * hour}))
	require.NoError(t, tw.AppendValues(nil))
	require.NoError(t, tw.AppendValues([]int64{3 * hour, 7 * hour}))
	var buf bytes.Buffer
	info, err := w.FinishTo(&buf)
	require.NoError(t, err)
	require.Equal(t, Interval{Start: 2 * hour, End: 8 * hour}, info.Interval)
}

// failAfter accepts n bytes, then fails every write.
type failAfter struct{ n int }

var errWriteFailed = errors.New("write failed")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) <= f.n {
		f.n -= len(p)
		return len(p), nil
	}
	k := f.n
	f.n = 0
	return k, errWriteFailed
}

// TestFinishToWriteFails fails the output at several points of a segment of many buffers
// (emit reads them ahead on a goroutine of its own): FinishTo says so, returns, and the
// stages are released; a writer that succeeds gets the same bytes as from Finish.
func TestFinishToWriteFails(t *testing.T) {
	s, rows := publishRows(t, 20_000)
	var whole bytes.Buffer
	_, err := filledWriter(t, s, rows, writerOptions{}).FinishTo(&whole)
	require.NoError(t, err)
	require.Greater(t, whole.Len(), 4*emitBuf, "a segment of more buffers than emit holds")
	for _, at := range []int{0, 10, emitBuf - 1, emitBuf, 3*emitBuf + 5, whole.Len() - 3} {
		med := medium.NewHeap()
		w := filledWriter(t, s, rows, writerOptions{Medium: med})
		_, err := w.FinishTo(&failAfter{n: at})
		require.ErrorIs(t, err, errWriteFailed, "failing after %d bytes", at)
		require.NoError(t, med.Close())
	}
	dst := filepath.Join(t.TempDir(), "seg")
	_, err = filledWriter(t, s, rows, writerOptions{}).Finish(dst, PublishOptions{})
	require.NoError(t, err)
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.True(t, bytes.Equal(whole.Bytes(), got), "FinishTo and Finish write the same bytes")
}
