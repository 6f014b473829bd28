// Package mediumtest is the conformance suite for medium backends, in the spirit of
// testing/fstest.TestFS: every backend's tests call Run, and passing it is the definition of a
// correct backend.
//
// The random cases are seeded; a failing case logs its seed. Set WRITEOUT_SEED to replay one.
package mediumtest

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/medium"
)

// TB is the part of *testing.T the suite uses; T is the test type itself (*testing.T satisfies
// TB[*testing.T]). The suite takes it rather than *testing.T so that this package, which is
// not a test file, does not import package testing.
type TB[T any] interface {
	Helper()
	Errorf(format string, args ...any)
	FailNow()
	Logf(format string, args ...any)
	Skip(args ...any)
	Cleanup(func())
	TempDir() string
	Run(name string, f func(T)) bool
}

// Open returns a fresh, empty medium for one test. The suite closes it; open may also register
// a t.Cleanup of its own (for example to check that no file is left behind).
type Open[T any] func(t T) medium.Medium

// Run runs the whole conformance suite against the backend that open makes.
func Run[T TB[T]](t T, open Open[T]) {
	t.Run("Empty", func(t T) { testEmpty(t, open) })
	t.Run("RandomWrites", func(t T) { testRandomWrites(t, open) })
	t.Run("LargeWrites", func(t T) { testLargeWrites(t, open) })
	t.Run("Interleaved", func(t T) { testInterleaved(t, open) })
	t.Run("NoRetain", func(t T) { testNoRetain(t, open) })
	t.Run("ReadAt", func(t T) { testReadAt(t, open) })
	t.Run("ReadFrom", func(t T) { testReadFrom(t, open) })
	t.Run("WriteToFailing", func(t T) { testWriteToFailing(t, open) })
	t.Run("WriteToFile", func(t T) { testWriteToFile(t, open) })
	t.Run("Closed", func(t T) { testClosed(t, open) })
	t.Run("Children", func(t T) { testChildren(t, open) })
	t.Run("OnClose", func(t T) { testOnClose(t, open) })
	t.Run("Concurrent", func(t T) { testConcurrent(t, open) })
	t.Run("Discard", func(t T) { testDiscard(t, open) })
}

func seed[T TB[T]](t T) uint64 {
	t.Helper()
	if s := os.Getenv("WRITEOUT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "WRITEOUT_SEED")
		t.Logf("seed %d (from WRITEOUT_SEED)", v)
		return v
	}
	v := rand.Uint64()
	t.Logf("seed %d (replay with WRITEOUT_SEED=%d)", v, v)
	return v
}

// scaled returns n, or a third of it under -race, a tenth under -race -short (CI's race step:
// the detector needs the interleavings, not the volume).
func scaled(n int) int {
	switch {
	case raceEnabled && short():
		return max(n/10, 1)
	case raceEnabled:
		return max(n/3, 1)
	}
	return n
}

// short reports whether the test binary runs with -short (the flag package testing registers).
func short() bool {
	f := flag.Lookup("test.short")
	return f != nil && f.Value.String() == "true"
}

func openMedium[T TB[T]](t T, open Open[T]) medium.Medium {
	t.Helper()
	m := open(t)
	require.NotNil(t, m)
	t.Cleanup(func() { assert.NoError(t, m.Close(), "closing the medium") })
	return m
}

func newBytes[T TB[T]](t T, m medium.Medium) medium.Bytes {
	t.Helper()
	b, err := m.NewBytes()
	require.NoError(t, err)
	require.NotNil(t, b)
	return b
}

// randomBytes returns n bytes drawn from a ChaCha8 stream seeded from r (fast even under -race).
func randomBytes(r *rand.Rand, n int) []byte {
	p := make([]byte, n)
	var key [32]byte
	for i := range 4 {
		v := r.Uint64()
		for j := range 8 {
			key[8*i+j] = byte(v >> (8 * j))
		}
	}
	_, _ = rand.NewChaCha8(key).Read(p)
	return p
}

// writeSize draws a write size: mostly small, sometimes around typical buffer and chunk sizes
// (4 KiB, 64 KiB, 1 MiB) and past them.
func writeSize(r *rand.Rand) int {
	switch k := r.IntN(100); {
	case k < 5:
		return 0
	case k < 15:
		return 1
	case k < 55:
		return r.IntN(128)
	case k < 75:
		return r.IntN(8 << 10)
	case k < 90:
		return 60<<10 + r.IntN(10<<10)
	case k < 97:
		return r.IntN(300 << 10)
	default:
		return (1 << 20) - 3 + r.IntN(2<<20)
	}
}

