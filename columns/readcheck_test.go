package columns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/axiomhq/hyperloglog"
	"github.com/stretchr/testify/require"
	"github.com/writeout/writeout/internal/segfmt"
)

// flipSchema has every part kind: dictionary dimensions with bitmaps (single- and multi-value,
// with nulls), one without a bitmap index, a raw one; long and double metrics with the side
// parts times (first/last) and tails (doubleSum); a hyperUnique sketch.
func flipSchema() Schema {
	return Schema{
		Dimensions: []Dimension{
			{Name: "page"},
			{Name: "tags", MultiValue: true},
			{Name: "body", Raw: true},
			{Name: "country", NoBitmapIndex: true},
		},
		Metrics: []Metric{
			{Name: "count", Aggregator: "count"},
			{Name: "added", Aggregator: "longSum", Field: "added"},
			{Name: "firstAdded", Aggregator: "longFirst", Field: "added"},
			{Name: "delta", Aggregator: "doubleSum", Field: "delta"},
			{Name: "lastDelta", Aggregator: "doubleLast", Field: "delta"},
			{Name: "users", Aggregator: "hyperUnique", Field: "user"},
		},
	}
}

// flipRows returns n rows of flipSchema, varied by seed, with null and multi-value rows.
func flipRows(n, seed int) []Row {
	pages := []string{"Paris", "Berlin", "Rome"}
	tags := [][]string{{"a", "b"}, nil, {"c"}, {"b", "c", "a"}}
	countries := []string{"de", "fr", "it"}
	rows := make([]Row, n)
	for i := range rows {
		k := i + seed
		r := Row{Time: 1_700_000_000_000 + int64(i/2)*60_000, Dims: make([][]string, 4), Metrics: make([]Value, 6)}
		if k%4 != 3 {
			r.Dims[0] = []string{pages[k%3]}
		}
		r.Dims[1] = tags[k%4]
		if k%5 != 0 {
			r.Dims[2] = []string{fmt.Sprintf("body %d", k*7)}
		}
		r.Dims[3] = []string{countries[(k/2)%3]}
		r.Metrics[0].Long = 1
		r.Metrics[1].Long = int64(k*13 - 40)
		r.Metrics[2].Long = int64(k * 3)
		r.Metrics[3].Double = float64(k)*0.1 + 1e-3
		r.Metrics[4].Double = float64(k) / 3
		sk := hyperloglog.New()
		sk.Insert(fmt.Appendf(nil, "user%d", k%6))
		r.Metrics[5].Sketch = hllOf(sk)
		rows[i] = r
	}
	return rows
}

// flipSegments are the three small segments the flip tests damage: no compression, zstd and
// s2, each with several chunks per chunked part.
func flipSegments(t testing.TB) map[string][]byte {
	s := flipSchema()
	return map[string][]byte{
		"none": writeRows(t, s, flipRows(12, 0), writerOptions{ChunkRows: 4, Compression: CompressionNone}),
		"zstd": writeRows(t, s, flipRows(16, 1), writerOptions{ChunkRows: 5, Compression: CompressionZstd}),
		"s2":   writeRows(t, s, flipRows(10, 2), writerOptions{ChunkRows: 3, Compression: CompressionS2}),
		"v4":   v4FlipSegment(t),
	}
}

// readEveryColumn reads every column of seg fully through the public API and describes what it
// read; the first error stops it.
func readEveryColumn(seg *Segment) (string, error) {
	rd := &everyColumn{seg: seg, rows: seg.Rows()}
	err := rd.read()
	return rd.b.String(), err
}

// everyColumn is readEveryColumn's reader: b describes what it read so far.
type everyColumn struct {
	seg  *Segment
	rows int
	b    strings.Builder
}

func (rd *everyColumn) p(format string, args ...any) { fmt.Fprintf(&rd.b, format, args...) }

