package columns

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/tmpfile"
)

// setChunkIndexBuf sets chunkIndexBuf for the test. Tests that call it must not run in parallel.
func setChunkIndexBuf(t *testing.T, n int) {
	old := chunkIndexBuf
	chunkIndexBuf = n
	t.Cleanup(func() { chunkIndexBuf = old })
}

// countingMedium counts the Bytes made by a medium and its children.
type countingMedium struct {
	medium.Medium
	n *atomic.Int64
}

func (m countingMedium) NewBytes() (medium.Bytes, error) {
	m.n.Add(1)
	return m.Medium.NewBytes()
}

func (m countingMedium) NewChild() (medium.Medium, error) {
	c, err := m.Medium.NewChild()
	if err != nil {
		return nil, err
	}
	return countingMedium{Medium: c, n: m.n}, nil
}

// genRows returns n rows of s from newRowGen(seed, s).
func genRows(s Schema, n int, seed uint64) []Row {
	g := newRowGen(seed, s)
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = g.next()
	}
	return rows
}

// TestChunkIndexSpillSameBytes: a writer whose chunk index outgrows chunkIndexBuf keeps the
// entries before in a Bytes of its medium and copies them into the part at finish; the segment
// is the one an index kept whole in memory gives, through the row writer and the column
// writers, in every medium and compression.
func TestChunkIndexSpillSameBytes(t *testing.T) {
	s := allSchema()
	rows := genRows(s, 3000, 11)
	for name, newMedium := range media(t) {
		for _, comp := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
			t.Run(fmt.Sprintf("medium=%s/compression=%s", name, comp), func(t *testing.T) {
				write := func(buf int, by func(testing.TB, Schema, []Row, writerOptions) []byte) ([]byte, int64) {
					setChunkIndexBuf(t, buf)
					m := countingMedium{Medium: newMedium(), n: new(atomic.Int64)}
					defer func() { require.NoError(t, m.Close()) }()
					// ChunkRows 2: 1500 chunks a part, 24,000 bytes of index.
					b := by(t, s, rows, writerOptions{Medium: m, ChunkRows: 2, Compression: comp})
					return b, m.n.Load()
				}
				want, stages := write(64<<10, writeRows)
				for _, buf := range []int{0, 40, 16 << 10} {
					got, made := write(buf, writeRows)
					require.True(t, bytes.Equal(want, got), "row writer, index buffer %d: the segment differs", buf)
					assert.Greater(t, made, stages, "index buffer %d: no index went to the medium", buf)
					got, _ = write(buf, writeColumns)
					require.True(t, bytes.Equal(want, got), "column writers, index buffer %d: the segment differs", buf)
				}
			})
		}
	}
}

// TestChunkIndexSpillDiscarded: the Bytes an index went to is discarded once copied.
func TestChunkIndexSpillDiscarded(t *testing.T) {
	setChunkIndexBuf(t, 40)
	s := allSchema()
	m := newRecordingMedium()
	defer func() { require.NoError(t, m.Close()) }()
	w, err := newWriter(s, writerOptions{Medium: m, ChunkRows: 2})
	require.NoError(t, err)
	stages := len(w.stages)
	rows := genRows(s, 300, 3)
	feedColumns(t, w, s, rows, expectDims(s, rows))
	var buf bytes.Buffer
	_, err = w.FinishTo(&buf)
	require.NoError(t, err)
	require.Greater(t, len(*m.all), stages, "indexes went to the medium")
	for i, b := range *m.all {
		assert.True(t, b.discarded, "Bytes %d of %d bytes not discarded", i, b.Size())
	}
}

// manyChunkSegment writes rows of allSchema in chunks of 3 rows to a file and returns its path,
// bytes and rows.
func manyChunkSegment(t *testing.T, n int) (string, []byte, []Row) {
	t.Helper()
	setChunkIndexBuf(t, 256) // every index goes through the medium
	s := allSchema()
	rows := genRows(s, n, 5)
	b := writeRows(t, s, rows, writerOptions{ChunkRows: 3})
	path := filepath.Join(t.TempDir(), "many.seg")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path, b, rows
}