// appendRandom appends one random write through a random write method to b and to the model.
func appendRandom[T TB[T]](t T, r *rand.Rand, b medium.Bytes, model *bytes.Buffer) {
	t.Helper()
	p := randomBytes(r, writeSize(r))
	before := b.Size()
	switch r.IntN(5) {
	case 0:
		n, err := b.Write(p)
		require.NoError(t, err)
		require.Equal(t, len(p), n)
	case 1:
		n, err := b.WriteString(string(p))
		require.NoError(t, err)
		require.Equal(t, len(p), n)
	case 2:
		if len(p) > 4096 {
			p = p[:4096]
		}
		for _, c := range p {
			require.NoError(t, b.WriteByte(c))
		}
	case 3:
		n, err := b.ReadFrom(bytes.NewReader(p))
		require.NoError(t, err)
		require.Equal(t, int64(len(p)), n)
	case 4:
		n, err := b.ReadFrom(iotest.HalfReader(bytes.NewReader(p)))
		require.NoError(t, err)
		require.Equal(t, int64(len(p)), n)
	}
	model.Write(p)
	require.Equal(t, before+int64(len(p)), b.Size(), "Size after a write of %d bytes", len(p))
	require.Equal(t, int64(model.Len()), b.Size())
}

// checkContents checks Size, WriteTo (twice) and ReadAt of b against want.
func checkContents[T TB[T]](t T, r *rand.Rand, b medium.Bytes, want []byte) {
	t.Helper()
	require.Equal(t, int64(len(want)), b.Size(), "Size")
	for i := range 2 {
		var got bytes.Buffer
		n, err := b.WriteTo(&got)
		require.NoError(t, err, "WriteTo #%d", i+1)
		require.Equal(t, int64(len(want)), n, "WriteTo #%d count", i+1)
		if !bytes.Equal(want, got.Bytes()) {
			require.Failf(t, "WriteTo differs", "WriteTo #%d: %s", i+1, firstDiff(want, got.Bytes()))
		}
	}
	for range 20 {
		if len(want) == 0 {
			break
		}
		off := r.IntN(len(want))
		n := r.IntN(min(len(want)-off, 256<<10) + 1)
		p := make([]byte, n)
		k, err := b.ReadAt(p, int64(off))
		require.NoError(t, err, "ReadAt(%d bytes, %d) of %d", n, off, len(want))
		require.Equal(t, n, k)
		if !bytes.Equal(want[off:off+n], p) {
			require.Failf(t, "ReadAt differs", "ReadAt(%d bytes, %d): %s", n, off, firstDiff(want[off:off+n], p))
		}
	}
	checkReadAtEnd(t, b, want)
}

// checkReadAtEnd checks ReadAt across, at and past the end.
func checkReadAtEnd[T TB[T]](t T, b medium.Bytes, want []byte) {
	t.Helper()
	size := int64(len(want))
	// A read that runs past the end returns what there is and io.EOF.
	if size > 0 {
		p := make([]byte, 10)
		off := max(size-3, 0)
		k, err := b.ReadAt(p, off)
		require.ErrorIs(t, err, io.EOF, "ReadAt across the end")
		require.Equal(t, int(size-off), k)
		require.Equal(t, want[off:], p[:k])
	}
	p := make([]byte, 4)
	k, err := b.ReadAt(p, size)
	require.ErrorIs(t, err, io.EOF, "ReadAt at the end")
	require.Zero(t, k)
	k, err = b.ReadAt(p, size+1000)
	require.ErrorIs(t, err, io.EOF, "ReadAt past the end")
	require.Zero(t, k)
	k, err = b.ReadAt(nil, 0)
	require.NoError(t, err, "ReadAt of an empty slice")
	require.Zero(t, k)
	_, err = b.ReadAt(p, -1)
	require.Error(t, err, "ReadAt at a negative offset")
	require.NotErrorIs(t, err, io.EOF, "ReadAt at a negative offset")
}

func firstDiff(want, got []byte) string {
	if len(want) != len(got) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			return fmt.Sprintf("first difference at byte %d: got %#x, want %#x", i, got[i], want[i])
		}
	}
	return "equal"
}