func (rd *everyColumn) read() error {
	if err := rd.longs(rd.seg.Time()); err != nil {
		return err
	}
	sc := rd.seg.Schema()
	for _, d := range sc.Dimensions {
		rd.p("dim %s\n", d.Name)
		nulls, err := rd.seg.nulls(d.Name)
		if err != nil {
			return err
		}
		rd.p("nulls %v\n", nulls.ToArray())
		if d.Raw {
			err = rd.raw(d.Name)
		} else {
			err = rd.dim(d.Name)
		}
		if err != nil {
			return err
		}
	}
	for _, m := range sc.Metrics {
		rd.p("\nmetric %s\n", m.Name)
		var err error
		switch m.ValueType() {
		case MetricLong:
			err = rd.long(m.Name)
		case MetricDouble:
			err = rd.double(m.Name)
		case MetricHyperUnique:
			err = rd.sketch(m.Name)
		}
		if err != nil {
			return err
		}
	}
	return rd.wholeRows()
}

func (rd *everyColumn) longs(c *Column[int64]) error {
	rows, p := rd.rows, rd.p
	cur := c.Cursor()
	for r := 0; r < rows; r++ {
		v, err := cur.At(r)
		if err != nil {
			return err
		}
		p("%d ", v)
	}
	if rows > 0 {
		first, vals, err := cur.Chunk(rows - 1)
		if err != nil {
			return err
		}
		p("chunk %d %v\n", first, vals)
	}
	return nil
}

func (rd *everyColumn) raw(name string) error {
	rows, p := rd.rows, rd.p
	c, err := rd.seg.Raw(name)
	if err != nil {
		return err
	}
	n, err := c.Nulls()
	if err != nil {
		return err
	}
	p("nulls %v\n", n.ToArray())
	cur := c.Cursor()
	for r := 0; r < rows; r++ {
		v, ok, err := cur.At(r)
		if err != nil {
			return err
		}
		p("%q %v ", v, ok)
	}
	return nil
}

func (rd *everyColumn) dim(name string) error {
	rows, p := rd.rows, rd.p
	c, err := rd.seg.Dim(name)
	if err != nil {
		return err
	}
	p("card %d null %v bitmaps %v\n", c.Cardinality(), c.HasNull(), c.HasBitmaps())
	if err := rd.dictionary(c); err != nil {
		return err
	}
	if err := rd.bitmaps(name, c); err != nil {
		return err
	}
	n, err := c.Nulls()
	if err != nil {
		return err
	}
	p("\nnulls %v\n", n.ToArray())
	cur := c.Cursor()
	for r := 0; r < rows; r++ {
		ids, err := cur.IDs(r)
		if err != nil {
			return err
		}
		p("%v ", ids)
		vs, err := cur.Values(r)
		if err != nil {
			return err
		}
		p("%q ", vs)
	}
	if rows > 0 {
		first, ids, offs, err := c.Cursor().Chunk(rows - 1)
		if err != nil {
			return err
		}
		p("chunk %d %v %v\n", first, ids, offs)
	}
	return nil
}

func (rd *everyColumn) dictionary(c *DimColumn) error {
	p := rd.p
	it := c.Dictionary()
	for it.Next() {
		p("%d=%q ", it.ID(), it.Value())
		if it.IsNull() {
			continue
		}
		id, ok, err := c.Lookup(it.Value())
		if err != nil {
			return err
		}
		p("(%d %v) ", id, ok)
	}
	if err := it.Err(); err != nil {
		return err
	}
	if _, ok, err := c.Lookup("absent"); err != nil || ok {
		return fmt.Errorf("lookup of an absent value: %v %v", ok, err)
	}
	return nil
}

// bitmaps reads every value of c by id, and its bitmap three ways.
func (rd *everyColumn) bitmaps(name string, c *DimColumn) error {
	p := rd.p
	for id := uint32(0); id < uint32(c.Cardinality()); id++ {
		v, err := c.Value(id)
		if err != nil {
			return err
		}
		p("%q ", v)
		if !c.HasBitmaps() {
			continue
		}
		bm, err := c.Bitmap(id)
		if err != nil {
			return err
		}
		p("%v ", bm.ToArray())
		bm2, err := rd.seg.bitmap(name, id)
		if err != nil {
			return err
		}
		p("%v ", bm2.ToArray())
		err = c.EachBitmapRows(id, make([]uint32, 2), func(rows []uint32) error { p("%v", rows); return nil })
		if err != nil {
			return err
		}
	}
	return nil
}

