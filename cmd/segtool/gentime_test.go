package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
)

const (
	hourMs = int64(time.Hour / time.Millisecond)
	dayMs  = gen.DayMillis
)

// jan2024 is 2024-01-01T00:00:00Z in milliseconds.
var jan2024 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// Segment k of gen --start S --span L --step P holds its rows in [S+k*P, S+k*P+L), spread over
// all of it; with --granularity day and whole days its interval is exactly that.
func TestGenTimeFlags(t *testing.T) {
	f := func(rows, segments int, start, span, step int64, exact bool, flags ...string) {
		t.Helper()
		dir := t.TempDir()
		args := append([]string{"gen", "--durability", "none", "--rows", strconv.Itoa(rows),
			"--segments", strconv.Itoa(segments), "--out", dir}, flags...)
		out := mustSegtool(t, args...)
		for k := range segments {
			name := filepath.Join(dir, fmt.Sprintf("basic-%04d.seg", k))
			seg, err := columns.Open(name)
			require.NoError(t, err)
			iv := seg.Interval()
			require.Equal(t, rows, seg.Rows(), name)
			require.NoError(t, seg.Close())
			lo := start + int64(k)*step
			want := columns.Interval{Start: lo, End: lo + span}
			require.Contains(t, out, fmt.Sprintf("wrote %s: %d rows, ", name, rows))
			if exact {
				require.Equal(t, want, iv, "%s: %s", name, iv)
				continue
			}
			// Interval is [first, last+1): inside the segment's, and near both its ends.
			require.GreaterOrEqual(t, iv.Start, want.Start, "%s: %s", name, iv)
			require.LessOrEqual(t, iv.End, want.End, "%s: %s", name, iv)
			require.Less(t, iv.Start-want.Start, span/int64(rows)+1, "%s: %s", name, iv)
			require.Less(t, want.End-iv.End, span/int64(rows)+1, "%s: %s", name, iv)
		}
	}
	f(3000, 4, jan2024, 3*dayMs, 3*dayMs, false, "--start", "2024-01-01", "--span", "3d", "--step", "3d")
	f(3000, 4, jan2024, 3*dayMs, 3*dayMs, true, "--start", "2024-01-01", "--span", "3d", "--step", "3d", "--granularity", "day")
	// Overlapping intervals, a time with a zone, hours.
	f(2000, 3, jan2024+4*hourMs, 36*hourMs, dayMs, false,
		"--start", "2024-01-01T06:00:00+02:00", "--span", "1d12h", "--step", "24h")
	// No --step: every segment covers the same interval.
	f(1000, 3, jan2024, 90*dayMs, 0, false, "--start", "2024-01-01", "--span", "90d")
	f(1000, 2, jan2024, 90*dayMs, 0, true, "--start", "2024-01-01", "--span", "2160h", "--granularity", "day")
	// No --span: a day.
	f(1000, 2, -dayMs, dayMs, 7*dayMs, false, "--start", "1969-12-31", "--step", "168h")
	// The wide schema.
	dir := t.TempDir()
	mustSegtool(t, "gen", "--schema", "wide", "--durability", "none", "--rows", "500", "--segments", "2",
		"--start", "2024-03-01", "--span", "2d", "--step", "30d", "--granularity", "day", "--out", dir)
	for k := range 2 {
		seg, err := columns.Open(filepath.Join(dir, fmt.Sprintf("wide-%04d.seg", k)))
		require.NoError(t, err)
		lo := time.Date(2024, 3, 1+30*k, 0, 0, 0, 0, time.UTC).UnixMilli()
		require.Equal(t, columns.Interval{Start: lo, End: lo + 2*dayMs}, seg.Interval())
		require.NoError(t, seg.Close())
	}
}

// --format csv and ndjson write the same times: every row of file k inside its interval, in order.
func TestGenTimeFlagsText(t *testing.T) {
	const rows, segments = 700, 3
	for _, format := range []string{"csv", "ndjson"} {
		dir := t.TempDir()
		mustSegtool(t, "gen", "--format", format, "--rows", strconv.Itoa(rows), "--segments", strconv.Itoa(segments),
			"--start", "2024-01-01", "--span", "10d", "--step", "30d", "--out", dir)
		for k := range segments {
			name := filepath.Join(dir, fmt.Sprintf("basic-%04d.%s", k, format))
			times := readTimes(t, name, format)
			require.Len(t, times, rows, name)
			lo := jan2024 + int64(k)*30*dayMs
			prev := lo
			for i, ts := range times {
				require.GreaterOrEqual(t, ts, prev, "%s: row %d", name, i)
				require.Less(t, ts, lo+10*dayMs, "%s: row %d", name, i)
				prev = ts
			}
		}
	}
}

// readTimes returns the __time of every row of a CSV or NDJSON file gen wrote.
func readTimes(t *testing.T, path, format string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var times []int64
	if format == "csv" {
		r := csv.NewReader(bufio.NewReader(f))
		r.FieldsPerRecord = -1
		head, err := r.Read()
		require.NoError(t, err)
		require.Equal(t, "__time", head[0])
		for {
			rec, err := r.Read()
			if errors.Is(err, io.EOF) {
				return times
			}
			require.NoError(t, err)
			ts, err := strconv.ParseInt(rec[0], 10, 64)
			require.NoError(t, err)
			times = append(times, ts)
		}
	}
	dec := json.NewDecoder(f)
	for {
		var row struct {
			Time *int64 `json:"__time"`
		}
		if err := dec.Decode(&row); errors.Is(err, io.EOF) {
			return times
		} else {
			require.NoError(t, err)
		}
		require.NotNil(t, row.Time)
		times = append(times, *row.Time)
	}
}