func testEmpty[T TB[T]](t T, open Open[T]) {
	m := openMedium(t, open)
	b := newBytes(t, m)
	require.Zero(t, b.Size())
	checkContents(t, rand.New(rand.NewPCG(1, 2)), b, nil)
	n, err := b.Write(nil)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = b.WriteString("")
	require.NoError(t, err)
	require.Zero(t, n)
	k, err := b.ReadFrom(bytes.NewReader(nil))
	require.NoError(t, err)
	require.Zero(t, k)
	require.Zero(t, b.Size())
	checkContents(t, rand.New(rand.NewPCG(1, 2)), b, nil)
}

func testRandomWrites[T TB[T]](t T, open Open[T]) {
	s := seed(t)
	r := rand.New(rand.NewPCG(s, 1))
	m := openMedium(t, open)
	for range 4 {
		b := newBytes(t, m)
		var model bytes.Buffer
		for range scaled(60 + r.IntN(60)) {
			appendRandom(t, r, b, &model)
		}
		checkContents(t, r, b, model.Bytes())
		// Still appendable after WriteTo and ReadAt.
		for range 10 {
			appendRandom(t, r, b, &model)
		}
		checkContents(t, r, b, model.Bytes())
	}
}

func testLargeWrites[T TB[T]](t T, open Open[T]) {
	r := rand.New(rand.NewPCG(seed(t), 2))
	m := openMedium(t, open)
	b := newBytes(t, m)
	var model bytes.Buffer
	for _, n := range []int{5 << 20, 1, (1 << 20) + 1, 3 << 20} {
		p := randomBytes(r, n)
		k, err := b.Write(p)
		require.NoError(t, err)
		require.Equal(t, n, k)
		model.Write(p)
		require.Equal(t, int64(model.Len()), b.Size())
	}
	checkContents(t, r, b, model.Bytes())
}

func testInterleaved[T TB[T]](t T, open Open[T]) {
	r := rand.New(rand.NewPCG(seed(t), 3))
	m := openMedium(t, open)
	const n = 40
	bs := make([]medium.Bytes, n)
	models := make([]bytes.Buffer, n)
	for i := range bs {
		bs[i] = newBytes(t, m)
	}
	for range scaled(1000) {
		i := r.IntN(n)
		appendRandom(t, r, bs[i], &models[i])
		if r.IntN(100) == 0 {
			checkContents(t, r, bs[i], models[i].Bytes())
		}
	}
	for i := range bs {
		checkContents(t, r, bs[i], models[i].Bytes())
	}
}

func testNoRetain[T TB[T]](t T, open Open[T]) {
	m := openMedium(t, open)
	b := newBytes(t, m)
	for _, n := range []int{3, 5000, 300 << 10} {
		p := bytes.Repeat([]byte{'a'}, n)
		_, err := b.Write(p)
		require.NoError(t, err)
		for i := range p {
			p[i] = 'X'
		}
	}
	var got bytes.Buffer
	_, err := b.WriteTo(&got)
	require.NoError(t, err)
	require.Equal(t, 3+5000+300<<10, got.Len())
	require.Equal(t, -1, bytes.IndexByte(got.Bytes(), 'X'), "Bytes retained and saw a later change of p")
}

func testReadAt[T TB[T]](t T, open Open[T]) {
	r := rand.New(rand.NewPCG(seed(t), 4))
	m := openMedium(t, open)
	b := newBytes(t, m)
	var model bytes.Buffer
	for model.Len() < 3<<20 {
		appendRandom(t, r, b, &model)
		// Read back what was just written, while it may still sit in a buffer.
		if model.Len() > 0 {
			off := r.IntN(model.Len())
			p := make([]byte, model.Len()-off)
			k, err := b.ReadAt(p, int64(off))
			require.NoError(t, err)
			require.Equal(t, len(p), k)
			require.True(t, bytes.Equal(model.Bytes()[off:], p), "ReadAt(%d) of the freshest bytes", off)
		}
	}
	want := model.Bytes()
	// Every offset near typical buffer and chunk boundaries.
	for _, edge := range []int{512, 1024, 4096, 8192, 64 << 10, 128 << 10, 1 << 20, 2 << 20} {
		for off := edge - 3; off <= edge+3; off++ {
			if off < 0 || off >= len(want) {
				continue
			}
			p := make([]byte, min(7, len(want)-off))
			k, err := b.ReadAt(p, int64(off))
			require.NoError(t, err)
			require.Equal(t, len(p), k)
			require.Equal(t, want[off:off+len(p)], p, "ReadAt(%d bytes, %d)", len(p), off)
		}
	}
	// One read of everything.
	p := make([]byte, len(want))
	k, err := b.ReadAt(p, 0)
	require.NoError(t, err)
	require.Equal(t, len(want), k)
	require.True(t, bytes.Equal(want, p))
	checkContents(t, r, b, want)
}

