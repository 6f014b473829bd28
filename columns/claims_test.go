package columns

import (
	"bytes"
	"io"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
)

// The tests of what a segment's footer claims of its rows (the interval, the granularity,
// rollup): the writer records the one interval convention and refuses what it cannot do
// correctly, and Verify rejects a footer that lies.

// hourAt returns 2000-01-01 h:m in milliseconds.
func hourAt(h, m int64) int64 { return 946_684_800_000 + h*3_600_000 + m*60_000 }

// withFooter returns good with its footer re-encoded after edit (the footer's CRC recomputed;
// the parts are untouched, so their CRCs still hold).
func withFooter(t testing.TB, good []byte, edit func(f *footer)) []byte {
	t.Helper()
	seg, err := newSegmentBytes(good)
	require.NoError(t, err)
	f := *seg.f
	f.schema = seg.f.schema.Clone()
	f.parts = append([]segfmt.PartInfo(nil), seg.f.parts...)
	edit(&f)
	return rebuildFooter(t, good, &f)
}

// requireVerifyFails opens b (which must open) and checks that Verify fails with ErrCorrupt and
// msg, through a mapping-like view and through ReadAt.
func requireVerifyFails(t *testing.T, b []byte, msg string) {
	t.Helper()
	seg, err := newSegmentBytes(b)
	require.NoError(t, err)
	err = seg.Verify()
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, msg)
	seg, err = NewSegment(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	require.ErrorIs(t, seg.Verify(), ErrCorrupt)
}

func requireVerifies(t *testing.T, b []byte) {
	t.Helper()
	seg, err := newSegmentBytes(b)
	require.NoError(t, err)
	require.NoError(t, seg.Verify())
}

func TestGranularityInterval(t *testing.T) {
	iv, ok := GranularityHour.Interval(hourAt(10, 17), hourAt(10, 17))
	require.True(t, ok)
	require.Equal(t, Interval{hourAt(10, 0), hourAt(11, 0)}, iv)
	iv, ok = GranularityHour.Interval(hourAt(10, 0), hourAt(12, 59))
	require.True(t, ok)
	require.Equal(t, Interval{hourAt(10, 0), hourAt(13, 0)}, iv)
	iv, ok = GranularityNone.Interval(5, 9)
	require.True(t, ok)
	require.Equal(t, Interval{5, 10}, iv)
	iv, ok = GranularityDay.Interval(-1, -1)
	require.True(t, ok)
	require.Equal(t, Interval{-86_400_000, 0}, iv)
	_, ok = GranularityNone.Interval(0, math.MaxInt64)
	require.False(t, ok)
	_, ok = GranularityHour.Interval(0, math.MaxInt64)
	require.False(t, ok)
	_, ok = GranularityNone.Interval(math.MinInt64, 0)
	require.False(t, ok, "times outside [MinTime, MaxTime] have no interval")
	iv, ok = GranularityNone.Interval(MinTime, MaxTime)
	require.True(t, ok)
	require.Equal(t, Interval{MinTime, MaxTime + 1}, iv)
}

// TestWriterInterval: the writer records [truncate(first), truncate(last)+width), whichever way
// it is fed, and the zero interval without rows.
func TestWriterInterval(t *testing.T) {
	hour := Schema{Granularity: GranularityHour}
	f := func(s Schema, times []int64, want Interval) {
		t.Helper()
		rows := make([]Row, len(times))
		for i, tm := range times {
			rows[i] = Row{Time: tm}
		}
		for _, b := range [][]byte{writeRows(t, s, rows, writerOptions{}), writeColumns(t, s, rows, writerOptions{})} {
			seg, err := newSegmentBytes(b)
			require.NoError(t, err)
			require.Equal(t, want, seg.Interval())
			require.NoError(t, seg.Verify())
		}
	}
	// One row at 10:17, truncated to its hour as rows of an hour segment must be: 10:00/11:00.
	f(hour, []int64{GranularityHour.Truncate(hourAt(10, 17))}, Interval{hourAt(10, 0), hourAt(11, 0)})
	f(hour, []int64{hourAt(10, 0), hourAt(12, 0)}, Interval{hourAt(10, 0), hourAt(13, 0)})
	f(Schema{}, []int64{hourAt(10, 17)}, Interval{hourAt(10, 17), hourAt(10, 17) + 1})
	f(hour, nil, Interval{})

	var buf bytes.Buffer
	w, err := newRowsWriter(hour, writerOptions{})
	require.NoError(t, err)
	require.NoError(t, w.AddRow(Row{Time: hourAt(10, 0)}))
	info, err := w.FinishTo(&buf)
	require.NoError(t, err)
	require.Equal(t, "2000-01-01T10:00:00.000Z/2000-01-01T11:00:00.000Z", info.Interval.String())

	// No room for the end: a time past MaxTime is refused when it comes.
	for _, s := range []Schema{{}, hour} {
		w, err := newRowsWriter(s, writerOptions{})
		require.NoError(t, err)
		err = w.AddRow(Row{Time: s.Granularity.Truncate(math.MaxInt64)})
		require.ErrorIs(t, err, medium.ErrInvalid)
		require.ErrorContains(t, err, "outside the times a segment can hold")
		_, err = w.FinishTo(io.Discard)
		require.ErrorIs(t, err, medium.ErrInvalid, "the error is sticky")
	}
}