// A bad --start, --span or --step is a usage error naming the flag, before anything is written.
func TestGenTimeFlagsBad(t *testing.T) {
	f := func(want string, flags ...string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out")
		code, _, stderr := runSegtool(t, append([]string{"gen", "--rows", "10", "--out", out}, flags...)...)
		require.Equal(t, exitUsage, code, "%v: %s", flags, stderr)
		require.Contains(t, stderr, want, "%v", flags)
		require.NoDirExists(t, out, "%v", flags)
	}
	f(`--start "2024-13-01": month out of range; want a date (2024-01-01) or an RFC 3339 time`, "--start", "2024-13-01")
	f(`--start "yesterday": want a date`, "--start", "yesterday")
	f(`--start "2024-01-01 06:00": want a date`, "--start", "2024-01-01 06:00")
	f(`--start "2024-01-01T00:00:00.0005Z": not a whole number of milliseconds`, "--start", "2024-01-01T00:00:00.0005Z")
	f(`--span "3x": want a Go duration (90m, 36h) or days`, "--span", "3x")
	f(`--span "1.5d": want a Go duration`, "--span", "1.5d")
	f(`--span "0": want more than 0`, "--span", "0")
	f(`--span "-1h": want more than 0`, "--span", "-1h")
	f(`--span "1500us": not a whole number of milliseconds`, "--span", "1500us")
	f(`--span "99999999999999d": too long`, "--span", "99999999999999d")
	f(`--step "-3d": want 0 or more`, "--step", "-3d")
	f(`--step "d": want a Go duration`, "--step", "d")
	f(`--start 2024-01-01, --span 1d, --step 100000000000d: segment 2 would end after the last time a segment can hold`,
		"--segments", "3", "--start", "2024-01-01", "--span", "1d", "--step", "100000000000d")
	f(`--start 2024-01-01, --span 106751991167d, --step 0: segment 0 would end after`,
		"--start", "2024-01-01", "--span", "106751991167d")
	// Up to the last time a segment can hold, and not a millisecond more.
	room := gen.MaxTime - jan2024
	days := func(ms int64) string { return fmt.Sprintf("%dd%dms", ms/dayMs, ms%dayMs) }
	_, err := parseGenTimes("2024-01-01", days(room), "0", 5)
	require.NoError(t, err)
	_, err = parseGenTimes("2024-01-01", days(room+1), "0", 5)
	require.ErrorContains(t, err, "segment 4 would end after")
	step := room / 4 / dayMs * dayMs // segment 4 starts 4*step after --start
	_, err = parseGenTimes("2024-01-01", days(room-4*step), days(step), 5)
	require.NoError(t, err)
	_, err = parseGenTimes("2024-01-01", days(room-4*step+1), days(step), 5)
	require.ErrorContains(t, err, "segment 4 would end after")
	_, err = parseGenTimes("2024-01-01", days(room-4*step+1), days(step), 4)
	require.NoError(t, err, "segment 3 ends a step earlier")
}

func TestParseDurationFlag(t *testing.T) {
	f := func(s string, want int64) {
		t.Helper()
		got, err := parseDurationFlag("span", s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	f("0", 0)
	f("24h", dayMs)
	f("3d", 3*dayMs)
	f("1d12h", 36*hourMs)
	f("0d90m", 90*60_000)
	f("90m", 90*60_000)
	f("1.5s", 1500)
	f("1ms", 1)
	f("+2h", 2*hourMs)
	f("-1d", -dayMs)
	f("-1d1h", -25*hourMs)
	f("106751991167d", 106751991167*dayMs)
	bad := func(s, want string) {
		t.Helper()
		_, err := parseDurationFlag("step", s)
		require.ErrorContains(t, err, `--step "`+s+`": `+want, s)
		var u usageError
		require.ErrorAs(t, err, &u)
	}
	for _, s := range []string{"", "d", "3", "1.5d", "3x", "1d-1h", "1d+1h", "--1d", "-+1d", "+-1d", "d1h", "1dd", "1 d", "1_000d", "99999999999h"} {
		bad(s, "want a Go duration")
	}
	bad("1us", "not a whole number of milliseconds")
	bad("106751991168d", "too long")
	bad("106751991167d24h", "too long")
}

func TestParseTimeFlag(t *testing.T) {
	f := func(s string, want int64) {
		t.Helper()
		got, err := parseTimeFlag("start", s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	f("2000-01-01", gen.Start2000)
	f("2024-01-01", jan2024)
	f("2024-01-01T00:00:00Z", jan2024)
	f("2024-01-01T06:30:00Z", jan2024+6*hourMs+30*60_000)
	f("2024-01-01T02:00:00+02:00", jan2024)
	f("2024-01-01T00:00:00.123Z", jan2024+123)
	f("1969-12-31", -dayMs)
	for _, s := range []string{"", "2024", "2024-1-1", "01/02/2024", "2024-01-01T00:00:00", "2024-01-01 00:00:00Z", "1704067200000"} {
		_, err := parseTimeFlag("start", s)
		require.ErrorContains(t, err, `--start "`+s+`": `, s)
		require.True(t, strings.Contains(err.Error(), "want a date"), err.Error())
	}
}