var errReader = errors.New("mediumtest: reader failed")

// shortReader returns at most max bytes a call, then fails with errReader after limit bytes.
type shortReader struct {
	data  []byte
	max   int
	limit int
}

func (s *shortReader) Read(p []byte) (int, error) {
	if s.limit <= 0 {
		return 0, errReader
	}
	n := min(len(p), s.max, s.limit, len(s.data))
	copy(p, s.data[:n])
	s.data = s.data[n:]
	s.limit -= n
	return n, nil
}

func testReadFrom[T TB[T]](t T, open Open[T]) {
	r := rand.New(rand.NewPCG(seed(t), 5))
	m := openMedium(t, open)

	t.Run("ShortReadsThenError", func(t T) {
		b := newBytes(t, m)
		_, err := b.WriteString("prefix")
		require.NoError(t, err)
		data := randomBytes(r, 200<<10)
		n, err := b.ReadFrom(&shortReader{data: data, max: 7, limit: 150 << 10})
		require.ErrorIs(t, err, errReader)
		require.Equal(t, int64(150<<10), n)
		want := append([]byte("prefix"), data[:150<<10]...)
		checkContents(t, r, b, want)
		// The Bytes is still usable after the reader's error.
		_, err = b.Write([]byte("suffix"))
		require.NoError(t, err)
		checkContents(t, r, b, append(want, "suffix"...))
	})
	t.Run("DataWithEOF", func(t T) {
		b := newBytes(t, m)
		data := randomBytes(r, 70<<10)
		n, err := b.ReadFrom(iotest.DataErrReader(bytes.NewReader(data)))
		require.NoError(t, err)
		require.Equal(t, int64(len(data)), n)
		checkContents(t, r, b, data)
	})
	t.Run("OneByte", func(t T) {
		b := newBytes(t, m)
		data := randomBytes(r, 10<<10)
		n, err := b.ReadFrom(iotest.OneByteReader(bytes.NewReader(data)))
		require.NoError(t, err)
		require.Equal(t, int64(len(data)), n)
		checkContents(t, r, b, data)
	})
	t.Run("ImmediateError", func(t T) {
		b := newBytes(t, m)
		n, err := b.ReadFrom(iotest.ErrReader(errReader))
		require.ErrorIs(t, err, errReader)
		require.Zero(t, n)
		require.Zero(t, b.Size())
	})
	t.Run("InvalidCount", func(t T) {
		for _, bad := range []int{-1, 1 << 40} {
			b := newBytes(t, m)
			_, err := b.WriteString("kept")
			require.NoError(t, err)
			n, err := b.ReadFrom(badCountReader(bad))
			require.ErrorIs(t, err, medium.ErrInvalid)
			require.ErrorContains(t, err, "reader returned invalid count")
			require.Zero(t, n)
			checkContents(t, r, b, []byte("kept"))
		}
	})
	t.Run("Large", func(t T) {
		b := newBytes(t, m)
		data := randomBytes(r, 3<<20+17)
		n, err := b.ReadFrom(bytes.NewReader(data))
		require.NoError(t, err)
		require.Equal(t, int64(len(data)), n)
		checkContents(t, r, b, data)
	})
}

// badCountReader is a broken io.Reader that returns its value as the count of every read.
type badCountReader int

func (n badCountReader) Read([]byte) (int, error) { return int(n), nil }

var errWriter = errors.New("mediumtest: writer failed")

// failingWriter accepts limit bytes, then fails.
type failingWriter struct {
	buf   bytes.Buffer
	limit int
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) <= f.limit {
		f.limit -= len(p)
		return f.buf.Write(p)
	}
	n := f.limit
	f.limit = 0
	f.buf.Write(p[:n])
	return n, errWriter
}

// shortWriter accepts at most half of every write and reports no error.
type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

// badCountWriter is a broken io.Writer that returns its value as the count of every write.
type badCountWriter int

