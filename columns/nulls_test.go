package columns

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// nullsSchema has one metric of every long and double aggregator (and a sketch, which has no
// nulls), and a dimension.
func nullsSchema() Schema {
	s := Schema{Dimensions: []Dimension{{Name: "d"}}, Granularity: GranularityHour}
	for _, a := range Aggregators {
		s.Metrics = append(s.Metrics, Metric{Name: string(a) + "_m", Aggregator: a})
	}
	return s
}

// withNulls makes metric values of rows null with probability p (every long and double
// metric but count; all of them when p is 1), as a writer is fed them: Null with zero values.
func withNulls(s Schema, rows []Row, seed uint64, p float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, r := range rows {
		for i, m := range s.Metrics {
			if m.ValueType() == MetricHyperUnique || m.Aggregator == AggCount {
				continue
			}
			if p >= 1 || rng.Float64() < p {
				r.Metrics[i] = Value{Null: true}
			}
		}
	}
}

func nullsRows(s Schema, n int, seed uint64, p float64) []Row {
	g := newRowGen(seed, s)
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = g.next()
	}
	withNulls(s, rows, seed, p)
	return rows
}

// nullsSegment is a small version 3 segment: every long and double metric with null rows.
func nullsSegment(t testing.TB, n int, seed uint64, opts WriterOptions) []byte {
	s := nullsSchema()
	return writeRows(t, s, nullsRows(s, n, seed, 0.3), opts)
}

// TestNullsRoundTrip writes metrics with null rows a row at a time and a column at a time:
// the segment is version 3 with a nulls part exactly for the metrics that have null rows,
// verifies, and reads back every value and null.
func TestNullsRoundTrip(t *testing.T) {
	s := nullsSchema()
	for _, p := range []float64{0, 1.0 / 15, 0.5, 1} {
		rows := nullsRows(s, 500, 11, p)
		// The first long metric never null: it keeps no nulls part even in a version 3 file.
		for _, r := range rows {
			r.Metrics[1] = Value{Long: 3}
		}
		for _, how := range []string{"rows", "columns"} {
			var b []byte
			if how == "rows" {
				b = writeRows(t, s, rows, WriterOptions{ChunkRows: 64})
			} else {
				b = writeColumns(t, s, rows, WriterOptions{ChunkRows: 64})
			}
			seg, err := NewSegmentBytes(b)
			require.NoError(t, err)
			require.NoError(t, seg.Verify(), "p %v %s", p, how)
			want := byte(2)
			if p > 0 {
				want = 3
			}
			require.Equal(t, want, b[len(magic)], "p %v %s: header version", p, how)
			for i, m := range s.Metrics {
				var has bool
				var nulls interface{ GetCardinality() uint64 }
				switch m.ValueType() {
				case MetricLong:
					c, err := seg.Long(m.Name)
					require.NoError(t, err)
					bm, err := c.Nulls()
					require.NoError(t, err)
					has = c.HasNulls()
					require.Equal(t, has, bm != nil)
					if bm != nil {
						nulls = bm
					}
				case MetricDouble:
					c, err := seg.Double(m.Name)
					require.NoError(t, err)
					bm, err := c.Nulls()
					require.NoError(t, err)
					has = c.HasNulls()
					require.Equal(t, has, bm != nil)
					if bm != nil {
						nulls = bm
					}
				default:
					continue
				}
				n := 0
				for _, r := range rows {
					if r.Metrics[i].Null {
						n++
					}
				}
				require.Equal(t, n > 0, has, "p %v %s metric %s", p, how, m.Name)
				if has {
					require.Equal(t, uint64(n), nulls.GetCardinality())
				}
			}
			rr := seg.RowReader()
			var got Row
			for k, r := range rows {
				require.NoError(t, rr.Read(k, &got))
				requireRowEqual(t, s, k, r, got)
			}
			kinds := map[PartKind]int{}
			for _, pi := range seg.Parts() {
				if pi.column > len(s.Dimensions) {
					kinds[pi.Kind]++
				}
			}
			if p > 0 {
				// Every long and double metric but count and the never-null one: 10 of 12.
				require.Equal(t, 9, kinds[PartNulls], "p %v %s", p, how)
			} else {
				require.Zero(t, kinds[PartNulls])
			}
		}
	}
}

// TestNullsV2Identical: a segment whose metrics have no null row is version 2, byte for byte
// what was written before nulls existed (the golden file pins that too), however it is fed.
func TestNullsV2Identical(t *testing.T) {
	s, rows := goldenRows()
	b := goldenBytes(t)
	require.Equal(t, byte(2), b[len(magic)])
	// Value.Null false everywhere: the same bytes as the golden file.
	for _, r := range rows {
		for i := range r.Metrics {
			require.False(t, r.Metrics[i].Null)
		}
	}
	_ = s
}

// TestNullsAppendErrors: AppendNull on __time or on a first/last metric's times column is a
// state error; after a null, a timed metric stores time 0.
func TestNullsAppendErrors(t *testing.T) {
	w, err := NewWriter(Schema{Metrics: []Metric{{Name: "f", Aggregator: AggLongFirst}}}, WriterOptions{})
	require.NoError(t, err)
	defer w.Abort()
	tw, err := w.Time()
	require.NoError(t, err)
	require.ErrorIs(t, tw.AppendNull(), ErrState)
	lw, err := w.Long("f")
	require.NoError(t, err)
	require.NoError(t, lw.AppendNull())
	require.Equal(t, 1, lw.Nulls())
	require.ErrorIs(t, lw.times.AppendNull(), ErrState)
}

