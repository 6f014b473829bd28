package parquetpool_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/parquetpool"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/offheap"
	"github.com/writeout/writeout/tmpfile"
)

var _ parquet.BufferPool = (*parquetpool.Pool)(nil)

type mediumCase struct {
	name string
	open func(t *testing.T) medium.Medium
}

func media() []mediumCase {
	return []mediumCase{
		{"heap", func(*testing.T) medium.Medium { return medium.NewHeap() }},
		{"tmpfile-mem", func(t *testing.T) medium.Medium {
			fs := afero.NewMemMapFs()
			require.NoError(t, fs.MkdirAll("/tmp", 0o755))
			m, err := tmpfile.New(tmpfile.Options{Fs: fs, Dir: "/tmp", MinBufferSize: 16, BufferSize: 64})
			require.NoError(t, err)
			return m
		}},
		{"tmpfile-os", func(t *testing.T) medium.Medium {
			m, err := tmpfile.New(tmpfile.Options{Dir: t.TempDir(), MinBufferSize: 16, BufferSize: 64})
			require.NoError(t, err)
			return m
		}},
		{"offheap", func(t *testing.T) medium.Medium {
			m, err := offheap.New(offheap.Options{})
			require.NoError(t, err)
			return m
		}},
	}
}

// readAll reads r to the end with io.Copy: through WriteTo when r has it (wrap r in
// struct{ io.Reader } to read with Read).
func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	var out bytes.Buffer
	_, err := io.Copy(&out, r)
	require.NoError(t, err)
	return out.Bytes()
}

func TestConformance(t *testing.T) {
	for _, mc := range media() {
		t.Run(mc.name, func(t *testing.T) {
			m := mc.open(t)
			defer func() { require.NoError(t, m.Close()) }()
			pool := parquetpool.New(m)
			rng := rand.New(rand.NewPCG(1, 2))

			// Several buffers written interleaved, in pieces of random sizes, as parquet-go's
			// column writers do.
			const nbuf = 4
			bufs := make([]io.ReadWriteSeeker, nbuf)
			want := make([][]byte, nbuf)
			for i := range bufs {
				bufs[i] = pool.GetBuffer()
				off, err := bufs[i].Seek(0, io.SeekStart)
				require.NoError(t, err)
				require.Zero(t, off)
			}
			for range 200 {
				i := rng.IntN(nbuf)
				p := make([]byte, rng.IntN(300))
				for j := range p {
					p[j] = byte(rng.Uint32())
				}
				if rng.IntN(2) == 0 {
					n, err := bufs[i].Write(p)
					require.NoError(t, err)
					require.Equal(t, len(p), n)
				} else {
					n, err := io.Copy(bufs[i], bytes.NewReader(p)) // ReadFrom
					require.NoError(t, err)
					require.Equal(t, int64(len(p)), n)
				}
				want[i] = append(want[i], p...)
			}
			require.Equal(t, nbuf, pool.Outstanding())

			for i, buf := range bufs {
				w := want[i]
				size := int64(len(w))
				pos, err := buf.Seek(0, io.SeekCurrent)
				require.NoError(t, err)
				require.Equal(t, size, pos)

				// Read from the start with Read (not WriteTo).
				_, err = buf.Seek(0, io.SeekStart)
				require.NoError(t, err)
				require.Equal(t, w, readAll(t, struct{ io.Reader }{buf}))
				n, err := buf.Read(make([]byte, 8))
				require.Zero(t, n)
				require.ErrorIs(t, err, io.EOF)

				// From the start with WriteTo (io.Copy's path), twice.
				for range 2 {
					_, err = buf.Seek(0, io.SeekStart)
					require.NoError(t, err)
					var out bytes.Buffer
					n, err := io.Copy(&out, buf)
					require.NoError(t, err)
					require.Equal(t, size, n)
					require.Equal(t, w, out.Bytes())
				}

				// Mid-buffer: SeekStart, SeekCurrent, SeekEnd.
				_, err = buf.Seek(size/3, io.SeekStart)
				require.NoError(t, err)
				pos, err = buf.Seek(size/3, io.SeekCurrent)
				require.NoError(t, err)
				require.Equal(t, 2*(size/3), pos)
				require.Equal(t, w[pos:], readAll(t, buf)) // WriteTo from pos
				pos, err = buf.Seek(-10, io.SeekEnd)
				require.NoError(t, err)
				require.Equal(t, size-10, pos)
				require.Equal(t, w[size-10:], readAll(t, struct{ io.Reader }{buf}))

				// Past the end: reads give EOF, the position stays there.
				pos, err = buf.Seek(5, io.SeekEnd)
				require.NoError(t, err)
				require.Equal(t, size+5, pos)
				n, err = buf.Read(make([]byte, 8))
				require.Zero(t, n)
				require.ErrorIs(t, err, io.EOF)

				// Before the start and a bad whence are invalid.
				_, err = buf.Seek(-1, io.SeekStart)
				require.ErrorIs(t, err, medium.ErrInvalid)
				_, err = buf.Seek(-size-1, io.SeekEnd)
				require.ErrorIs(t, err, medium.ErrInvalid)
				_, err = buf.Seek(0, 7)
				require.ErrorIs(t, err, medium.ErrInvalid)

				// A write not at the end fails and changes nothing; at the end it appends.
				_, err = buf.Seek(1, io.SeekStart)
				require.NoError(t, err)
				_, err = buf.Write([]byte("x"))
				require.ErrorIs(t, err, parquetpool.ErrNotAppend)
				_, err = io.Copy(buf, bytes.NewReader([]byte("x")))
				require.ErrorIs(t, err, parquetpool.ErrNotAppend)
				_, err = buf.Seek(0, io.SeekEnd)
				require.NoError(t, err)
				_, err = buf.Write([]byte("tail"))
				require.NoError(t, err)
				w = append(w, "tail"...)
				_, err = buf.Seek(0, io.SeekStart)
				require.NoError(t, err)
				require.Equal(t, w, readAll(t, buf))
			}

			// Put then Get: the new buffer is empty, the old one is released.
			old := bufs[0]
			pool.PutBuffer(old)
			pool.PutBuffer(old) // a second put is ignored
			require.Equal(t, nbuf-1, pool.Outstanding())
			_, err := old.Write([]byte("x"))
			require.ErrorIs(t, err, parquetpool.ErrReleased)
			_, err = old.Read(make([]byte, 1))
			require.ErrorIs(t, err, parquetpool.ErrReleased)
			_, err = old.Seek(0, io.SeekStart)
			require.ErrorIs(t, err, parquetpool.ErrReleased)
			fresh := pool.GetBuffer()
			require.Empty(t, readAll(t, fresh))
			pos, err := fresh.Seek(0, io.SeekEnd)
			require.NoError(t, err)
			require.Zero(t, pos)
			_, err = fresh.Write([]byte("new"))
			require.NoError(t, err)
			_, err = fresh.Seek(0, io.SeekStart)
			require.NoError(t, err)
			require.Equal(t, []byte("new"), readAll(t, fresh))
			// The other buffers are untouched by the put and the new buffer.
			_, err = bufs[1].Seek(0, io.SeekStart)
			require.NoError(t, err)
			require.Equal(t, append(want[1], "tail"...), readAll(t, bufs[1]))

			// Close releases what is still out; later gets fail; a second Close returns nil.
			require.NoError(t, pool.Close())
			require.Zero(t, pool.Outstanding())
			_, err = bufs[2].Write([]byte("x"))
			require.ErrorIs(t, err, parquetpool.ErrReleased)
			_, err = pool.GetBuffer().Write([]byte("x"))
			require.ErrorIs(t, err, parquetpool.ErrClosed)
			require.NoError(t, pool.Close())
		})
	}
}