func (n badCountWriter) Write([]byte) (int, error) { return int(n), nil }

func testWriteToFailing[T TB[T]](t T, open Open[T]) {
	r := rand.New(rand.NewPCG(seed(t), 6))
	m := openMedium(t, open)
	b := newBytes(t, m)
	var model bytes.Buffer
	for model.Len() < 2<<20 {
		appendRandom(t, r, b, &model)
	}
	for _, limit := range []int{0, 1, 4095, 70 << 10, model.Len() - 1} {
		w := &failingWriter{limit: limit}
		n, err := b.WriteTo(w)
		require.ErrorIs(t, err, errWriter, "WriteTo into a writer failing after %d bytes", limit)
		require.Equal(t, int64(limit), n, "WriteTo count into a writer failing after %d bytes", limit)
		require.True(t, bytes.Equal(model.Bytes()[:limit], w.buf.Bytes()))
	}
	n, err := b.WriteTo(shortWriter{})
	require.ErrorIs(t, err, io.ErrShortWrite, "WriteTo into a short writer")
	require.Less(t, n, int64(model.Len()))
	for _, bad := range []int{-1, 1 << 40} {
		n, err := b.WriteTo(badCountWriter(bad))
		require.ErrorIs(t, err, medium.ErrInvalid, "WriteTo into a writer returning count %d", bad)
		require.ErrorContains(t, err, "writer returned invalid count")
		require.Zero(t, n, "a count the writer made up is not counted")
	}
	// Unchanged and still usable.
	checkContents(t, r, b, model.Bytes())
	appendRandom(t, r, b, &model)
	checkContents(t, r, b, model.Bytes())
}

func testWriteToFile[T TB[T]](t T, open Open[T]) {
	r := rand.New(rand.NewPCG(seed(t), 7))
	m := openMedium(t, open)
	const n = 5
	bs := make([]medium.Bytes, n)
	models := make([]bytes.Buffer, n)
	for i := range bs {
		bs[i] = newBytes(t, m)
	}
	for range scaled(300) {
		i := r.IntN(n)
		appendRandom(t, r, bs[i], &models[i])
	}
	path := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }() // after a failed check; the Close below is checked
	// A prefix first: WriteTo must write at the file's position, not at offset 0.
	var want bytes.Buffer
	_, err = f.WriteString("header")
	require.NoError(t, err)
	want.WriteString("header")
	for i := range bs {
		k, err := bs[i].WriteTo(f)
		require.NoError(t, err)
		require.Equal(t, int64(models[i].Len()), k)
		want.Write(models[i].Bytes())
	}
	// And again: WriteTo may be repeated.
	k, err := bs[0].WriteTo(f)
	require.NoError(t, err)
	require.Equal(t, int64(models[0].Len()), k)
	want.Write(models[0].Bytes())
	pos, err := f.Seek(0, io.SeekCurrent)
	require.NoError(t, err)
	require.Equal(t, int64(want.Len()), pos, "file position after WriteTo")
	require.NoError(t, f.Close())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	if !bytes.Equal(want.Bytes(), got) {
		require.Failf(t, "file differs", "%s", firstDiff(want.Bytes(), got))
	}
}

func testClosed[T TB[T]](t T, open Open[T]) {
	m := open(t)
	b := newBytes(t, m)
	_, err := b.WriteString("some bytes")
	require.NoError(t, err)
	big := newBytes(t, m)
	_, err = big.Write(make([]byte, 3<<20))
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "a second Close")

	for _, x := range []medium.Bytes{b, big} {
		_, err = x.Write([]byte("x"))
		require.ErrorIs(t, err, medium.ErrClosed, "Write")
		_, err = x.WriteString("x")
		require.ErrorIs(t, err, medium.ErrClosed, "WriteString")
		require.ErrorIs(t, x.WriteByte('x'), medium.ErrClosed, "WriteByte")
		_, err = x.ReadFrom(bytes.NewReader([]byte("x")))
		require.ErrorIs(t, err, medium.ErrClosed, "ReadFrom")
		_, err = x.WriteTo(io.Discard)
		require.ErrorIs(t, err, medium.ErrClosed, "WriteTo")
		_, err = x.ReadAt(make([]byte, 1), 0)
		require.ErrorIs(t, err, medium.ErrClosed, "ReadAt")
	}
	_, err = m.NewBytes()
	require.ErrorIs(t, err, medium.ErrClosed, "NewBytes")
	_, err = m.NewChild()
	require.ErrorIs(t, err, medium.ErrClosed, "NewChild")

	// OnClose on a closed medium runs at once: nothing it releases leaks.
	ran := false
	m.OnClose(func() error { ran = true; return nil })
	require.True(t, ran, "OnClose on a closed medium")
}

