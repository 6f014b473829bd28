package columns

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/segfmt"
)

// genRows returns n rows of s from newRowGen(seed, s).
func genRows(s Schema, n int, seed uint64) []Row {
	g := newRowGen(seed, s)
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = g.next()
	}
	return rows
}

// manyChunkSegment writes rows of allSchema in chunks of 3 rows to a file and returns its path,
// bytes and rows.
func manyChunkSegment(t *testing.T, n int) (string, []byte, []Row) {
	t.Helper()
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
		{"mapped", func() (*Segment, error) { return Open(path) }, uint64(chunks) / 8},
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
