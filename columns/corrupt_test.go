package columns

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/writeout/writeout/internal/segfmt"
)

// smallSegment returns a small segment with every kind of column.
func smallSegment(t testing.TB, rows int, seed uint64, opts writerOptions) []byte {
	s := allSchema()
	gen := newRowGen(seed, s)
	rs := make([]Row, rows)
	for i := range rs {
		rs[i] = gen.next()
	}
	return writeRows(t, s, rs, opts)
}

// readAll reads everything a segment offers, through every API, and returns the first error.
// It is what the corruption tests and FuzzOpen run: it must never panic.
func readAll(seg *Segment) error {
	var first error
	keep := func(err error) {
		if first == nil && err != nil {
			first = err
		}
	}
	rows := seg.Rows()
	limit := min(rows, 1<<16) // a fuzzed row count can be large; the chunks bound it anyway
	rr := seg.RowReader()
	var r Row
	for i := 0; i < limit; i++ {
		if err := rr.Read(i, &r); err != nil {
			keep(err)
			break
		}
	}
	s := seg.Schema()
	for _, d := range s.Dimensions {
		_, err := seg.nulls(d.Name)
		keep(err)
		if d.Raw {
			continue
		}
		col, err := seg.Dim(d.Name)
		keep(err)
		if col == nil {
			continue
		}
		it := col.Dictionary()
		n := 0
		for it.Next() && n < 1<<16 {
			n++
			if !it.IsNull() {
				_, _, err := col.Lookup(it.Value())
				keep(err)
			}
		}
		keep(it.Err())
		_, _, err = col.Lookup("value-1")
		keep(err)
		for id := 0; id < min(col.Cardinality(), 1<<12); id++ {
			_, err := col.Value(uint32(id))
			keep(err)
			if col.HasBitmaps() {
				_, err := col.Bitmap(uint32(id))
				keep(err)
			}
		}
		cur := col.Cursor()
		for i := 0; i < limit; i += 1 + i/3 {
			_, err := cur.IDs(i)
			keep(err)
			_, _, _, err = cur.Chunk(i)
			keep(err)
		}
	}
	for _, m := range s.Metrics {
		switch m.ValueType() {
		case MetricLong:
			c, err := seg.Long(m.Name)
			keep(err)
			_, err = c.Nulls()
			keep(err)
			cur := c.Cursor()
			for i := 0; i < limit; i += 1 + i/2 {
				_, _, err := cur.Chunk(i)
				keep(err)
			}
		case MetricDouble:
			c, err := seg.Double(m.Name)
			keep(err)
			_, err = c.Nulls()
			keep(err)
			if limit > 0 {
				_, err = c.Get(limit - 1)
				keep(err)
			}
		case MetricHyperUnique:
			c, err := seg.Sketch(m.Name)
			keep(err)
			cur := c.Cursor()
			for i := 0; i < limit; i += 1 + i/2 {
				_, err := cur.Bytes(i)
				keep(err)
			}
		}
	}
	keep(seg.Verify())
	return first
}

// requireBadBytes checks a mutated segment: opening fails with ErrCorrupt or ErrVersion, or
// Verify does; a full read never panics either way.
func requireBadBytes(t *testing.T, b []byte, what string) {
	t.Helper()
	check := func(err error) {
		t.Helper()
		require.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion), "%s: error %v wraps neither ErrCorrupt nor ErrVersion", what, err)
	}
	seg, err := newSegmentBytes(b)
	if err != nil {
		check(err)
	} else {
		verr := seg.Verify()
		require.Error(t, verr, "%s: Verify passed", what)
		check(verr)
		_ = readAll(seg)
	}
	// The ReadAt path.
	seg, err = NewSegment(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		check(err)
		return
	}
	require.Error(t, seg.Verify(), "%s: Verify passed (ReadAt)", what)
}