// TestChunkIndexManyChunks reads back a segment of many chunks in every column kind (numbers,
// ids single- and multi-value, raw strings, sketches, tails, times), mapped and read with
// ReadAt: in order, at random rows (each a binary search of the index), and after
// ReleasePages; after Close every read fails.
func TestChunkIndexManyChunks(t *testing.T) {
	n := 5000
	if raceEnabled {
		n = 1000
	}
	path, b, rows := manyChunkSegment(t, n)
	calls := sysDefaultCopy()
	calls.Mmap = func(int, int64, int, int, int) ([]byte, error) { return nil, errUnsupportedForTest() }
	opens := []struct {
		name   string
		mapped bool
		open   func() (*Segment, error)
	}{
		{"mapped", runtime.GOOS == "linux", func() (*Segment, error) { return Open(path) }},
		{"file-readat", false, func() (*Segment, error) { return openWith(path, calls, OpenOptions{}) }},
		{"readat", false, func() (*Segment, error) { return NewSegment(bytes.NewReader(b), int64(len(b))) }},
	}
	var desc string
	for _, o := range opens {
		t.Run(o.name, func(t *testing.T) {
			seg, err := o.open()
			require.NoError(t, err)
			if o.mapped {
				require.NotNil(t, seg.src.data, "mapped")
			} else {
				require.Nil(t, seg.src.data, "read with ReadAt")
			}
			ix := seg.time.ix
			require.Greater(t, ix.chunks(), n/3-1)
			for i := range ix.chunks() {
				for row := ix.first(i); row < ix.first(i+1); row++ {
					require.Equal(t, i, ix.find(row), "row %d", row)
				}
			}
			require.NoError(t, seg.Verify())
			d, err := readEveryColumn(seg)
			require.NoError(t, err)
			if desc == "" {
				desc = d
			}
			require.Equal(t, desc, d, "every column reads the same")

			s := seg.Schema()
			rr := seg.RowReader()
			var got Row
			for i, want := range rows {
				require.NoError(t, rr.Read(i, &got))
				requireRowEqual(t, s, i, want, got)
			}
			readRandom := func(seed uint64) {
				t.Helper()
				rng := rand.New(rand.NewPCG(seed, 0))
				rr := seg.RowReader()
				for range 2000 {
					i := rng.IntN(len(rows))
					require.NoError(t, rr.Read(i, &got))
					requireRowEqual(t, s, i, rows[i], got)
				}
			}
			readRandom(1)
			require.NoError(t, seg.ReleasePages())
			readRandom(2)

			// Cursors of every kind, opened before Close, with a chunk loaded.
			tc := seg.Time().Cursor()
			_, err = tc.At(1)
			require.NoError(t, err)
			tags, err := seg.Dim("tags")
			require.NoError(t, err)
			dc := tags.Cursor()
			_, err = dc.IDs(1)
			require.NoError(t, err)
			body, err := seg.Raw("body")
			require.NoError(t, err)
			rc := body.Cursor()
			_, _, err = rc.Bytes(1)
			require.NoError(t, err)
			require.NoError(t, seg.Close())
			for what, err := range map[string]error{
				"time":   func() error { _, err := tc.At(n - 1); return err }(),
				"ids":    func() error { _, err := dc.IDs(n - 1); return err }(),
				"raw":    func() error { _, _, err := rc.Bytes(1); return err }(),
				"get":    func() error { _, err := seg.Time().Get(n / 2); return err }(),
				"verify": seg.Verify(),
				"row":    func() error { _, err := seg.ReadRow(n / 2); return err }(),
			} {
				require.ErrorIs(t, err, ErrState, what)
			}
			require.ErrorIs(t, seg.eachChunk(seg.time.ix, func(int) error { return nil }), ErrState)
		})
	}
}