func testChildren[T TB[T]](t T, open Open[T]) {
	r := rand.New(rand.NewPCG(seed(t), 8))
	m := openMedium(t, open)
	pb := newBytes(t, m)
	var pmodel bytes.Buffer
	for range 20 {
		appendRandom(t, r, pb, &pmodel)
	}

	early, err := m.NewChild()
	require.NoError(t, err)
	late, err := m.NewChild()
	require.NoError(t, err)
	grandchild, err := late.NewChild()
	require.NoError(t, err)

	eb := newBytes(t, early)
	lb := newBytes(t, late)
	gb := newBytes(t, grandchild)
	var emodel, lmodel, gmodel bytes.Buffer
	for range 30 {
		appendRandom(t, r, eb, &emodel)
		appendRandom(t, r, lb, &lmodel)
		appendRandom(t, r, gb, &gmodel)
		appendRandom(t, r, pb, &pmodel)
	}
	checkContents(t, r, eb, emodel.Bytes())

	// A child closed early leaves the parent and its siblings intact.
	require.NoError(t, early.Close())
	_, err = eb.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed)
	checkContents(t, r, pb, pmodel.Bytes())
	checkContents(t, r, lb, lmodel.Bytes())
	checkContents(t, r, gb, gmodel.Bytes())
	appendRandom(t, r, pb, &pmodel)
	checkContents(t, r, pb, pmodel.Bytes())

	// The parent's Close closes its remaining children and theirs.
	require.NoError(t, m.Close())
	_, err = lb.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed, "a child's Bytes after the parent's Close")
	_, err = gb.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed, "a grandchild's Bytes after the parent's Close")
	_, err = late.NewBytes()
	require.ErrorIs(t, err, medium.ErrClosed)
	require.NoError(t, late.Close(), "Close of a child already closed by its parent")
	require.NoError(t, early.Close(), "a second Close of a child")
}

func testOnClose[T TB[T]](t T, open Open[T]) {
	m := open(t)
	var order []int
	errA := errors.New("hook A failed")
	errC := errors.New("hook C failed")
	m.OnClose(func() error { order = append(order, 1); return errA })
	m.OnClose(func() error { order = append(order, 2); return nil })
	m.OnClose(func() error { order = append(order, 3); return errC })
	child, err := m.NewChild()
	require.NoError(t, err)
	child.OnClose(func() error { order = append(order, 4); return nil })
	m.OnClose(func() error { order = append(order, 5); return nil })

	b := newBytes(t, m)
	_, err = b.WriteString("data")
	require.NoError(t, err)

	err = m.Close()
	require.Equal(t, []int{5, 4, 3, 2, 1}, order, "hooks run last registered first, children with them")
	require.ErrorIs(t, err, errC)
	require.ErrorIs(t, err, errA)
	// The first error (in the order the hooks ran) comes first.
	require.Regexp(t, "^(?s)hook C failed.*hook A failed", err.Error())
	require.NoError(t, m.Close(), "a second Close after failed hooks")
	require.Len(t, order, 5, "hooks run once")
	_, err = b.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed)
}