func TestGetBufferMediumClosed(t *testing.T) {
	m := medium.NewHeap()
	pool := parquetpool.New(m)
	out := pool.GetBuffer()
	require.NoError(t, m.Close())
	_, err := out.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed)
	buf := pool.GetBuffer()
	_, err = buf.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed)
	_, err = buf.Seek(0, io.SeekStart)
	require.ErrorIs(t, err, medium.ErrClosed)
	pool.PutBuffer(buf) // a failing buffer: ignored
	pool.PutBuffer(out)
	require.NoError(t, pool.Close())
}

func TestConcurrent(t *testing.T) {
	m, err := tmpfile.New(tmpfile.Options{Dir: t.TempDir(), MinBufferSize: 16, BufferSize: 64})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	pool := parquetpool.New(m)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				buf := pool.GetBuffer()
				p := []byte(strconv.Itoa(g*1000+i) + "-payload-" + strconv.Itoa(i))
				_, err := buf.Write(p)
				if err == nil {
					_, err = buf.Seek(0, io.SeekStart)
				}
				var got []byte
				if err == nil {
					got, err = io.ReadAll(buf)
				}
				if err == nil && !bytes.Equal(got, p) {
					err = errors.New("mismatch")
				}
				pool.PutBuffer(buf)
				if err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Zero(t, pool.Outstanding())
	require.NoError(t, pool.Close())
}

type row struct {
	Time    int64    `parquet:"time,timestamp(millisecond)"`
	Country string   `parquet:"country,dict"`
	City    *string  `parquet:"city,optional"`
	Tags    []string `parquet:"tags,list"`
	Count   int64    `parquet:"count"`
	Delay   *float64 `parquet:"delay,optional"`
}

