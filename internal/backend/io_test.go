package backend

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

var errInvalid = errors.New("invalid argument")

var testIO = IO{Name: "test", Invalid: errInvalid}

func TestReadAtBounds(t *testing.T) {
	p := make([]byte, 4)

	done, err := testIO.ReadAtBounds(p, -1, 10)
	require.True(t, done)
	require.ErrorIs(t, err, errInvalid)
	require.EqualError(t, err, "test: read at -1: invalid argument: negative offset")

	done, err = testIO.ReadAtBounds(nil, 3, 10)
	require.True(t, done, "an empty p reads nothing")
	require.NoError(t, err)

	done, err = testIO.ReadAtBounds(nil, 20, 10)
	require.True(t, done, "an empty p is no error even past the end, as in os.File")
	require.NoError(t, err)

	for _, off := range []int64{10, 11} {
		done, err = testIO.ReadAtBounds(p, off, 10)
		require.True(t, done)
		require.Same(t, io.EOF, err, "io.EOF itself, for callers that compare with ==")
	}

	for _, off := range []int64{0, 9} {
		done, err = testIO.ReadAtBounds(p, off, 10)
		require.False(t, done, "off %d: the caller reads", off)
		require.NoError(t, err)
	}
}

// countReader returns count from every Read, with err.
type countReader struct {
	count int
	err   error
}

func (r countReader) Read([]byte) (int, error) { return r.count, r.err }

func TestReadSome(t *testing.T) {
	room := make([]byte, 8)

	n, done, err := testIO.ReadSome(bytes.NewReader([]byte("abc")), room)
	require.Equal(t, 3, n)
	require.False(t, done)
	require.NoError(t, err)
	require.Equal(t, "abc", string(room[:n]))

	n, done, err = testIO.ReadSome(iotest.DataErrReader(bytes.NewReader([]byte("xy"))), room)
	require.Equal(t, 2, n, "bytes that come with io.EOF are kept")
	require.True(t, done)
	require.NoError(t, err, "io.EOF ends the loop without an error")

	broken := errors.New("broken reader")
	n, done, err = testIO.ReadSome(countReader{count: 5, err: broken}, room)
	require.Equal(t, 5, n, "bytes that come with an error are kept")
	require.True(t, done)
	require.Same(t, broken, err, "the reader's error as it is")

	for _, bad := range []int{-1, len(room) + 1} {
		n, done, err = testIO.ReadSome(countReader{count: bad}, room)
		require.Zero(t, n)
		require.True(t, done)
		require.ErrorIs(t, err, errInvalid)
		require.ErrorContains(t, err, "test: read from")
		require.ErrorContains(t, err, "reader returned invalid count")
	}
}

// countWriter returns count from every Write, with err.
type countWriter struct {
	count int
	err   error
}

func (w countWriter) Write([]byte) (int, error) { return w.count, w.err }

func TestWriteFull(t *testing.T) {
	p := []byte("abcd")

	var buf bytes.Buffer
	n, err := testIO.WriteFull(&buf, p)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, "abcd", buf.String())

	n, err = testIO.WriteFull(countWriter{count: 2}, p)
	require.Equal(t, 2, n)
	require.Same(t, io.ErrShortWrite, err, "a short write without an error")

	broken := errors.New("broken writer")
	n, err = testIO.WriteFull(countWriter{count: 1, err: broken}, p)
	require.Equal(t, 1, n)
	require.Same(t, broken, err, "the writer's error as it is")

	for _, bad := range []int{-1, len(p) + 1} {
		n, err = testIO.WriteFull(countWriter{count: bad}, p)
		require.Zero(t, n)
		require.ErrorIs(t, err, errInvalid)
		require.ErrorContains(t, err, "test: write to")
		require.ErrorContains(t, err, "writer returned invalid count")
	}
}