// TestWriterRefusesUntruncatedTime: under a granularity, a time not truncated to it is refused
// by the __time column writer (fed row by row or a column at a time), naming the column and
// the row.
func TestWriterRefusesUntruncatedTime(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "page"}}, Granularity: GranularityHour}
	rw, err := newRowsWriter(s, writerOptions{})
	require.NoError(t, err)
	require.NoError(t, rw.AddRow(Row{Time: hourAt(10, 0), Dims: [][]string{{"a"}}}))
	err = rw.AddRow(Row{Time: hourAt(10, 17), Dims: [][]string{{"a"}}})
	require.ErrorIs(t, err, medium.ErrInvalid)
	require.ErrorContains(t, err, `column "__time": row 1: time 946721820000 not truncated to the granularity hour`)
	_, err = rw.FinishTo(io.Discard)
	require.ErrorIs(t, err, medium.ErrInvalid, "the error is sticky")

	w, err := newWriter(s, writerOptions{})
	require.NoError(t, err)
	tw, err := w.Time()
	require.NoError(t, err)
	require.NoError(t, tw.Append(hourAt(9, 0)))
	err = tw.Append(hourAt(10, 17))
	require.ErrorIs(t, err, medium.ErrInvalid)
	require.ErrorContains(t, err, `column "__time": row 1: time 946721820000 not truncated to the granularity hour`)
	require.NoError(t, w.Abort())

	// Granularity none takes any millisecond; a long metric is not a time.
	s = Schema{Metrics: []Metric{{Name: "n", Aggregator: agg.LongSum}}, Granularity: GranularityDay}
	w, err = newWriter(s, writerOptions{})
	require.NoError(t, err)
	lw, err := w.Long("n")
	require.NoError(t, err)
	require.NoError(t, lw.Append(hourAt(10, 17)))
	require.NoError(t, w.Abort())
}

// rollupSegment writes rows without rollup, then rewrites the footer to claim rollup.
func rollupSegment(t *testing.T, s Schema, rows []Row) []byte {
	t.Helper()
	s.Rollup = false
	good := writeRows(t, s, rows, writerOptions{ChunkRows: 2})
	return withFooter(t, good, func(f *footer) { f.schema.Rollup = true })
}

// TestVerifyRollup: a segment that claims rollup must hold its rows strictly increasing by
// (time, dimensions) in the merger's order, which also means no key twice.
func TestVerifyRollup(t *testing.T) {
	s := Schema{
		Dimensions: []Dimension{{Name: "page"}, {Name: "tags", MultiValue: true}, {Name: "body", Raw: true}},
		Metrics:    []Metric{{Name: "n", Aggregator: agg.Count}},
	}
	row := func(tm int64, page, tags, body []string) Row {
		return Row{Time: tm, Dims: [][]string{page, tags, body}, Metrics: []Value{{Long: 1}}}
	}
	a, b, ab, ba := []string{"a"}, []string{"b"}, []string{"a", "b"}, []string{"b", "a"}
	empty := []string{""}

	// In order: by time, then page (null first), then tags (null first, a prefix first, then
	// element by element), then body (null first, bytewise).
	good := []Row{
		row(1, a, nil, nil),
		row(2, nil, ab, nil),
		row(2, a, nil, nil),
		row(2, a, a, nil),
		row(2, a, ab, nil),
		row(2, a, b, nil),
		row(2, a, ba, nil),
		row(2, b, b, nil),
		row(2, b, b, empty),
		row(2, b, b, a),
		row(2, b, b, []string{"a\x00"}),
		row(3, nil, nil, nil),
	}
	requireVerifies(t, rollupSegment(t, s, good))

	// (a) The same key twice.
	dup := []Row{row(1, a, ab, b), row(2, a, ab, b), row(2, a, ab, b), row(3, a, ab, b)}
	requireVerifyFails(t, rollupSegment(t, s, dup), "rollup: rows 1 and 2 have the same time 2 and dimensions")
	// Not a duplicate without rollup.
	requireVerifies(t, writeRows(t, s, dup, writerOptions{}))
	// Null twice, in a single-value, a multi-value and a raw dimension.
	requireVerifyFails(t, rollupSegment(t, s, []Row{row(5, nil, nil, nil), row(5, []string{}, []string{}, nil)}),
		"rows 0 and 1 have the same time 5")

	// Out of order, in each kind of dimension.
	for _, c := range []struct {
		rows []Row
		msg  string
	}{
		{[]Row{row(2, b, nil, nil), row(2, a, nil, nil)}, `row 1 sorts before row 0 (time 2, dimension "page" sorts before`},
		{[]Row{row(2, a, nil, nil), row(2, nil, nil, nil)}, `dimension "page"`},
		{[]Row{row(2, a, ab, nil), row(2, a, a, nil)}, `dimension "tags"`},
		{[]Row{row(2, a, b, nil), row(2, a, ab, nil)}, `dimension "tags"`},
		{[]Row{row(2, a, ba, nil), row(2, a, b, nil)}, `dimension "tags"`},
		{[]Row{row(2, a, a, nil), row(2, a, nil, nil)}, `dimension "tags"`},
		{[]Row{row(2, a, a, empty), row(2, a, a, nil)}, `dimension "body"`},
		{[]Row{row(2, a, a, b), row(2, a, a, a)}, `dimension "body"`},
	} {
		requireVerifyFails(t, rollupSegment(t, s, c.rows), c.msg)
	}
	// Rollup segments the column writers and the merger write pass: TestRoundTrip's rollup
	// schemas and the merger's tests verify them.
}