func (rd *everyColumn) long(name string) error {
	c, err := rd.seg.Long(name)
	if err != nil {
		return err
	}
	if err := rd.longs(c); err != nil {
		return err
	}
	if c.Times() != nil {
		if err := rd.longs(c.Times()); err != nil {
			return err
		}
	}
	return nil
}

func (rd *everyColumn) double(name string) error {
	rows, p := rd.rows, rd.p
	c, err := rd.seg.Double(name)
	if err != nil {
		return err
	}
	cur := c.Cursor()
	for r := 0; r < rows; r++ {
		v, err := cur.At(r)
		if err != nil {
			return err
		}
		p("%v ", v)
	}
	if rows > 0 {
		first, vals, err := cur.Chunk(0)
		if err != nil {
			return err
		}
		p("chunk %d %v\n", first, vals)
	}
	if c.Times() != nil {
		if err := rd.longs(c.Times()); err != nil {
			return err
		}
	}
	if c.Tails() != nil {
		tc := c.Tails().Cursor()
		for r := 0; r < rows; r++ {
			tail, err := tc.Tail(r, nil)
			if err != nil {
				return err
			}
			p("%v ", tail)
		}
	}
	return nil
}

func (rd *everyColumn) sketch(name string) error {
	rows, p := rd.rows, rd.p
	c, err := rd.seg.Sketch(name)
	if err != nil {
		return err
	}
	cur := c.Cursor()
	for r := 0; r < rows; r++ {
		raw, err := cur.Bytes(r)
		if err != nil {
			return err
		}
		p("%x ", raw)
		sk, err := cur.sketch(r)
		if err != nil {
			return err
		}
		p("%d ", uint64(sk.Estimate()))
	}
	return nil
}

// wholeRows reads every row through a RowReader.
func (rd *everyColumn) wholeRows() error {
	rows, p := rd.rows, rd.p
	rr := rd.seg.RowReader()
	var row Row
	for r := 0; r < rows; r++ {
		if err := rr.Read(r, &row); err != nil {
			return err
		}
		p("\nrow %d %v", row.Time, row.Dims)
		for _, v := range row.Metrics {
			p(" %d %v", v.Long, v.Double)
			if v.Sketch != nil {
				p(" %d", uint64(v.Sketch.Estimate()))
			}
		}
	}
	return nil
}

// region says where byte i of a segment lies: a part (its index in parts), or -1 for the
// header, the footer or the trailer.
func region(parts []segfmt.PartInfo, i int) int {
	for k, p := range parts {
		if int64(i) >= p.Offset && int64(i) < p.Offset+p.Length {
			return k
		}
	}
	return -1
}

// TestFlipEveryByteReadPath is issue 11's bar 1 for the library: every byte of three small
// segments (every part kind, three compressions) flipped in turn, each copy opened (through a
// view and through ReadAt in turn) and read whole through the column readers. Every flip must
// fail: at Open for the header, footer and trailer; for a part, with an error wrapping
// ErrCorrupt that names the column and the part and says CRC (Open reports the mismatch when
// it cannot parse a damaged part's index). Nothing may panic, and a read that does not fail
// must give what the intact file gives (it never happens here: every part is read).
func TestFlipEveryByteReadPath(t *testing.T) {
	saved := crcViaFileMin
	t.Cleanup(func() { crcViaFileMin = saved })
	crcViaFileMin = 0
	path := filepath.Join(t.TempDir(), "flip.seg")
	for name, good := range flipSegments(t) {
		seg, err := newSegmentBytes(good)
		require.NoError(t, err)
		require.NoError(t, seg.Verify())
		want, err := readEveryColumn(seg)
		require.NoError(t, err)
		parts := seg.Info().Parts
		kinds := map[segfmt.PartKind]bool{}
		for _, p := range parts {
			kinds[p.Kind] = true
		}
		require.Len(t, kinds, 7, "%s: every part kind", name)

		var openFails, readFails, frame int
		byKind := map[segfmt.PartKind]int{}
		b := append([]byte(nil), good...)
		for i := range b {
			x := []byte{0x01, 0x80, 0xff, 0x10}[i%4]
			b[i] ^= x
			var s *Segment
			segName := "unnamed segment"
			switch {
			case i%2 == 0:
				s, err = newSegmentBytes(b)
			case i%4 == 1:
				// A mapped file whose parts all count as large: the structural checks read them
				// through the descriptor and compute their CRCs as they go (forCheck, fusedCRC).
				segName = path
				require.NoError(t, os.WriteFile(path, b, 0o644))
				s, err = Open(path)
			default:
				s, err = NewSegment(bytes.NewReader(b), int64(len(b)))
			}
			k := region(parts, i)
			what := fmt.Sprintf("%s: flip %#x at %d", name, x, i)
			if k < 0 {
				frame++
				require.Error(t, err, "%s (header, footer or trailer) must fail at Open", what)
				require.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion), "%s: %v", what, err)
				b[i] ^= x
				continue
			}
			p := parts[k]
			if err == nil {
				var got string
				got, err = readEveryColumn(s)
				if err == nil {
					require.Equal(t, want, got, "%s: a read without an error must give the intact answer", what)
					require.Fail(t, "every part is read", "%s in column %q part %s: read without an error", what, p.Column, p.Kind)
				}
				require.Contains(t, err.Error(), segName+": ", what)
				readFails++
			} else {
				openFails++
			}
			require.ErrorIs(t, err, ErrCorrupt, what)
			require.ErrorContains(t, err, fmt.Sprintf("column %q part %s: CRC ", p.Column, p.Kind), what)
			byKind[p.Kind]++
			if s != nil {
				require.NoError(t, s.Close(), what)
			}
			b[i] ^= x
		}
		t.Logf("%s: %d bytes: %d flips in the header, footer or trailer failed at Open; %d in parts failed at Open, %d at the first read; by part kind %v",
			name, len(good), frame, openFails, readFails, byKind)
	}
}

