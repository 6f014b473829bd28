package main

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/writeout/writeout/internal/gen"
)

// timeFlagHelp and durationFlagHelp say what parseTimeFlag and parseDurationFlag take.
const (
	timeFlagHelp     = "a date (2024-01-01) or an RFC 3339 time (2024-01-01T06:00:00Z), UTC"
	durationFlagHelp = "a Go duration (90m, 36h) or days, alone or before one (3d, 1d12h)"
)

// parseTimeFlag parses the value s of flag --name, a time: a date (2024-01-01, its midnight
// UTC) or an RFC 3339 time (2024-01-01T06:00:00Z, 2024-01-01T08:00:00+02:00), in whole
// milliseconds. It returns milliseconds since the epoch; an error is a usage error naming the
// flag.
func parseTimeFlag(name, s string) (int64, error) {
	layout := time.RFC3339
	if len(s) == len(time.DateOnly) {
		layout = time.DateOnly
	}
	t, err := time.Parse(layout, s)
	if err != nil {
		var pe *time.ParseError
		why := ""
		if errors.As(err, &pe) && pe.Message != "" {
			why = strings.TrimPrefix(pe.Message, ": ") + "; "
		}
		return 0, usagef("--%s %q: %swant %s", name, s, why, timeFlagHelp)
	}
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		return 0, usagef("--%s %q: not a whole number of milliseconds", name, s)
	}
	return t.UnixMilli(), nil
}

// parseDurationFlag parses the value s of flag --name, a duration: a Go duration (90m, 36h,
// 1.5s), or a whole number of days followed by d, alone or before a Go duration (3d, 1d12h), in
// whole milliseconds; a leading - makes it negative. It returns milliseconds; an error is a
// usage error naming the flag.
func parseDurationFlag(name, s string) (int64, error) {
	ms, err := parseMillis(s)
	if err != nil {
		return 0, usagef("--%s %q: %v", name, s, err)
	}
	return ms, nil
}

var errNotDuration = errors.New("want " + durationFlagHelp)

// parseMillis is parseDurationFlag without the flag: its errors say only what is wrong.
func parseMillis(s string) (int64, error) {
	t, neg := strings.CutPrefix(s, "-")
	if !neg {
		t = strings.TrimPrefix(t, "+")
	}
	var ms int64
	if days, rest, ok := strings.Cut(t, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64) // digits only: the sign was cut above
		if err != nil || days == "" || days[0] < '0' || days[0] > '9' {
			return 0, errNotDuration
		}
		if n > math.MaxInt64/gen.DayMillis {
			return 0, errors.New("too long")
		}
		ms, t = n*gen.DayMillis, rest
		if t == "" {
			return sign(neg, ms), nil
		}
	}
	if t == "" || t[0] == '-' || t[0] == '+' {
		return 0, errNotDuration
	}
	d, err := time.ParseDuration(t)
	if err != nil { // a malformed duration or one past 2562047h (in days, a longer one parses)
		return 0, errNotDuration
	}
	if d%time.Millisecond != 0 {
		return 0, errors.New("not a whole number of milliseconds")
	}
	if d.Milliseconds() > math.MaxInt64-ms {
		return 0, errors.New("too long")
	}
	return sign(neg, ms+d.Milliseconds()), nil
}

// sign returns -ms when neg, else ms.
func sign(neg bool, ms int64) int64 {
	if neg {
		return -ms
	}
	return ms
}

// genTimes is gen's --start, --span and --step in milliseconds: segment k covers
// [start+k*step, start+k*step+span).
type genTimes struct {
	start, span, step int64
}

// parseGenTimes parses gen's time flags and checks that every one of segments segments fits
// in the times a segment can hold.
func parseGenTimes(start, span, step string, segments int) (genTimes, error) {
	var gt genTimes
	var err error
	if gt.start, err = parseTimeFlag("start", start); err != nil {
		return gt, err
	}
	if gt.span, err = parseDurationFlag("span", span); err != nil {
		return gt, err
	}
	if gt.span <= 0 {
		return gt, usagef("--span %q: want more than 0", span)
	}
	if gt.step, err = parseDurationFlag("step", step); err != nil {
		return gt, err
	}
	if gt.step < 0 {
		return gt, usagef("--step %q: want 0 or more", step)
	}
	// A date is within years 0 to 9999, so start is well inside [MinTime, MaxTime]: room, the
	// milliseconds from start to MaxTime, is positive. The last segment starts the latest.
	room := uint64(gen.MaxTime - gt.start)
	last := uint64(max(segments-1, 0))
	if gt.step > 0 && last > room/uint64(gt.step) || uint64(gt.span) > room-last*uint64(gt.step) {
		return gt, usagef("--start %s, --span %s, --step %s: segment %d would end after the last time a segment can hold",
			start, span, step, last)
	}
	return gt, nil
}

// of returns segment k's time range.
func (gt genTimes) of(k int) gen.TimeRange {
	return gen.TimeRange{Start: gt.start + int64(k)*gt.step, Span: gt.span}
}
