package columns

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/segfmt"
)

// TestTruncateEveryGranularityAtTheEnds: within [MinTime, MaxTime] truncation rounds down to
// a bucket start and the bucket's end fits; below MinTime it saturates instead of wrapping to
// the far future (a year -292,275,055 row once landed in year 292,278,994).
func TestTruncateEveryGranularityAtTheEnds(t *testing.T) {
	for g := GranularityNone; g <= GranularityDay; g++ {
		w := g.Millis()
		for _, ms := range []int64{MinTime, MinTime + 1, MinTime + w, -1, 0, 1, MaxTime - w, MaxTime - 1, MaxTime} {
			tr := g.Truncate(ms)
			require.LessOrEqual(t, tr, ms, "%s %d", g, ms)
			require.Greater(t, tr+w, ms, "%s %d: bucket [%d, +%d) misses it", g, ms, tr, w)
			require.Zero(t, ((tr%w)+w)%w, "%s %d: %d is no bucket start", g, ms, tr)
			iv, ok := g.Interval(ms, ms)
			require.True(t, ok, "%s %d", g, ms)
			require.True(t, iv.Contains(ms), "%s %d: %v", g, ms, iv)
			require.Equal(t, tr+w, iv.End)
		}
		for _, ms := range []int64{math.MinInt64, math.MinInt64 + 1, g.Truncate(MinTime) - 1} {
			require.LessOrEqual(t, g.Truncate(ms), ms, "%s %d: truncation wrapped", g, ms)
			_, ok := g.Interval(ms, 0)
			require.False(t, ok, "%s %d", g, ms)
		}
		for _, ms := range []int64{math.MaxInt64, MaxTime + 1} {
			require.LessOrEqual(t, g.Truncate(ms), ms, "%s %d", g, ms)
			_, ok := g.Interval(0, ms)
			require.False(t, ok, "%s %d", g, ms)
		}
	}
	require.Equal(t, int64(math.MinInt64), GranularityDay.Truncate(math.MinInt64))
}

// TestWriterRejectsTimesOutOfRange: the writer takes MinTime and MaxTime and rejects a time
// outside them, naming it, with ErrInvalid.
func TestWriterRejectsTimesOutOfRange(t *testing.T) {
	s := Schema{Metrics: []Metric{{Name: "n", Aggregator: agg.Count}}}
	for _, g := range []Granularity{GranularityNone, GranularityDay} {
		s.Granularity = g
		lo, hi := g.Truncate(MinTime), g.Truncate(MaxTime)
		require.True(t, g.validTime(lo))
		require.False(t, g.validTime(lo-1))
		b := writeRows(t, s, []Row{{Time: lo, Metrics: []Value{{Long: 1}}}, {Time: hi, Metrics: []Value{{Long: 1}}}}, writerOptions{})
		seg, err := newSegmentBytes(b)
		require.NoError(t, err)
		require.NoError(t, seg.Verify())
		require.Equal(t, Interval{Start: lo, End: hi + g.Millis()}, seg.Interval())
	}
	s.Granularity = GranularityNone
	for _, bad := range []int64{math.MinInt64, MinTime - 1, MaxTime + 1, math.MaxInt64} {
		w, err := newRowsWriter(s, writerOptions{})
		require.NoError(t, err)
		err = w.AddRow(Row{Time: bad, Metrics: []Value{{Long: 1}}})
		require.ErrorIs(t, err, ErrInvalid, "time %d", bad)
		require.ErrorContains(t, err, "time "+itoa64(bad)+" outside the times a segment can hold")
		_ = w.Abort()
	}
}

func itoa64(v int64) string { return strconv.FormatInt(v, 10) }

// TestVerifyRejectsTimeOutOfRange rewrites a segment's only time, MinTime, to math.MinInt64
// (fixing up the CRC and the footer's interval): Verify reports it.
func TestVerifyRejectsTimeOutOfRange(t *testing.T) {
	s := Schema{Metrics: []Metric{{Name: "n", Aggregator: agg.Count}}}
	const orig = MinTime // one value: a constant chunk, a 10-byte varint like math.MinInt64's
	good := writeRows(t, s, []Row{{Time: orig, Metrics: []Value{{Long: 1}}}}, writerOptions{Compression: CompressionNone})
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	p := seg.part(0, segfmt.PartValues)
	b := append([]byte(nil), good...)
	part := b[p.Offset : p.Offset+p.Length]
	i := bytes.Index(part, binary.AppendVarint(nil, orig))
	require.GreaterOrEqual(t, i, 0, "the time's bytes in the values part")
	copy(part[i:], binary.AppendVarint(nil, math.MinInt64))
	f := *seg.f
	f.parts = append([]segfmt.PartInfo(nil), seg.f.parts...)
	for k := range f.parts {
		if f.parts[k].Index == 0 && f.parts[k].Kind == segfmt.PartValues {
			f.parts[k].CRC = crc(part)
		}
	}
	f.interval = Interval{Start: math.MinInt64, End: math.MinInt64 + 1}
	seg, err = newSegmentBytes(rebuildFooter(t, b, &f))
	require.NoError(t, err)
	err = seg.Verify()
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "row 0: time -9223372036854775808 outside the times a segment can hold")
}