func makeRows(n int) []row {
	rng := rand.New(rand.NewPCG(3, 4))
	countries := []string{"FR", "DE", "US", "JP", "BR"}
	rows := make([]row, n)
	for i := range rows {
		r := row{
			Time:    1_700_000_000_000 + int64(i)*1000,
			Country: countries[rng.IntN(len(countries))],
			Count:   rng.Int64N(1 << 40),
		}
		if rng.IntN(4) != 0 {
			c := "city-" + strconv.Itoa(rng.IntN(5000))
			r.City = &c
		}
		if rng.IntN(3) != 0 {
			d := rng.Float64() * 100
			r.Delay = &d
		}
		for range rng.IntN(3) {
			r.Tags = append(r.Tags, "t"+strconv.Itoa(rng.IntN(20)))
		}
		rows[i] = r
	}
	return rows
}

// writeParquet writes rows through pool (in row groups of groupRows) and returns the file.
func writeParquet(t *testing.T, pool parquet.BufferPool, rows []row, groupRows int, during func()) []byte {
	t.Helper()
	var out bytes.Buffer
	w := parquet.NewGenericWriter[row](&out, parquet.ColumnPageBuffers(pool), parquet.PageBufferSize(4<<10))
	for start := 0; start < len(rows); start += groupRows {
		end := min(start+groupRows, len(rows))
		for s := start; s < end; s += 1000 {
			n, err := w.Write(rows[s:min(s+1000, end)])
			require.NoError(t, err)
			require.Equal(t, min(s+1000, end)-s, n)
			if during != nil {
				during()
			}
		}
		require.NoError(t, w.Flush())
		if during != nil {
			during()
		}
	}
	require.NoError(t, w.Close())
	return out.Bytes()
}

func readParquet(t *testing.T, data []byte) []row {
	t.Helper()
	r := parquet.NewGenericReader[row](bytes.NewReader(data))
	defer func() { require.NoError(t, r.Close()) }()
	got := make([]row, 0, r.NumRows())
	buf := make([]row, 4096)
	for {
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	return got
}

func TestParquetRoundTrip(t *testing.T) {
	rows := makeRows(100_000)
	// Small buffers: the pages go to the medium's file, not only to the Bytes' memory buffers.
	m, err := tmpfile.New(tmpfile.Options{Dir: t.TempDir(), BufferSize: 4 << 10})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	pool := parquetpool.New(m)

	data := writeParquet(t, pool, rows, 30_000, nil)
	require.Zero(t, pool.Outstanding(), "the writer put back every buffer")
	require.NoError(t, pool.Close())
	require.Positive(t, m.FileBytes(), "pages were staged in the medium's file")

	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	require.Len(t, f.RowGroups(), 4)
	got := readParquet(t, data)
	require.Len(t, got, len(rows))
	for i := range rows {
		if !equalRow(rows[i], got[i]) {
			require.Equal(t, rows[i], got[i], "row %d", i)
		}
	}
}

func equalRow(a, b row) bool {
	if a.Time != b.Time || a.Country != b.Country || a.Count != b.Count || len(a.Tags) != len(b.Tags) {
		return false
	}
	for i := range a.Tags {
		if a.Tags[i] != b.Tags[i] {
			return false
		}
	}
	if (a.City == nil) != (b.City == nil) || (a.City != nil && *a.City != *b.City) {
		return false
	}
	return (a.Delay == nil) == (b.Delay == nil) && (a.Delay == nil || *a.Delay == *b.Delay)
}

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// TestDescriptors counts the process's descriptors while parquet-go writes a table of 6 leaf
// columns through the pool on a tmpfile medium, and through parquet-go's own file pool.
func TestDescriptors(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts /proc/self/fd")
	}
	rows := makeRows(100_000)
	dir := t.TempDir()

	measure := func(open func() (parquet.BufferPool, func() error)) (peak int, data []byte) {
		before := openFDs(t)
		pool, closePool := open()
		sample := func() { peak = max(peak, openFDs(t)-before) }
		data = writeParquet(t, pool, rows, 50_000, sample)
		require.NoError(t, closePool())
		require.Equal(t, before, openFDs(t), "every descriptor released")
		return peak, data
	}

	ours, data := measure(func() (parquet.BufferPool, func() error) {
		m, err := tmpfile.New(tmpfile.Options{Dir: dir})
		require.NoError(t, err)
		pool := parquetpool.New(m)
		return pool, func() error { return errors.Join(pool.Close(), m.Close()) }
	})
	require.Len(t, readParquet(t, data), len(rows))
	theirs, _ := measure(func() (parquet.BufferPool, func() error) {
		return parquet.NewFileBufferPool(dir, "buffers.*"), func() error { return nil }
	})
	t.Logf("peak extra descriptors during the write: writeout pool on tmpfile %d, parquet.NewFileBufferPool %d", ours, theirs)
	require.LessOrEqual(t, ours, 4)
}