// TestChunkIndexCorruptEntries: every check of the index at open, with the part's CRC fixed up
// so that the check itself answers, mapped and read with ReadAt.
func TestChunkIndexCorruptEntries(t *testing.T) {
	s := Schema{Metrics: []Metric{{Name: "n", Aggregator: "longSum", Field: "n"}}}
	small := make([]Row, 30)
	for i := range small {
		small[i] = Row{Time: int64(i), Metrics: []Value{{Long: int64(i)}}}
	}
	large := make([]Row, 70_000)
	for i := range large {
		large[i] = Row{Time: int64(i), Metrics: []Value{{Long: int64(i)}}}
	}
	goodSmall := writeRows(t, s, small, writerOptions{ChunkRows: 3, Compression: CompressionNone})
	goodLarge := writeRows(t, s, large, writerOptions{ChunkRows: maxChunkRows, Compression: CompressionNone})

	// f sets field k (0 offset, 1 first row) of entry i of the metric's index to v (or, with
	// fn, to fn of the index) and checks the segment fails to open with want.
	f := func(good []byte, i, k int, v func(ix *chunkIndex) uint64, want string) {
		t.Helper()
		seg, err := newSegmentBytes(good)
		require.NoError(t, err)
		c, err := seg.Long("n")
		require.NoError(t, err)
		ix := c.ix
		p := *ix.part
		b := append([]byte(nil), good...)
		at := p.Offset + ix.off(ix.chunks()) + int64(i*chunkIndexEntry+8*k)
		binary.LittleEndian.PutUint64(b[at:], v(ix))
		fo := *seg.f
		fo.parts = append([]segfmt.PartInfo(nil), seg.f.parts...)
		for j := range fo.parts {
			if fo.parts[j].Offset == p.Offset {
				fo.parts[j].CRC = crc(b[p.Offset : p.Offset+p.Length])
			}
		}
		bad := rebuildFooter(t, b, &fo)
		_, err = newSegmentBytes(bad)
		require.ErrorIs(t, err, ErrCorrupt, want)
		require.ErrorContains(t, err, `column "n" part values: `)
		require.ErrorContains(t, err, want)
		_, err = NewSegment(bytes.NewReader(bad), int64(len(bad)))
		require.ErrorIs(t, err, ErrCorrupt, want)
		require.ErrorContains(t, err, want)
	}
	val := func(v uint64) func(*chunkIndex) uint64 { return func(*chunkIndex) uint64 { return v } }
	f(goodSmall, 0, 0, val(1), "chunk 0 at offset 1 row 0, want 0 and 0")
	f(goodSmall, 0, 1, val(1), "chunk 0 at offset 0 row 1, want 0 and 0")
	f(goodSmall, 2, 0, func(ix *chunkIndex) uint64 { return uint64(ix.off(1)) }, "not after chunk 1")
	f(goodSmall, 2, 1, val(3), "not after chunk 1")
	f(goodSmall, 2, 1, val(2), "not after chunk 1")
	f(goodSmall, 9, 0, func(ix *chunkIndex) uint64 { return uint64(ix.off(10)) }, "past the index")
	f(goodSmall, 9, 1, val(30), "past the index at")
	f(goodSmall, 9, 1, val(1<<63), "past the index at")
	f(goodLarge, 1, 1, val(maxChunkRows+1), fmt.Sprintf("chunk 0 holds %d rows, at most %d", maxChunkRows+1, maxChunkRows))
	f(goodLarge, 1, 1, val(1), fmt.Sprintf("chunk 1 holds %d rows, at most %d", 70_000-1, maxChunkRows))

	// The intact segments open and read.
	for _, good := range [][]byte{goodSmall, goodLarge} {
		seg, err := newSegmentBytes(good)
		require.NoError(t, err)
		require.NoError(t, seg.Verify())
	}
}