// TestFlipEveryByte flips every byte of three small segments (zstd, none and s2 chunks), one at
// a time, with 0x01, 0x80 or 0xff in turn: every flip is caught by Open or Verify, through a
// mapping-like view and through ReadAt, and a full read of every API never panics.
func TestFlipEveryByte(t *testing.T) {
	for _, opts := range []writerOptions{{ChunkRows: 5, Compression: CompressionZstd}, {ChunkRows: 3, Compression: CompressionNone}, {}} {
		good := smallSegment(t, 16, 5, opts)
		seg, err := newSegmentBytes(good)
		require.NoError(t, err)
		require.NoError(t, seg.Verify())
		require.NoError(t, readAll(seg))
		t.Logf("%d bytes, compression %s: flipping each byte", len(good), opts.Compression)
		b := append([]byte(nil), good...)
		for i := range b {
			x := []byte{0x01, 0x80, 0xff}[i%3]
			b[i] ^= x
			requireBadBytes(t, b, "flip byte "+itoa(i))
			b[i] ^= x
		}
		// Every truncation and a few extensions.
		for n := 0; n < len(good); n++ {
			requireBadBytes(t, good[:n], "truncated to "+itoa(n))
		}
		requireBadBytes(t, append(append([]byte(nil), good...), 0), "one byte appended")
		requireBadBytes(t, append([]byte{0}, good...), "one byte prepended")
	}
}

// TestFlipLargeSegment flips sampled bytes of a large segment.
func TestFlipLargeSegment(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedFor(t, 99), 0))
	s := millionSchema()
	gen := newMillionGen(3)
	w, err := newRowsWriter(s, writerOptions{})
	require.NoError(t, err)
	var r Row
	for i := 0; i < 100_000; i++ {
		gen.next(&r)
		require.NoError(t, w.AddRow(r))
	}
	var buf bytes.Buffer
	_, err = w.FinishTo(&buf)
	require.NoError(t, err)
	good := buf.Bytes()
	samples := 300
	if testing.Short() {
		samples = 50
	}
	t.Logf("%d bytes, %d sampled flips", len(good), samples)
	b := append([]byte(nil), good...)
	for k := 0; k < samples; k++ {
		i := rng.IntN(len(b))
		if k < 20 { // the footer end, where the structure is
			i = len(b) - 1 - rng.IntN(min(len(b), 4096))
		}
		x := byte(1 + rng.IntN(255))
		b[i] ^= x
		seg, err := newSegmentBytes(b)
		if err != nil {
			require.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion), "%v", err)
		} else {
			require.Error(t, seg.Verify(), "flip at %d", i)
		}
		b[i] ^= x
	}
}

// TestBadFiles checks the errors of specific damage: they wrap the right sentinel and say
// where.
func TestBadFiles(t *testing.T) {
	good := smallSegment(t, 10, 1, writerOptions{})
	f := func(name string, mutate func(b []byte) []byte, sentinel error, msg string) {
		t.Helper()
		b := mutate(append([]byte(nil), good...))
		seg, err := newSegmentBytes(b)
		if err == nil {
			err = seg.Verify()
		}
		require.ErrorIs(t, err, sentinel, name)
		require.ErrorContains(t, err, msg, name)
	}
	f("magic", func(b []byte) []byte { b[0] = 'X'; return b }, ErrCorrupt, "bad magic")
	f("version", func(b []byte) []byte { b[5] = 9; return b }, ErrVersion, "version 9")
	f("trailer magic", func(b []byte) []byte { b[len(b)-1] = 'X'; return b }, ErrCorrupt, "trailer: bad magic")
	f("truncated", func(b []byte) []byte { return b[:len(b)-1] }, ErrCorrupt, "trailer")
	f("empty", func(b []byte) []byte { return nil }, ErrCorrupt, "too short")
	f("footer crc", func(b []byte) []byte { b[len(b)-trailerSize-3] ^= 1; return b }, ErrCorrupt, "footer: CRC")
	f("part crc", func(b []byte) []byte { b[headerSize] ^= 1; return b }, ErrCorrupt, `column "__time" part values: CRC`)
	// A footer rebuilt with a part past the end, its CRC fixed up.
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	rebuild := func(edit func(f *footer)) func([]byte) []byte {
		return func([]byte) []byte {
			ft := *seg.f
			ft.parts = append([]segfmt.PartInfo(nil), seg.f.parts...)
			edit(&ft)
			return rebuildFooter(t, good, &ft)
		}
	}
	f("offset past end", rebuild(func(f *footer) { f.parts[len(f.parts)-1].Length += 1000 }), ErrCorrupt, "past end")
	f("overlap", rebuild(func(f *footer) { f.parts[1].Offset-- }), ErrCorrupt, "parts are contiguous")
	f("rows", rebuild(func(f *footer) { f.rows++ }), ErrCorrupt, `column "__time" part values: 10 rows, the segment has 11`)
	f("interval", rebuild(func(f *footer) { f.interval.End = f.interval.Start }), ErrCorrupt, "outside the interval")
	faithful := rebuild(func(f *footer) {})(nil)
	require.Equal(t, good, faithful, "a faithful rebuild gives the same bytes")
}