// TestVerifyGranularity: every time must be truncated to the granularity the footer claims.
func TestVerifyGranularity(t *testing.T) {
	rows := []Row{{Time: hourAt(10, 0)}, {Time: hourAt(10, 17)}, {Time: hourAt(11, 0)}}
	good := writeRows(t, Schema{}, rows, writerOptions{})
	requireVerifies(t, good)
	bad := withFooter(t, good, func(f *footer) {
		f.schema.Granularity = GranularityHour
		f.interval = Interval{hourAt(10, 0), hourAt(12, 0)} // the convention's, so only the times are wrong
	})
	requireVerifyFails(t, bad, `column "__time" part values: row 1: time 946721820000 not truncated to the granularity hour`)

	// The rows of an hour segment, claimed at day granularity.
	hourly := writeRows(t, Schema{Granularity: GranularityHour}, []Row{{Time: hourAt(10, 0)}}, writerOptions{})
	requireVerifies(t, hourly)
	requireVerifyFails(t, withFooter(t, hourly, func(f *footer) {
		f.schema.Granularity = GranularityDay
		f.interval = Interval{hourAt(0, 0), hourAt(24, 0)}
	}), "row 0: time 946720800000 not truncated to the granularity day")
	// At minute granularity the times are truncated, but the interval is the hour's.
	requireVerifyFails(t, withFooter(t, hourly, func(f *footer) { f.schema.Granularity = GranularityMinute }),
		"give [946720800000, 946720860000)")
}

// TestVerifyInterval: the interval must be the convention's, computed from the first and last
// rows: not wider, not narrower, and zero without rows.
func TestVerifyInterval(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "page"}}, Granularity: GranularityHour}
	rows := []Row{{Time: hourAt(10, 0), Dims: [][]string{{"a"}}}, {Time: hourAt(12, 0), Dims: [][]string{{"b"}}}}
	good := writeRows(t, s, rows, writerOptions{})
	requireVerifies(t, good)
	f := func(iv Interval, msg string) {
		t.Helper()
		requireVerifyFails(t, withFooter(t, good, func(f *footer) { f.interval = iv }), msg)
	}
	want := "but rows 0 and 1 (times 946720800000 and 946728000000, granularity hour) give [946720800000, 946731600000)"
	f(Interval{hourAt(10, 0), hourAt(14, 0)}, "columns: interval [946720800000, 946735200000) (2000-01-01T10:00:00.000Z/2000-01-01T14:00:00.000Z), but")
	f(Interval{hourAt(10, 0), hourAt(14, 0)}, want)
	f(Interval{hourAt(9, 0), hourAt(13, 0)}, want)
	f(Interval{hourAt(10, 0), hourAt(12, 0) + 1}, want) // the old [first, last+1)
	f(Interval{hourAt(10, 0), hourAt(12, 0)}, "row 1: time 946728000000 outside the interval")

	empty := writeRows(t, s, nil, writerOptions{})
	requireVerifies(t, empty)
	requireVerifyFails(t, withFooter(t, empty, func(f *footer) { f.interval = Interval{0, 1} }),
		"interval [0, 1) of a segment without rows, want the zero interval")
}