// writeLongSegment writes rows rows of a long metric (and __time) in chunks of chunkRows rows to
// a file and returns its path.
func writeLongSegment(t testing.TB, rows, chunkRows int) string {
	t.Helper()
	s := Schema{Metrics: []Metric{{Name: "n", Aggregator: "longSum", Field: "n"}}}
	w, err := newWriter(s, writerOptions{ChunkRows: chunkRows})
	require.NoError(t, err)
	tw, err := w.Time()
	require.NoError(t, err)
	lw, err := w.Long("n")
	require.NoError(t, err)
	for i := range rows {
		require.NoError(t, tw.Append(int64(i/1000)))
		require.NoError(t, lw.Append(int64(i)))
	}
	path := filepath.Join(t.TempDir(), "long.seg")
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = w.FinishTo(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return path
}

// allocated returns the bytes fn allocates on the Go heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestChunkIndexOpenHeap: opening a mapped segment of many chunks allocates nothing per chunk
// on the Go heap (the index is read in the mapping); read with ReadAt, one copy of the index's
// 16 bytes a chunk.
func TestChunkIndexOpenHeap(t *testing.T) {
	rows := 2_000_000
	if raceEnabled || testing.Short() {
		rows = 200_000
	}
	const chunkRows = 64
	path := writeLongSegment(t, rows, chunkRows)
	chunks := 2 * (rows + chunkRows - 1) / chunkRows // __time and n
	calls := sysDefaultCopy()
	calls.Mmap = func(int, int64, int, int, int) ([]byte, error) { return nil, errUnsupportedForTest() }
	for _, c := range []struct {
		name  string
		open  func() (*Segment, error)
		limit uint64
	}{
		{"mapped", func() (*Segment, error) { return Open(path) }, uint64(chunks)/8 + 16<<10},
		{"readat", func() (*Segment, error) { return openWith(path, calls, OpenOptions{}) }, uint64(chunks)*chunkIndexEntry + 64<<10},
	} {
		if c.name == "mapped" && runtime.GOOS != "linux" {
			continue
		}
		var seg *Segment
		var err error
		got := allocated(func() { seg, err = c.open() })
		require.NoError(t, err)
		t.Logf("%s: %d chunks, opened with %d bytes allocated (%.2f a chunk)", c.name, chunks, got, float64(got)/float64(chunks))
		assert.Less(t, got, c.limit, c.name)
		v, err := seg.Time().Get(rows - 1)
		require.NoError(t, err)
		require.Equal(t, int64((rows-1)/1000), v)
		require.NoError(t, seg.Close())
	}
}

// TestChunkedWriterIndexHeap: a part of many chunks keeps at most chunkIndexBuf bytes of its
// index on the Go heap (the rest in the medium, here a temp file), and its part holds every
// entry.
func TestChunkedWriterIndexHeap(t *testing.T) {
	m, err := tmpfile.New(tmpfile.Options{Dir: t.TempDir(), MinBufferSize: 4096, BufferSize: 4096})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	const chunks = 200_000 // 3.2 MB of index
	st := &stage{b: discardBytes{}}
	cw := chunkedWriter{st: st, med: m, comp: CompressionNone}
	raw := make([]byte, 8)
	require.NoError(t, cw.writeChunk(raw, 1)) // the frame buffer
	frame := st.n
	got := allocated(func() {
		for range chunks - 1 {
			if err := cw.writeChunk(raw, 1); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Logf("%d chunks written with %d bytes allocated", chunks, got)
	assert.Less(t, got, uint64(3*chunkIndexBuf), "the index stays in a buffer of %d bytes", chunkIndexBuf)
	require.NoError(t, cw.finish())
	require.Equal(t, chunks*(frame+chunkIndexEntry)+chunkTrailerSize, st.n)
}

// faultyMedium is a heap medium that fails as told once armed: NewBytes, or the Write or WriteTo
// of the Bytes made since.
type faultyMedium struct {
	medium.Medium
	armed               *atomic.Bool
	newBytes, write, to error
	made                *[]*faultyBytes
}

type faultyBytes struct {
	medium.Bytes
	m         faultyMedium
	faulty    bool // made once armed
	discarded bool
}

func (m faultyMedium) NewBytes() (medium.Bytes, error) {
	if m.armed.Load() && m.newBytes != nil {
		return nil, m.newBytes
	}
	b, err := m.Medium.NewBytes()
	if err != nil {
		return nil, err
	}
	fb := &faultyBytes{Bytes: b, m: m, faulty: m.armed.Load()}
	*m.made = append(*m.made, fb)
	return fb, nil
}

func (m faultyMedium) NewChild() (medium.Medium, error) {
	c, err := m.Medium.NewChild()
	if err != nil {
		return nil, err
	}
	m.Medium = c
	return m, nil
}

func (b *faultyBytes) Write(p []byte) (int, error) {
	if b.faulty && b.m.write != nil {
		return 0, b.m.write
	}
	return b.Bytes.Write(p)
}

func (b *faultyBytes) WriteTo(w io.Writer) (int64, error) {
	if b.faulty && b.m.to != nil {
		return 0, b.m.to
	}
	return b.Bytes.WriteTo(w)
}

func (b *faultyBytes) Discard() error { b.discarded = true; return nil }

// TestChunkIndexSpillErrors: a failure of the index's Bytes (made, written or copied) fails the
// part's stage, sticky, and the segment's Finish.
func TestChunkIndexSpillErrors(t *testing.T) {
	setChunkIndexBuf(t, 32)
	injected := errors.New("injected")
	s := Schema{Metrics: []Metric{{Name: "n", Aggregator: "longSum", Field: "n"}}}
	f := func(what string, m faultyMedium) {
		t.Helper()
		m.Medium, m.armed, m.made = medium.NewHeap(), new(atomic.Bool), new([]*faultyBytes)
		defer func() { require.NoError(t, m.Close()) }()
		w, err := newWriter(s, writerOptions{Medium: m, ChunkRows: 1})
		require.NoError(t, err)
		stages := len(*m.made)
		m.armed.Store(true) // the stages are made: what fails now is the index's
		tw, err := w.Time()
		require.NoError(t, err)
		lw, err := w.Long("n")
		require.NoError(t, err)
		var appendErr error
		for i := 0; i < 10 && appendErr == nil; i++ {
			if appendErr = tw.Append(int64(i)); appendErr == nil {
				appendErr = lw.Append(int64(i))
			}
		}
		if m.to == nil {
			require.ErrorIs(t, appendErr, injected, what)
			require.ErrorContains(t, appendErr, `part values: stage: chunk index: injected`, what)
		} else {
			require.NoError(t, appendErr, what)
		}
		_, err = w.FinishTo(io.Discard)
		require.ErrorIs(t, err, injected, what)
		if m.to != nil {
			require.Len(t, *m.made, stages+2, "an index Bytes a column")
			for _, b := range (*m.made)[stages:] {
				assert.True(t, b.discarded, "%s: discarded after a failed copy", what)
			}
		}
	}
	f("NewBytes", faultyMedium{newBytes: injected})
	f("Write", faultyMedium{write: injected})
	f("WriteTo", faultyMedium{to: injected})
}