// rebuildFooter replaces the footer of a segment.
func rebuildFooter(t testing.TB, good []byte, f *footer) []byte {
	// The parts end where the footer starts (the parts of good may not match their CRCs).
	flen := int(binary.LittleEndian.Uint32(good[len(good)-trailerSize+4:]))
	last := segfmt.PartInfo{Offset: int64(len(good) - trailerSize - flen)}
	body := append([]byte(nil), good[:last.Offset+last.Length]...)
	fb, err := appendFooter(nil, f)
	require.NoError(t, err)
	return appendTrailer(append(body, fb...), fb)
}

// TestUnsortedDictionary rewrites a dictionary out of order (fixing up its CRC): Verify says so.
func TestUnsortedDictionary(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "page"}}}
	rows := []Row{{Time: 1, Dims: [][]string{{"aaa"}}}, {Time: 2, Dims: [][]string{{"bbb"}}}}
	good := writeRows(t, s, rows, writerOptions{})
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	dict := seg.part(1, segfmt.PartDictionary)
	b := append([]byte(nil), good...)
	i := bytes.Index(b[dict.Offset:dict.Offset+dict.Length], []byte("aaa"))
	require.GreaterOrEqual(t, i, 0)
	copy(b[dict.Offset+int64(i):], "ccc") // now "ccc" then "bbb" (front-coded: prefix 0)
	f := *seg.f
	f.parts = append([]segfmt.PartInfo(nil), seg.f.parts...)
	for k := range f.parts {
		if f.parts[k].Index == 1 && f.parts[k].Kind == segfmt.PartDictionary {
			f.parts[k].CRC = crc(b[dict.Offset : dict.Offset+dict.Length])
		}
	}
	bad := rebuildFooter(t, b, &f)
	seg, err = newSegmentBytes(bad)
	require.NoError(t, err)
	err = seg.Verify()
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, `column "page" part dictionary: value 1 ("bbb") does not sort after "ccc"`)
}

// TestOpenFile covers Open's paths: a mapped file, a short file, a missing one, and reading
// when mapping is unsupported.
func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	good := smallSegment(t, 30, 2, writerOptions{})
	path := filepath.Join(dir, "seg")
	require.NoError(t, os.WriteFile(path, good, 0o644))
	seg, err := Open(path)
	require.NoError(t, err)
	require.NoError(t, readAll(seg))
	require.NoError(t, seg.Close())

	calls := sysDefaultCopy()
	calls.Mmap = func(int, int64, int, int, int) ([]byte, error) { return nil, errUnsupportedForTest() }
	seg, err = openWith(path, calls, OpenOptions{})
	require.NoError(t, err)
	require.Nil(t, seg.src.data, "fell back to ReadAt")
	require.NoError(t, readAll(seg))
	require.NoError(t, seg.Close())

	calls = sysDefaultCopy()
	calls.Mmap = func(int, int64, int, int, int) ([]byte, error) { return nil, os.ErrPermission }
	_, err = openWith(path, calls, OpenOptions{})
	require.ErrorIs(t, err, os.ErrPermission)

	require.NoError(t, os.WriteFile(path, good[:3], 0o644))
	_, err = Open(path)
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = Open(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
