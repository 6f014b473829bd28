// Package mediumtest is the conformance suite for medium backends, in the spirit of
// testing/fstest.TestFS: every backend's tests call Run, and passing it is the definition of a
// correct backend.
//
// The random cases are seeded; a failing case logs its seed. Set WRITEOUT_SEED to replay one.
package mediumtest

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/medium"
)

// tb is the part of *testing.T the suite uses; T is the test type itself (*testing.T satisfies
// tb[*testing.T]). The suite takes it rather than *testing.T so that this package, which is
// not a test file, does not import package testing.
type tb[T any] interface {
	require.TestingT // Errorf, FailNow
	Helper()
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
func Run[T tb[T]](t T, open Open[T]) {
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
	t.Run("DiscardPrefix", func(t T) { testDiscardPrefix(t, open) })
}

func seed[T tb[T]](t T) uint64 {
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

func openMedium[T tb[T]](t T, open Open[T]) medium.Medium {
	t.Helper()
	m := open(t)
	require.NotNil(t, m)
	t.Cleanup(func() { assert.NoError(t, m.Close(), "closing the medium") })
	return m
}

func newBytes[T tb[T]](t T, m medium.Medium) medium.Bytes {
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
func appendRandom[T tb[T]](t T, r *rand.Rand, b medium.Bytes, model *bytes.Buffer) {
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
func checkContents[T tb[T]](t T, r *rand.Rand, b medium.Bytes, want []byte) {
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
func checkReadAtEnd[T tb[T]](t T, b medium.Bytes, want []byte) {
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