func testConcurrent[T TB[T]](t T, open Open[T]) {
	s := seed(t)
	m := openMedium(t, open)
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- concurrentWorker(m, s, w)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// concurrentWorker writes its own Bytes (some in a child of its own) and checks them. It
// returns an error rather than calling t.FailNow off the test goroutine.
func concurrentWorker(m medium.Medium, s uint64, w int) error {
	r := rand.New(rand.NewPCG(s, uint64(100+w)))
	target := m
	if w%2 == 1 {
		child, err := m.NewChild()
		if err != nil {
			return err
		}
		target = child
	}
	m.OnClose(func() error { return nil })
	const n = 3
	bs := make([]medium.Bytes, n)
	models := make([]bytes.Buffer, n)
	for i := range bs {
		b, err := target.NewBytes()
		if err != nil {
			return err
		}
		bs[i] = b
	}
	for range scaled(150) {
		i := r.IntN(n)
		p := randomBytes(r, min(writeSize(r), 200<<10))
		if _, err := bs[i].Write(p); err != nil {
			return err
		}
		models[i].Write(p)
		if bs[i].Size() != int64(models[i].Len()) {
			return fmt.Errorf("worker %d: Size %d, want %d", w, bs[i].Size(), models[i].Len())
		}
	}
	for i := range bs {
		var got bytes.Buffer
		if _, err := bs[i].WriteTo(&got); err != nil {
			return err
		}
		if !bytes.Equal(models[i].Bytes(), got.Bytes()) {
			return fmt.Errorf("worker %d bytes %d: %s", w, i, firstDiff(models[i].Bytes(), got.Bytes()))
		}
		p := make([]byte, models[i].Len())
		if _, err := bs[i].ReadAt(p, 0); err != nil && !(len(p) == 0 && err == io.EOF) {
			return err
		}
		if !bytes.Equal(models[i].Bytes(), p) {
			return fmt.Errorf("worker %d bytes %d ReadAt: %s", w, i, firstDiff(models[i].Bytes(), p))
		}
	}
	if target != m {
		return target.Close()
	}
	return nil
}

// requireGone checks that every call on x but Size fails with ErrClosed.
func requireGone[T TB[T]](t T, x medium.Bytes, what string) {
	t.Helper()
	_, err := x.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed, "%s: Write", what)
	_, err = x.WriteString("x")
	require.ErrorIs(t, err, medium.ErrClosed, "%s: WriteString", what)
	require.ErrorIs(t, x.WriteByte('x'), medium.ErrClosed, "%s: WriteByte", what)
	_, err = x.ReadFrom(bytes.NewReader([]byte("x")))
	require.ErrorIs(t, err, medium.ErrClosed, "%s: ReadFrom", what)
	_, err = x.WriteTo(io.Discard)
	require.ErrorIs(t, err, medium.ErrClosed, "%s: WriteTo", what)
	_, err = x.ReadAt(make([]byte, 1), 0)
	require.ErrorIs(t, err, medium.ErrClosed, "%s: ReadAt", what)
}

// testDiscard runs where the backend's Bytes are medium.Discarders: a discarded Bytes fails
// every call but Size, a second Discard does nothing, the other Bytes (written before and
// after, on the medium and a child) keep their bytes while new ones take the space given back,
// and a Discard after Close fails with ErrClosed.
func testDiscard[T TB[T]](t T, open Open[T]) {
	r := rand.New(rand.NewPCG(seed(t), 9))
	m := openMedium(t, open)
	if _, ok := newBytes(t, m).(medium.Discarder); !ok {
		t.Skip("the backend's Bytes are not Discarders")
	}
	child, err := m.NewChild()
	require.NoError(t, err)
	type staged struct {
		b     medium.Bytes
		model bytes.Buffer
	}
	var all []*staged
	add := func(on medium.Medium) *staged {
		s := &staged{b: newBytes(t, on)}
		all = append(all, s)
		return s
	}
	// Bytes written in turns, so that their bytes interleave wherever the backend puts them.
	for range 6 {
		add(m)
	}
	add(child)
	for range scaled(4) {
		for _, s := range all {
			appendRandom(t, r, s.b, &s.model)
		}
	}
	var gone []medium.Bytes
	for round := range 3 {
		// Discard every other Bytes left, then write more: new Bytes and the survivors.
		var kept []*staged
		for i, s := range all {
			if i%2 == round%2 {
				size := s.b.Size()
				require.NoError(t, s.b.(medium.Discarder).Discard())
				require.NoError(t, s.b.(medium.Discarder).Discard(), "a second Discard")
				require.Equal(t, size, s.b.Size(), "Size after Discard")
				requireGone(t, s.b, "discarded")
				gone = append(gone, s.b)
				continue
			}
			kept = append(kept, s)
		}
		all = kept
		add(m)
		add(child)
		for range scaled(3) {
			for _, s := range all {
				appendRandom(t, r, s.b, &s.model)
			}
		}
		for _, s := range all {
			checkContents(t, r, s.b, s.model.Bytes())
		}
	}
	for _, b := range gone {
		requireGone(t, b, "discarded, later")
	}
	last := newBytes(t, m)
	_, err = last.WriteString("kept until Close")
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.ErrorIs(t, last.(medium.Discarder).Discard(), medium.ErrClosed, "Discard after Close")
}
