package mediumtest

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/medium"
)

func testReadAt[T tb[T]](t T, open Open[T]) {
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

func testReadFrom[T tb[T]](t T, open Open[T]) {
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

func testWriteToFailing[T tb[T]](t T, open Open[T]) {
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

func testWriteToFile[T tb[T]](t T, open Open[T]) {
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