// TestReadCheckNamesTheFile: a segment from Open names its path in a read-path CRC error,
// for a flip in each part of each kind.
func TestReadCheckNamesTheFile(t *testing.T) {
	good := flipSegments(t)["zstd"]
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "a.seg")
	for _, p := range seg.Info().Parts {
		b := append([]byte(nil), good...)
		b[p.Offset] ^= 0x40 // the first byte: a chunk, a dictionary block, a bitmap, never an index
		require.NoError(t, os.WriteFile(path, b, 0o644))
		s, err := Open(path)
		require.NoError(t, err, "column %q part %s", p.Column, p.Kind)
		require.Equal(t, path, s.Name())
		_, err = readEveryColumn(s)
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorContains(t, err, fmt.Sprintf("columns: %s: column %q part %s: CRC ", path, p.Column, p.Kind))
		require.NoError(t, s.Close())
	}
}

// TestReadCheckOnce: each part's CRC is computed once per open segment, however often it is
// read; not again after VerifyChecksums; never after TrustChecksums (but VerifyChecksums still
// checks a trusted part); and a bad part fails every read with the same error, computed once.
func TestReadCheckOnce(t *testing.T) {
	good := flipSegments(t)["none"]
	open := func(b []byte) *Segment {
		s, err := newSegmentBytes(b)
		require.NoError(t, err)
		return s
	}
	s := open(good)
	nparts := int64(len(s.Info().Parts))
	require.Zero(t, s.crcPasses.Load(), "Open checks no part: a dictionary is checked when Dim hands it out")
	c0, err := s.Dim("country")
	require.NoError(t, err)
	require.Equal(t, int64(1), s.crcPasses.Load(), "Dim checks the dictionary")
	_, err = s.Dim("country")
	require.NoError(t, err)
	require.Equal(t, int64(1), s.crcPasses.Load(), "once")
	_ = c0.Cardinality()
	want, err := readEveryColumn(s)
	require.NoError(t, err)
	require.Equal(t, nparts, s.crcPasses.Load(), "every part once")
	got, err := readEveryColumn(s)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, nparts, s.crcPasses.Load(), "no part twice")

	s = open(good)
	require.NoError(t, s.verifyChecksums())
	require.Equal(t, nparts, s.crcPasses.Load())
	_, err = readEveryColumn(s)
	require.NoError(t, err)
	require.Equal(t, nparts, s.crcPasses.Load(), "VerifyChecksums checked every part for the reads")
	require.NoError(t, s.verifyChecksums())
	require.Equal(t, nparts, s.crcPasses.Load(), "and for itself")

	s = open(good)
	s.trustChecksums()
	_, err = readEveryColumn(s)
	require.NoError(t, err)
	require.Zero(t, s.crcPasses.Load(), "trusted parts are not checked")
	require.NoError(t, s.verifyChecksums())
	require.Equal(t, nparts, s.crcPasses.Load(), "VerifyChecksums checks trusted parts")

	// Trusted from Open: nothing is checked.
	s, err = NewSegmentWith(bytes.NewReader(good), int64(len(good)), OpenOptions{TrustChecksums: true})
	require.NoError(t, err)
	got, err = readEveryColumn(s)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Zero(t, s.crcPasses.Load())
	path := filepath.Join(t.TempDir(), "a.seg")
	require.NoError(t, os.WriteFile(path, good, 0o644))
	s, err = OpenWith(path, OpenOptions{TrustChecksums: true})
	require.NoError(t, err)
	_, err = readEveryColumn(s)
	require.NoError(t, err)
	require.Zero(t, s.crcPasses.Load())
	require.NoError(t, s.Close())

	// A flip in a long metric's values that still decodes: trusted, it reads as a wrong value;
	// checked, every read fails the same way, the CRC computed once.
	s = open(good)
	c, err := s.Long("added")
	require.NoError(t, err)
	p := c.ix.part
	v0, err := c.Get(0)
	require.NoError(t, err)
	var b []byte
	var bad *Segment
	var bc *Column[int64]
	for i := p.Offset; i < p.Offset+c.ix.off(1) && bad == nil; i++ { // a flip in chunk 0 that decodes
		b = append(b[:0], good...)
		b[i] ^= 0x01
		bad = open(b)
		bad.trustChecksums()
		bc, err = bad.Long("added")
		require.NoError(t, err)
		if v, err := bc.Get(0); err != nil || v == v0 {
			bad = nil
		}
	}
	require.NotNil(t, bad, "a trusted part is read as it is, wrong values included")
	require.ErrorIs(t, bad.verifyChecksums(), ErrCorrupt)
	_, err = bc.Get(0)
	require.ErrorIs(t, err, ErrCorrupt, "VerifyChecksums found the part bad: it stays bad")

	bad = open(b)
	before := bad.crcPasses.Load()
	bc, err = bad.Long("added")
	require.NoError(t, err)
	_, err1 := bc.Get(0)
	require.ErrorIs(t, err1, ErrCorrupt)
	require.ErrorContains(t, err1, `columns: unnamed segment: column "added" part values: CRC `)
	bad.trustChecksums()
	for k := 0; k < 3; k++ {
		_, err := bc.Cursor().At(k)
		require.Equal(t, err1.Error(), err.Error())
	}
	require.Equal(t, before+1, bad.crcPasses.Load(), "a bad part's CRC is computed once")
	err = bad.verifyChecksums()
	require.ErrorContains(t, err, `columns: column "added" part values: CRC `)
}

