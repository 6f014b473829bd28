package gen

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
)

func mustBasicWith(t testing.TB, seed int64, rows int, o BasicOptions) Generator {
	t.Helper()
	g, err := BasicWith(seed, rows, o)
	require.NoError(t, err)
	return g
}

// The bounds gen copies are the ones a segment holds.
func TestTimeBoundsAreColumns(t *testing.T) {
	require.Equal(t, columns.MinTime, MinTime)
	require.Equal(t, columns.MaxTime, MaxTime)
}

// Every row's time lies in [Start, Start+Span), in non-decreasing order, and Interval says so.
func TestTimeRange(t *testing.T) {
	const month = 30 * DayMillis
	f := func(tr TimeRange, rows int) {
		t.Helper()
		for _, g := range []Generator{
			mustBasicWith(t, 3, rows, BasicOptions{Time: tr}),
			mustWide(t, 3, rows, WideOptions{PayloadLen: 1, Time: tr}),
		} {
			start, end := g.Interval()
			require.Equal(t, tr.Start, start, "%+v", tr)
			require.Equal(t, tr.Start+tr.Span, end, "%+v", tr)
			rs := collect(t, g)
			prev := tr.Start
			for i, r := range rs {
				require.GreaterOrEqual(t, r.Time, prev, "%+v: row %d", tr, i)
				require.Less(t, r.Time, end, "%+v: row %d", tr, i)
				prev = r.Time
			}
			if rows >= 1000 { // spread over the whole interval: the first and last rows near its ends
				step := tr.Span / int64(rows)
				require.LessOrEqual(t, rs[0].Time-start, step, "%+v", tr)
				require.GreaterOrEqual(t, rs[rows-1].Time, end-step-1, "%+v", tr)
			}
		}
	}
	for _, rows := range []int{0, 1, 2, 7, 1000, 5000} {
		f(TimeRange{Start: Start2000, Span: DayMillis}, rows)
		f(TimeRange{Start: 1704067200000, Span: 3 * month}, rows) // 2024-01-01, three months
		f(TimeRange{Start: 0, Span: 1}, rows)                     // one millisecond: every row at 0
		f(TimeRange{Start: -5 * DayMillis, Span: 2 * DayMillis}, rows)
		f(TimeRange{Start: MinTime, Span: DayMillis}, rows)
		f(TimeRange{Start: MaxTime - DayMillis, Span: DayMillis}, rows) // ends at MaxTime
		f(TimeRange{Start: MinTime, Span: math.MaxInt64}, rows)         // the longest span, 63 bits
		f(TimeRange{Start: 0, Span: 1 << 40}, rows)                     // where the jitter loses a bit
	}
}

// The zero options and the default interval given explicitly make the rows of Basic and Wide,
// bit for bit; another interval changes only the times (and Wide's json, which holds them).
func TestTimeRangeDefault(t *testing.T) {
	day := TimeRange{Start: Start2000, Span: DayMillis}
	want, _ := hashRows(t, mustBasic(t, BasicSeed, 2000))
	for _, o := range []BasicOptions{{}, {Time: day}} {
		got, _ := hashRows(t, mustBasicWith(t, BasicSeed, 2000, o))
		require.Equal(t, want, got, "%+v", o)
	}
	want, _ = hashRows(t, mustWide(t, 1, 300, WideOptions{}))
	got, _ := hashRows(t, mustWide(t, 1, 300, WideOptions{Time: day}))
	require.Equal(t, want, got)

	g := mustBasicWith(t, BasicSeed, 2000, BasicOptions{})
	start, end := g.Interval()
	require.Equal(t, [2]int64{Start2000, Start2000 + DayMillis}, [2]int64{start, end})

	// The same span from another start: each time moves by the difference, nothing else changes.
	const shift = 9000 * DayMillis
	base := collect(t, mustBasic(t, BasicSeed, 2000))
	moved := collect(t, mustBasicWith(t, BasicSeed, 2000, BasicOptions{Time: TimeRange{Start: Start2000 + shift, Span: DayMillis}}))
	for i := range base {
		require.Equal(t, base[i].Time+shift, moved[i].Time, "row %d", i)
		moved[i].Time = base[i].Time
	}
	require.Equal(t, base, moved)

	// A longer span: other times, the same other values.
	long := collect(t, mustBasicWith(t, BasicSeed, 2000, BasicOptions{Time: TimeRange{Start: 0, Span: 365 * DayMillis}}))
	for i := range base {
		long[i].Time = base[i].Time
	}
	require.Equal(t, base, long)
}

func TestTimeRangeInvalid(t *testing.T) {
	f := func(tr TimeRange, msg string) {
		t.Helper()
		_, err := BasicWith(1, 10, BasicOptions{Time: tr})
		require.ErrorIs(t, err, ErrInvalid, "%+v", tr)
		require.ErrorContains(t, err, msg, "%+v", tr)
		_, err = Wide(1, 10, WideOptions{Time: tr})
		require.ErrorIs(t, err, ErrInvalid, "%+v", tr)
		require.ErrorContains(t, err, msg, "%+v", tr)
	}
	f(TimeRange{Start: Start2000}, "want more than 0")
	f(TimeRange{Start: Start2000, Span: -1}, "want more than 0")
	f(TimeRange{Span: math.MinInt64}, "want more than 0")
	f(TimeRange{Start: MinTime - 1, Span: 1}, "outside")
	f(TimeRange{Start: math.MinInt64, Span: 1}, "outside")
	f(TimeRange{Start: MaxTime, Span: 1}, "outside")
	f(TimeRange{Start: MaxTime - 9, Span: 11}, "outside")
	f(TimeRange{Start: math.MaxInt64, Span: 1}, "outside")
	f(TimeRange{Start: 0, Span: math.MaxInt64}, "outside")
	f(TimeRange{Start: 1, Span: MaxTime}, "outside") // ends at MaxTime+1
}

// The clock is exact integer arithmetic for any row count up to MaxRows and any span.
func TestClockSpans(t *testing.T) {
	for _, span := range []int64{1, 2, DayMillis, 1<<40 - 1, 1 << 40, 1 << 50, math.MaxInt64} {
		for _, n := range []uint64{1, 2, 3, 86_400_001, 1 << 32, uint64(MaxRows)} {
			c := newClock(TimeRange{Start: MinTime, Span: span}, n, 7)
			idx := []uint64{0, 1, 2, n / 3, n / 2, n - 2, n - 1}
			slices.Sort(idx)
			idx = slices.Compact(idx)
			prev := int64(math.MinInt64)
			for _, i := range idx {
				if i >= n {
					continue
				}
				ts := c.at(i)
				require.GreaterOrEqual(t, ts, MinTime, "span %d n %d i %d", span, n, i)
				require.Less(t, ts-MinTime, span, "span %d n %d i %d", span, n, i)
				require.GreaterOrEqual(t, ts, prev, "span %d n %d i %d", span, n, i)
				prev = ts
			}
		}
	}
}