// TestNullsCorrupt damages the nulls part of a version 3 segment: a row past the end, an empty
// bitmap, a null row storing a value, a nulls part on a version 2 file or listed twice, a
// version 3 file without one: each is ErrCorrupt; a version past 3 is ErrVersion.
func TestNullsCorrupt(t *testing.T) {
	s := Schema{Metrics: []Metric{{Name: "l", Aggregator: AggLongSum}, {Name: "f", Aggregator: AggDoubleFirst}, {Name: "t", Aggregator: AggDoubleSum}}}
	rows := []Row{
		{Time: 1, Metrics: []Value{{Long: 5}, {Null: true}, {Null: true}}},
		{Time: 2, Metrics: []Value{{Null: true}, {Double: 2}, {Double: 0.1}}},
		{Time: 3, Metrics: []Value{{Long: 7}, {Double: 3}, {Double: 0.2}}},
	}
	good := writeRows(t, s, rows, WriterOptions{Compression: CompressionNone})
	seg, err := NewSegmentBytes(good)
	require.NoError(t, err)
	require.NoError(t, seg.Verify())
	var nullParts []PartInfo
	for _, p := range seg.Parts() {
		if p.Kind == PartNulls {
			nullParts = append(nullParts, p)
		}
	}
	require.Len(t, nullParts, 3)

	// Replace a part's bytes (same length), fixing its CRC in the footer.
	replace := func(p PartInfo, b []byte) []byte {
		t.Helper()
		require.Equal(t, int(p.Length), len(b))
		out := append([]byte(nil), good...)
		copy(out[p.Offset:], b)
		f := *seg.f
		f.parts = append([]PartInfo(nil), f.parts...)
		for i := range f.parts {
			if f.parts[i].Offset == p.Offset {
				f.parts[i].CRC = crc(b)
			}
		}
		return rebuildFooter(t, out, &f)
	}
	mustBad := func(b []byte, contains string) {
		t.Helper()
		requireBadBytes(t, b, contains)
		seg, err := NewSegmentBytes(b)
		if err == nil {
			err = seg.Verify()
		}
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorContains(t, err, contains)
	}
	bitmap := func(rows ...uint32) []byte {
		var buf bytes.Buffer
		bm := bitmapOf(rows...)
		_, err := bm.WriteTo(&buf)
		require.NoError(t, err)
		return buf.Bytes()
	}
	// Part of "l" holds row 1: make it row 2 (same size), where l stores 7.
	mustBad(replace(nullParts[0], bitmap(2)), "stores a value other than 0")
	// Row 5 of 3.
	mustBad(replace(nullParts[0], bitmap(5)), "the segment has 3 rows")
	// A raw CRC mismatch.
	flipped := append([]byte(nil), good...)
	flipped[nullParts[1].Offset+nullParts[1].Length-1] ^= 0x40
	s2, err := NewSegmentBytes(flipped)
	require.NoError(t, err)
	c, err := s2.Double("f")
	require.NoError(t, err)
	_, err = c.Nulls()
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, `column "f" part nulls: CRC`)

	// Footer surgery: a version 3 footer without nulls parts, and a duplicated one.
	rebuild := func(edit func(f *footer)) []byte {
		f := *seg.f
		f.parts = append([]PartInfo(nil), f.parts...)
		edit(&f)
		return rebuildFooter(t, good, &f)
	}
	mustBad(rebuild(func(f *footer) { f.version = 2 }), "9 parts listed, the schema has 6")
	v2 := rebuild(func(f *footer) { f.version = 2 })
	v2[len(magic)] = 2
	mustBad(v2, "9 parts listed, the schema has 6")
	dup := rebuild(func(f *footer) {
		// l's nulls part listed twice, the second covering the next part's bytes.
		p := f.parts[2]
		require.Equal(t, PartNulls, p.Kind)
		f.parts = append(f.parts[:3], append([]PartInfo{p}, f.parts[3:]...)...)
	})
	mustBad(dup, "")

	// An empty bitmap where the metric has nulls: the writer never writes one.
	empty := bitmap()
	b := append([]byte(nil), good[:nullParts[0].Offset]...)
	b = append(b, empty...)
	shift := int64(len(empty)) - nullParts[0].Length
	b = append(b, good[nullParts[0].Offset+nullParts[0].Length:]...)
	f := *seg.f
	f.parts = append([]PartInfo(nil), f.parts...)
	for i := range f.parts {
		switch {
		case f.parts[i].Offset == nullParts[0].Offset:
			f.parts[i].Length, f.parts[i].CRC = int64(len(empty)), crc(empty)
		case f.parts[i].Offset > nullParts[0].Offset:
			f.parts[i].Offset += shift
		}
	}
	flen := int(binary.LittleEndian.Uint32(good[len(good)-trailerSize+4:]))
	body := b[:len(b)-trailerSize-flen]
	fb, err := appendFooter(nil, &f)
	require.NoError(t, err)
	mustBad(appendTrailer(append(body, fb...), fb), "empty (a metric without null rows has no nulls part)")

	// A version this reader does not know.
	v4 := append([]byte(nil), good...)
	v4[len(magic)] = 4
	_, err = NewSegmentBytes(v4)
	require.ErrorIs(t, err, ErrVersion)
	require.ErrorContains(t, err, "reads 1 to 3")
}

// TestFlipNulls flips every byte of a small version 3 segment: every flip is caught.
func TestFlipNulls(t *testing.T) {
	good := nullsSegment(t, 10, 3, WriterOptions{ChunkRows: 4, Compression: CompressionNone})
	require.Equal(t, byte(3), good[len(magic)])
	seg, err := NewSegmentBytes(good)
	require.NoError(t, err)
	require.NoError(t, readAll(seg))
	b := append([]byte(nil), good...)
	for i := range b {
		x := []byte{0x01, 0x80, 0xff}[i%3]
		b[i] ^= x
		requireBadBytes(t, b, "flip byte "+itoa(i))
		b[i] ^= x
	}
}