// TestReadCheckConcurrent reads one segment from many goroutines: an intact one gives the
// same answer everywhere, a damaged one fails everywhere (run with -race).
func TestReadCheckConcurrent(t *testing.T) {
	good := flipSegments(t)["zstd"]
	s, err := newSegmentBytes(good)
	require.NoError(t, err)
	want, err := readEveryColumn(s)
	require.NoError(t, err)
	tags, err := s.Dim("tags")
	require.NoError(t, err)
	for _, b := range [][]byte{good, flipped(good, *tags.ix.part), flipped(good, *tags.bms.part)} {
		seg, err := newSegmentBytes(b)
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		outs := make([]string, 8)
		for g := range errs {
			wg.Go(func() { outs[g], errs[g] = readEveryColumn(seg) })
		}
		wg.Wait()
		for g := range errs {
			if bytes.Equal(b, good) {
				require.NoError(t, errs[g])
				require.Equal(t, want, outs[g])
			} else {
				require.ErrorIs(t, errs[g], ErrCorrupt)
			}
		}
	}
}

// partOf returns seg's part kind of column col.
func partOf(t *testing.T, seg *Segment, col string, kind segfmt.PartKind) segfmt.PartInfo {
	t.Helper()
	for _, p := range seg.Info().Parts {
		if p.Column == col && p.Kind == kind {
			return p
		}
	}
	t.Fatalf("no part %s of %s", kind, col)
	return segfmt.PartInfo{}
}

