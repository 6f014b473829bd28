package query

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/writeout/writeout/columns"
)

// Period is a calendar granularity of a query's time buckets, in UTC: weeks (ISO weeks, from
// Monday 00:00, as Druid's P1W), months, quarters (from January, April, July, October) and
// years. Its buckets vary in width, unlike columns.Granularity's, which segments use for
// rollup; the zero value is none (Spec.Granularity applies).
type Period uint8

// The periods.
const (
	PeriodNone Period = iota
	PeriodWeek
	PeriodMonth
	PeriodQuarter
	PeriodYear
)

var periodNames = [...]string{"none", "week", "month", "quarter", "year"}

// periodMonths is the months of a period (0: not a whole number of months).
var periodMonths = [...]int64{0, 0, 1, 3, 12}

// String returns the period's name.
func (p Period) String() string {
	if int(p) < len(periodNames) {
		return periodNames[p]
	}
	return fmt.Sprintf("Period(%d)", uint8(p))
}

const (
	dayMillis  = 24 * 3600 * 1000
	weekMillis = 7 * dayMillis
)

// Truncate returns the start of the period holding ms (milliseconds since the epoch, UTC),
// rounding down; math.MinInt64 when that start is before the earliest int64 millisecond.
func (p Period) Truncate(ms int64) int64 {
	days := floorDiv(ms, dayMillis)
	switch p {
	case PeriodNone:
		return ms
	case PeriodWeek:
		// 1970-01-01 was a Thursday: Mondays are the days d with (d - 4) mod 7 == 0.
		return daysToMillis(days - floorMod(days-4, 7))
	case PeriodMonth, PeriodQuarter, PeriodYear:
		y, m, _ := time.Unix(days*86400, 0).UTC().Date()
		m -= (m - 1) % time.Month(periodMonths[p]) // back to the period's first month
		return secondsToMillis(time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Unix())
	}
	return ms
}

// add returns the start of the k-th period after the one starting at start (k >= 1);
// math.MaxInt64 past the last int64 millisecond.
func (p Period) add(start int64, k int64) int64 {
	switch p {
	case PeriodNone:
	case PeriodWeek:
		if k > (math.MaxInt64-max(start, 0))/weekMillis {
			return math.MaxInt64
		}
		return start + k*weekMillis
	case PeriodMonth, PeriodQuarter, PeriodYear:
		months := k * periodMonths[p]
		if months > 12*400_000_000 { // past every valid time (±292 million years)
			return math.MaxInt64
		}
		t := time.Unix(floorDiv(start, 1000), 0).UTC()
		y, m, _ := t.Date()
		total := int64(y)*12 + int64(m-1) + months
		return secondsToMillis(time.Date(int(floorDiv(total, 12)), time.Month(floorMod(total, 12)+1), 1, 0, 0, 0, 0, time.UTC).Unix())
	}
	if k > math.MaxInt64-max(start, 0) {
		return math.MaxInt64
	}
	return start + k
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

func daysToMillis(days int64) int64 {
	if days < math.MinInt64/dayMillis {
		return math.MinInt64
	}
	if days > math.MaxInt64/dayMillis {
		return math.MaxInt64
	}
	return days * dayMillis
}

func secondsToMillis(s int64) int64 {
	if s < math.MinInt64/1000 {
		return math.MinInt64
	}
	if s > math.MaxInt64/1000 {
		return math.MaxInt64
	}
	return s * 1000
}

// buckets maps times to a query's time buckets: a fixed width, a calendar period, or one
// bucket (all). It remembers the last bucket found, start in [lo, hi): rows come mostly in one
// bucket after another, found again without a division or a calendar computation.
type buckets struct {
	gran   columns.Granularity
	period Period
	all    bool
	start  int64
	lo, hi int64
}

func newBuckets(spec *Spec) *buckets {
	b := &buckets{gran: spec.Granularity, period: spec.Period, all: spec.All, lo: 1, hi: 0}
	if b.all { // one bucket, 0, for every time
		b.lo, b.hi = math.MinInt64, math.MaxInt64
	}
	return b
}

// of returns the start of t's bucket (0 with all).
func (b *buckets) of(t int64) int64 {
	if t >= b.lo && t < b.hi {
		return b.start
	}
	return b.find(t)
}

// find is of for a time past the bucket remembered.
func (b *buckets) find(t int64) int64 {
	if b.all {
		return 0
	}
	lo := b.truncate(t)
	b.start, b.lo, b.hi = lo, lo, b.after(lo, 1)
	return lo
}

// truncate returns the start of t's bucket, not remembered.
func (b *buckets) truncate(t int64) int64 {
	if b.period != PeriodNone {
		return b.period.Truncate(t)
	}
	return b.gran.Truncate(t)
}

// after returns the start of the k-th bucket after the one starting at start, math.MaxInt64
// past the int64 times.
func (b *buckets) after(start, k int64) int64 {
	if b.period != PeriodNone {
		return b.period.add(start, k)
	}
	w := b.gran.Millis()
	if k > (math.MaxInt64-max(start, 0))/w {
		return math.MaxInt64
	}
	return start + k*w
}

// granularityNames lists what SetGranularity takes.
const granularityList = "none, second, minute, hour, day, week, month, quarter, year or all"

// SetGranularity sets the spec's time buckets from a name, case-insensitively: none, second,
// minute, hour or day (Granularity), week, month, quarter or year (Period, UTC calendar), or
// all (one bucket). An unknown name is an error wrapping ErrInvalid.
func (s *Spec) SetGranularity(name string) error {
	s.Granularity, s.Period, s.All = columns.GranularityNone, PeriodNone, false
	for i, n := range periodNames[1:] {
		if strings.EqualFold(name, n) {
			s.Period = Period(i + 1)
			return nil
		}
	}
	g, all, err := ParseGranularity(name)
	if err != nil {
		return fmt.Errorf("%w: unknown granularity %q (want %s)", ErrInvalid, name, granularityList)
	}
	s.Granularity, s.All = g, all
	return nil
}