func flipped(good []byte, p segfmt.PartInfo) []byte {
	b := append([]byte(nil), good...)
	b[p.Offset] ^= 0x04
	return b
}

// TestReadCheckEveryEntry: every API that reads a part's bytes checks its CRC when it is the
// first to touch the part (readEveryColumn reaches some entries only after another one).
func TestReadCheckEveryEntry(t *testing.T) {
	good := flipSegments(t)["s2"]
	intact, err := newSegmentBytes(good)
	require.NoError(t, err)
	part := func(col string, kind segfmt.PartKind) segfmt.PartInfo { return partOf(t, intact, col, kind) }
	dim := func(s *Segment, name string) *DimColumn {
		c, err := s.Dim(name)
		require.NoError(t, err)
		return c
	}
	f := func(col string, kind segfmt.PartKind, what string, read func(s *Segment) error) {
		t.Helper()
		p := part(col, kind)
		s, err := newSegmentBytes(flipped(good, p))
		require.NoError(t, err)
		err = read(s)
		require.ErrorIs(t, err, ErrCorrupt, what)
		require.ErrorContains(t, err, fmt.Sprintf("column %q part %s: CRC ", col, kind), what)
	}
	f(TimeColumn, segfmt.PartValues, "Cursor[int64].At", func(s *Segment) error { _, err := s.Time().Cursor().At(2); return err })
	f(TimeColumn, segfmt.PartValues, "Cursor[int64].Chunk", func(s *Segment) error { _, _, err := s.Time().Cursor().Chunk(9); return err })
	f(TimeColumn, segfmt.PartValues, "Column[int64].Get", func(s *Segment) error { _, err := s.Time().Get(5); return err })
	f(TimeColumn, segfmt.PartValues, "RowReader", func(s *Segment) error { _, err := s.ReadRow(4); return err })
	f("added", segfmt.PartValues, "long metric", func(s *Segment) error {
		c, err := s.Long("added")
		require.NoError(t, err)
		_, err = c.Get(7)
		return err
	})
	f("firstAdded", segfmt.PartTimes, "long metric times", func(s *Segment) error {
		c, err := s.Long("firstAdded")
		require.NoError(t, err)
		_, _, err = c.Times().Cursor().Chunk(0)
		return err
	})
	f("delta", segfmt.PartValues, "Column[float64].Get", func(s *Segment) error {
		c, err := s.Double("delta")
		require.NoError(t, err)
		_, err = c.Get(3)
		return err
	})
	f("lastDelta", segfmt.PartValues, "Cursor[float64].Chunk", func(s *Segment) error {
		c, err := s.Double("lastDelta")
		require.NoError(t, err)
		_, _, err = c.Cursor().Chunk(3)
		return err
	})
	f("lastDelta", segfmt.PartTimes, "double metric times", func(s *Segment) error {
		c, err := s.Double("lastDelta")
		require.NoError(t, err)
		_, err = c.Times().Get(1)
		return err
	})
	f("delta", segfmt.PartTails, "TailCursor.Tail", func(s *Segment) error {
		c, err := s.Double("delta")
		require.NoError(t, err)
		_, err = c.Tails().Cursor().Tail(0, nil)
		return err
	})
	f("users", segfmt.PartValues, "SketchCursor.Bytes", func(s *Segment) error {
		c, err := s.Sketch("users")
		require.NoError(t, err)
		_, err = c.Cursor().Bytes(0)
		return err
	})
	f("users", segfmt.PartValues, "SketchCursor.Sketch", func(s *Segment) error {
		c, err := s.Sketch("users")
		require.NoError(t, err)
		_, err = c.Cursor().sketch(8)
		return err
	})
	for _, kind := range []segfmt.PartKind{segfmt.PartValues, segfmt.PartNulls} {
		f("body", kind, "RawCursor.At", func(s *Segment) error {
			c, err := s.Raw("body")
			require.NoError(t, err)
			_, _, err = c.Cursor().At(6)
			return err
		})
	}
	f("body", segfmt.PartNulls, "RawColumn.Nulls", func(s *Segment) error {
		c, err := s.Raw("body")
		require.NoError(t, err)
		_, err = c.Nulls()
		return err
	})
	f("body", segfmt.PartNulls, "Segment.Nulls (raw)", func(s *Segment) error { _, err := s.nulls("body"); return err })
	f("page", segfmt.PartNulls, "Segment.Nulls", func(s *Segment) error { _, err := s.nulls("page"); return err })
	f("tags", segfmt.PartNulls, "DimColumn.Nulls", func(s *Segment) error { _, err := dim(s, "tags").Nulls(); return err })
	f("tags", segfmt.PartIDs, "DimCursor.IDs", func(s *Segment) error { _, err := dim(s, "tags").Cursor().IDs(3); return err })
	f("page", segfmt.PartIDs, "DimCursor.ID", func(s *Segment) error { _, err := dim(s, "page").Cursor().id(0); return err })
	f("country", segfmt.PartIDs, "DimCursor.Values", func(s *Segment) error { _, err := dim(s, "country").Cursor().Values(9); return err })
	f("tags", segfmt.PartIDs, "DimCursor.Chunk", func(s *Segment) error { _, _, _, err := dim(s, "tags").Cursor().Chunk(2); return err })
	f("page", segfmt.PartBitmaps, "DimColumn.Bitmap", func(s *Segment) error { _, err := dim(s, "page").Bitmap(1); return err })
	f("tags", segfmt.PartBitmaps, "Segment.Bitmap", func(s *Segment) error { _, err := s.bitmap("tags", 0); return err })
	f("tags", segfmt.PartBitmaps, "DimColumn.EachBitmapRows", func(s *Segment) error {
		return dim(s, "tags").EachBitmapRows(2, nil, func([]uint32) error { return nil })
	})
}

// TestVerifyUnreadChecksums: VerifyUnreadChecksumsContext checks the parts a reader of some
// columns does not read and nothing else: a flipped byte in page's index fails it for page
// (ErrCorrupt, naming the column and part) unless page's index is one the reader reads; a
// flipped byte in a metric's values fails it only when the metric is not one of the columns
// read; VerifyChecksumsContext fails either way.
func TestVerifyUnreadChecksums(t *testing.T) {
	good := flipSegments(t)["none"]
	intact, err := newSegmentBytes(good)
	require.NoError(t, err)
	part := func(col string, kind segfmt.PartKind) segfmt.PartInfo { return partOf(t, intact, col, kind) }
	all := []string{TimeColumn, "nope"}
	for _, d := range intact.Schema().Dimensions {
		all = append(all, d.Name)
	}
	for _, m := range intact.Schema().Metrics {
		all = append(all, m.Name)
	}
	require.Contains(t, all, "added")
	ctx := context.Background()

	seg, err := newSegmentBytes(flipped(good, part("page", segfmt.PartBitmaps)))
	require.NoError(t, err)
	require.NoError(t, seg.VerifyUnreadChecksumsContext(ctx, all, []string{"page"}))
	require.Equal(t, int64(1), seg.crcPasses.Load(), "tags' index")
	err = seg.VerifyUnreadChecksumsContext(ctx, all, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, fmt.Sprintf("column %q part %s", "page", segfmt.PartBitmaps))
	require.Equal(t, int64(2), seg.crcPasses.Load(), "page's and tags' indexes")
	err = seg.VerifyChecksumsContext(ctx)
	require.ErrorContains(t, err, fmt.Sprintf("column %q part %s", "page", segfmt.PartBitmaps))

	seg, err = newSegmentBytes(flipped(good, part("added", segfmt.PartValues)))
	require.NoError(t, err)
	require.NoError(t, seg.VerifyUnreadChecksumsContext(ctx, all, nil))
	require.Equal(t, int64(2), seg.crcPasses.Load(), "the two indexes")
	err = seg.VerifyUnreadChecksumsContext(ctx, slices.DeleteFunc(slices.Clone(all), func(c string) bool { return c == "added" }), nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, fmt.Sprintf("column %q part %s", "added", segfmt.PartValues))
	err = seg.VerifyChecksumsContext(ctx)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, fmt.Sprintf("column %q part %s", "added", segfmt.PartValues))
}
