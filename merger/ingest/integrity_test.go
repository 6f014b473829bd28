package ingest

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
)

// The regression tests of issue 11's "Input lost or damaged by ingest".

const csvHeader = "ts,page,tags,body,added,d,user\n"

// One unmatched quote costs its record's first line only: the error names the line where the
// record starts, and reading goes on at the next line, whatever ends the bad record.
func TestCSVUnmatchedQuote(t *testing.T) {
	sp := testSpec(t, nil)
	for _, c := range []struct {
		name, in string
		bad      []string
	}{{
		"open until the end",
		csvHeader + "1,A,a,b,1,1,u\n" + "2,\"Main,a,b,1,1,u\n" + "3,C,a,b,1,1,u\n" + "4,D,a,b,1,1,u\n",
		[]string{`q.csv:3: malformed CSV: a quoted field is still open at the end of the input: is a quote unmatched? (line 5)`},
	}, {
		"closed by a quote out of place",
		csvHeader + "1,A,a,b,1,1,u\n" + "2,\"Main,a,b,1,1,u\n" + "3,C,a,b,1,1,u\n" + "4,D,a,\"b\",1,1,u\n",
		[]string{`q.csv:3: malformed CSV: extraneous or missing " in quoted-field (line 5)`},
	}, {
		"closed well, with too few fields",
		csvHeader + "1,A,a,b,1,1,u\n" + "2,\"Main,a,b,1,1,u\n" + "3,C,a,b,1,1,u\n" + "4,D,a,b\",1,1,u\n",
		[]string{`q.csv:3: 5 fields, the header has 7 (a record over lines 3-5: is a quote unmatched?)`,
			`q.csv:5: malformed CSV: bare " in non-quoted-field`},
	}} {
		t.Run(c.name, func(t *testing.T) {
			rr, err := openCSV(sp, "q.csv", strings.NewReader(c.in))
			require.NoError(t, err)
			rows, bad, end := readAll(t, sp, rr)
			require.NoError(t, end)
			require.Equal(t, c.bad, bad)
			var times []string
			for _, r := range rows {
				times = append(times, strings.Fields(r)[0])
			}
			want := []string{"1", "3", "4"}
			if len(c.bad) == 2 {
				want = []string{"1", "3"}
			}
			require.Equal(t, want, times)
		})
	}

	// A quoted field over several lines is still one record; the line numbers count its lines.
	rr, err := openCSV(sp, "m.csv", strings.NewReader(csvHeader+"1,\"A\r\nB\",a,b,1,1,u\r\n\r\n2,A,a,\"x\"\"y\",lots,1,u\n3,A,a,b,1,1,u"))
	require.NoError(t, err)
	rows, bad, end := readAll(t, sp, rr)
	require.NoError(t, end)
	require.Equal(t, []string{`1 ["A\nB"] ["a"] ["b"] 1 1 1 ~1 0`, `3 ["A"] ["a"] ["b"] 1 1 1 ~1 0`}, rows)
	require.Equal(t, []string{`m.csv:5: column added: not an integer: "lots"`}, bad)
}

// The parse-error budget: MaxParseErrors rows are skipped, the next fails the run; the rows
// after a skipped unmatched quote are ingested.
func TestRunParseErrorBudget(t *testing.T) {
	sp := testSpec(t, nil)
	in := csvHeader + "1,A,a,b,1,1,u\n" + "2,\"Main,a,b,1,1,u\n" + "3,C,a,b,1,1,u\n" + "4,D,a,b,1,1,u\n"
	dir := t.TempDir()
	var skipped []string
	res, err := Run(context.Background(), sp, []Input{csvInput("q.csv", in)}, Options{
		Out: filepath.Join(dir, "a.seg"), MaxParseErrors: 1, Durability: noSync,
		OnSkip: func(e *RowError) { skipped = append(skipped, e.Error()) },
	})
	require.NoError(t, err)
	require.Equal(t, int64(3), res.InputRows)
	require.Equal(t, 1, res.Skipped)
	require.Len(t, skipped, 1)
	require.Contains(t, skipped[0], "q.csv:3: ")
	require.Len(t, segRows(t, filepath.Join(dir, "a.seg")), 3)

	in2 := in + "5,\"E,a,b,1,1,u\n6,F,a,b,1,1,u\n"
	_, err = Run(context.Background(), sp, []Input{csvInput("q.csv", in2)}, Options{
		Out: filepath.Join(dir, "b.seg"), MaxParseErrors: 1, Durability: noSync,
	})
	require.ErrorIs(t, err, ErrRow)
	require.ErrorContains(t, err, "q.csv:6: malformed CSV")
	require.NoFileExists(t, filepath.Join(dir, "b.seg"))

	// Every row skipped: no segment of no rows (it had a 1970 interval and exit 0), an error.
	allBad := csvHeader + "x,A,a,b,1,1,u\n" + "y,B,a,b,1,1,u\n"
	res, err = Run(context.Background(), sp, []Input{csvInput("q.csv", allBad)}, Options{
		Out: filepath.Join(dir, "c.seg"), MaxParseErrors: 5, Durability: noSync,
	})
	require.ErrorIs(t, err, ErrInput)
	require.EqualError(t, err, "ingest: none of the 2 rows parsed (each skipped: MaxParseErrors, --max-parse-errors, is 5); no segment written")
	require.Equal(t, 2, res.Skipped)
	require.NoFileExists(t, filepath.Join(dir, "c.seg"))

	// No row at all is not that: an empty segment, as before.
	_, err = Run(context.Background(), sp, []Input{csvInput("q.csv", csvHeader)}, Options{
		Out: filepath.Join(dir, "d.seg"), MaxParseErrors: 5, Durability: noSync,
	})
	require.NoError(t, err)
}

// endless reads c forever, counting the bytes it gives.
type endless struct {
	c byte
	n int64
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = e.c
	}
	e.n += int64(len(p))
	return len(p), nil
}

// A record has a size limit: endless input fails at once with an error naming the line,
// having read little more than the limit.
func TestMaxRecordBytes(t *testing.T) {
	for _, c := range []byte{0, 'a'} {
		sp := testSpec(t, nil)
		src := &endless{c: c}
		_, err := openCSV(sp, "zero.csv", src)
		require.ErrorIs(t, err, ErrInput)
		require.EqualError(t, err, fmt.Sprintf("zero.csv:1: line longer than %d bytes (input.maxRecordBytes, --max-record-bytes)", defaultMaxRecordBytes))
		require.Less(t, src.n, int64(defaultMaxRecordBytes+256<<10))

		sp.input.MaxRecordBytes = 1000
		src = &endless{c: c}
		rr, err := openCSV(sp, "z.csv", io.MultiReader(strings.NewReader(csvHeader+"1,A,a,b,1,1,u\n"), src))
		require.NoError(t, err)
		rows, _, end := readAll(t, sp, rr)
		require.Len(t, rows, 1)
		require.ErrorIs(t, end, ErrInput)
		require.EqualError(t, end, "z.csv:3: line longer than 1000 bytes (input.maxRecordBytes, --max-record-bytes)")
		require.Less(t, src.n, int64(256<<10))

		src = &endless{c: c}
		nr, err := openNDJSON(sp, "z.ndjson", io.MultiReader(strings.NewReader(`{"ts": 1}`+"\n"), src))
		require.NoError(t, err)
		rows, _, end = readAll(t, sp, nr)
		require.Len(t, rows, 1)
		require.ErrorIs(t, end, ErrInput)
		require.EqualError(t, end, "z.ndjson:2: line longer than 1000 bytes (input.maxRecordBytes, --max-record-bytes)")
		require.Less(t, src.n, int64(256<<10))
	}

	// A record of several lines over the limit (an unmatched quote) is a row error at its
	// first line; reading goes on at the next line.
	sp := testSpec(t, func(sp *Spec) { sp.input.MaxRecordBytes = 100 })
	long := strings.Repeat("2,A,a,b,1,1,u\n", 20)
	rr, err := openCSV(sp, "q.csv", strings.NewReader(csvHeader+"1,\"A,a,b,1,1,u\n"+long))
	require.NoError(t, err)
	rows, bad, end := readAll(t, sp, rr)
	require.NoError(t, end)
	require.Len(t, rows, 20)
	require.Equal(t, []string{`q.csv:2: malformed CSV: record longer than 100 bytes (input.maxRecordBytes, --max-record-bytes): is a quote unmatched? (line 9)`}, bad)

	// The limit holds for what is read again after a bad record too.
	sc := csvScanner{br: newInput(context.Background(), strings.NewReader("b\n")), pending: []byte(strings.Repeat("a", 150) + "\n"), file: "p.csv", comma: []byte(","), max: 100}
	_, err = sc.next()
	require.EqualError(t, err, "p.csv:1: line longer than 100 bytes (input.maxRecordBytes, --max-record-bytes)")
	sc = csvScanner{br: newInput(context.Background(), strings.NewReader(strings.Repeat("a", 150)+"\n")), pending: []byte("\"x\n"), file: "p.csv", comma: []byte(","), max: 100}
	_, err = sc.next()
	require.EqualError(t, err, "p.csv:1: malformed CSV: record longer than 100 bytes (input.maxRecordBytes, --max-record-bytes): is a quote unmatched? (line 2)")

	// Exactly at the limit is fine.
	sp = testSpec(t, func(sp *Spec) { sp.input.MaxRecordBytes = int64(len(csvHeader)) })
	rr, err = openCSV(sp, "e.csv", strings.NewReader(csvHeader+"1,A,a,b,1,1,u\n"))
	require.NoError(t, err)
	rows, _, end = readAll(t, sp, rr)
	require.NoError(t, end)
	require.Len(t, rows, 1)

	// The spec's limit is validated and round-trips.
	sp.input.MaxRecordBytes = -1
	require.ErrorIs(t, sp.Validate(), ErrSpec)
	sp2, err := ParseSpec([]byte(`{"input": {"maxRecordBytes": 5000}, "dimensions": []}`))
	require.NoError(t, err)
	require.Equal(t, int64(5000), sp2.input.MaxRecordBytes)
}

// cancelAfter reads c, cancelling its context once it has given n bytes.
type cancelAfter struct {
	endless
	limit  int64
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.n >= c.limit {
		c.cancel()
	}
	return c.endless.Read(p)
}

// A cancellation is noticed inside a long record, at the next read of the input.
func TestReaderContext(t *testing.T) {
	sp := testSpec(t, nil)
	for _, format := range []Format{CSV, NDJSON} {
		ctx, cancel := context.WithCancel(context.Background())
		src := &cancelAfter{endless: endless{c: 'a'}, limit: 1 << 20, cancel: cancel}
		head := csvHeader + "1,\""
		if format == NDJSON {
			head = `{"ts": 1, "page": "`
		}
		rr, err := openReaderOptions(sp, format, "c", io.MultiReader(strings.NewReader(head), src), readerOptions{Context: ctx})
		require.NoError(t, err)
		row := sp.newRow()
		err = rr.Read(&row)
		require.ErrorIs(t, err, context.Canceled)
		require.EqualError(t, err, "ingest: context canceled")
		require.Less(t, src.n, int64(1<<20+256<<10), format)
		cancel()
	}
}

// Values over a segment's limits are row errors at parse time, naming the line, which
// MaxParseErrors can skip.
func TestValueLimits(t *testing.T) {
	sp := testSpec(t, nil)
	many := strings.Repeat("x|", maxRowValues) + "x" // one value too many
	long := strings.Repeat("y", columns.MaxValueBytes+1)
	in := csvHeader + "1,A," + many + ",b,1,1,u\n" + "2," + long + ",a,b,1,1,u\n" + "3,A,a," + long + ",1,1,u\n" + "4,A,a,b,1,1,u\n"
	rr, err := openCSV(sp, "v.csv", strings.NewReader(in))
	require.NoError(t, err)
	rows, bad, end := readAll(t, sp, rr)
	require.NoError(t, end)
	require.Len(t, rows, 1)
	require.Equal(t, []string{
		fmt.Sprintf("v.csv:2: column tags: %d values, at most %d", maxRowValues+1, maxRowValues),
		fmt.Sprintf("v.csv:3: column page: value of %d bytes, at most %d", len(long), columns.MaxValueBytes),
		fmt.Sprintf("v.csv:4: column body: value of %d bytes, at most %d", len(long), columns.MaxValueBytes),
	}, bad)

	// Exactly maxRowValues values are fine.
	ok := strings.Repeat("x|", maxRowValues-1) + "x"
	nd := `{"ts": 1, "page": null, "body": null, "tags": ["` + strings.Repeat(`x", "`, maxRowValues) + `x"]}` + "\n" + `{"ts": 2, "tags": "` + ok + `"}` + "\n"
	nr, err := openNDJSON(sp, "v.ndjson", strings.NewReader(nd))
	require.NoError(t, err)
	rows, bad, end = readAll(t, sp, nr)
	require.NoError(t, end)
	require.Len(t, rows, 1)
	require.Equal(t, []string{fmt.Sprintf("v.ndjson:1: column tags: %d values, at most %d", maxRowValues+1, maxRowValues)}, bad)

	dir := t.TempDir()
	res, err := Run(context.Background(), sp, []Input{csvInput("v.csv", in)}, Options{
		Out: filepath.Join(dir, "v.seg"), MaxParseErrors: 3, Durability: noSync})
	require.NoError(t, err)
	require.Equal(t, 3, res.Skipped)
	require.Equal(t, int64(1), res.InputRows)
	_, err = Run(context.Background(), sp, []Input{csvInput("v.csv", in)}, Options{
		Out: filepath.Join(dir, "w.seg"), MaxParseErrors: 2, Durability: noSync})
	require.ErrorIs(t, err, ErrRow)
	require.ErrorContains(t, err, "v.csv:4: column body: value of ")
}

// Numbers are decimal: Go's literal forms are not numbers, nothing is clamped or rounded
// through float64.
func TestStrictNumbers(t *testing.T) {
	for s, want := range map[string]int64{
		"0": 0, "-0": 0, "+7": 7, "9223372036854775807": math.MaxInt64, "-9223372036854775808": math.MinInt64,
		"9007199254740993.0": 9007199254740993, "9007199254740993.000": 9007199254740993, "1e3": 1000,
		"1.5e1": 15, "100e-2": 1, "0.0e5": 0, "-92233720368547758.08e2": math.MinInt64, "007": 7, "5.": 5,
	} {
		got, err := parseLong(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for s, want := range map[string]string{
		"1_000": "not an integer", "0x10": "not an integer", "0x1p4": "not an integer", "1_0.5": "not an integer",
		"0b1": "not an integer", "0o7": "not an integer", "1.5": "not an integer", "1e-1": "not an integer",
		"-9223372036854775809": "integer out of range", "9223372036854775808": "integer out of range",
		"9223372036854775807.5": "not an integer", "1e19": "integer out of range", "1e999999999999": "integer out of range",
		"inf": "not an integer", "NaN": "not an integer", "": "not an integer", ".": "not an integer", "1e": "not an integer",
		"- 1": "not an integer", "1 ": "not an integer", "--1": "not an integer", "1e+": "not an integer",
	} {
		_, err := parseLong(s)
		require.ErrorContains(t, err, want+": "+fmt.Sprintf("%q", s), s)
	}
	for s, want := range map[string]float64{
		"1.5": 1.5, "-0.25e2": -25, ".5": 0.5, "1e-400": 0, "9007199254740993": 9007199254740992, "+3": 3,
	} {
		got, err := parseDouble(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for s, want := range map[string]string{
		"1_000": "not a finite number", "0x1p4": "not a finite number", "1_0.5": "not a finite number",
		"inf": "not a finite number", "+Inf": "not a finite number", "NaN": "not a finite number",
		"Infinity": "not a finite number", "1e400": "number out of range", "-1e400": "number out of range",
	} {
		_, err := parseDouble(s)
		require.ErrorContains(t, err, want+": "+fmt.Sprintf("%q", s), s)
	}

	// Epoch times: the same syntax; seconds may have a fraction, exactly.
	for _, c := range []struct {
		format, in string
		want       int64
	}{
		{"millis", "9007199254740993", 9007199254740993},
		{"seconds", "9007199254740.993", 9007199254740993},
		{"seconds", "9007199254740.9939", 9007199254740993},
		{"seconds", "+1", 1000},
	} {
		p, err := timeParser(c.format)
		require.NoError(t, err)
		got, err := p(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
	}
	for _, c := range []struct{ format, in, want string }{
		{"millis", "1_000", "not an integer time"}, {"millis", "0x10", "not an integer time"},
		{"millis", "9007199254740993.0", "not an integer time"},
		{"millis", "-9223372036854775809", "time -9223372036854775809 out of range"},
		{"seconds", "1_000", "not an integer time"}, {"seconds", "0x10", "not an integer time"},
		{"seconds", "1_0.5", "not an integer time"}, {"seconds", "0x1p4", "not an integer time"},
		{"seconds", "99999999999999999999999999999999999999999.5", "out of range"},
		{"micros", "0b1", "not an integer time"},
	} {
		p, err := timeParser(c.format)
		require.NoError(t, err)
		_, err = p(c.in)
		require.ErrorContains(t, err, c.want, c.in)
	}

	// Through a reader: each is a row error naming the line.
	sp := testSpec(t, nil)
	in := csvHeader + "1,A,a,b,1_000,1,u\n2,A,a,b,-9223372036854775809,1,u\n3,A,a,b,1,0x1p4,u\n" +
		"4,A,a,b,9007199254740993.0,1_0.5,u\n5,A,a,b,9007199254740993.0,1,u\n"
	rr, err := openCSV(sp, "n.csv", strings.NewReader(in))
	require.NoError(t, err)
	rows, bad, end := readAll(t, sp, rr)
	require.NoError(t, end)
	require.Equal(t, []string{`5 ["A"] ["a"] ["b"] 1 9007199254740993 1 ~1 0`}, rows)
	require.Equal(t, []string{
		`n.csv:2: column added: not an integer: "1_000"`,
		`n.csv:3: column added: integer out of range: "-9223372036854775809"`,
		`n.csv:4: column delta: not a finite number: "0x1p4"`,
		`n.csv:5: column delta: not a finite number: "1_0.5"`,
	}, bad)
}

// Times outside columns.MinTime..MaxTime are row errors; a time outside the plausible years
// gets one warning per input, naming the file, the line, the value, the unit and a hint.
func TestTimeRangeAndWarning(t *testing.T) {
	sp := testSpec(t, nil)
	in := csvHeader + "-9223372036854775808,A,a,b,1,1,u\n9223372036854775807,A,a,b,1,1,u\n" +
		fmt.Sprint(columns.MaxTime) + ",A,a,b,1,1,u\n1714564800123,A,a,b,1,1,u\n"
	var warns []Warning
	rr, err := openReaderOptions(sp, CSV, "t.csv", strings.NewReader(in), readerOptions{OnWarning: func(w Warning) { warns = append(warns, w) }})
	require.NoError(t, err)
	rows, bad, end := readAll(t, sp, rr)
	require.NoError(t, end)
	require.Len(t, rows, 2)
	require.Equal(t, []string{
		fmt.Sprintf(`t.csv:2: column ts: time "-9223372036854775808" out of range (%d..%d milliseconds since the epoch)`, columns.MinTime, columns.MaxTime),
		fmt.Sprintf(`t.csv:3: column ts: time "9223372036854775807" out of range (%d..%d milliseconds since the epoch)`, columns.MinTime, columns.MaxTime),
	}, bad)
	require.Len(t, warns, 1)
	require.Equal(t, 4, warns[0].line)

	// Seconds given on millisecond data: year 56300, once per input.
	sp = testSpec(t, func(sp *Spec) { sp.timestamp.Format = "seconds" })
	for _, format := range []Format{CSV, NDJSON} {
		warns = nil
		in := csvHeader + "1714564800,A,a,b,1,1,u\n1714564800123,A,a,b,1,1,u\n1714564800124,A,a,b,1,1,u\n"
		if format == NDJSON {
			in = `{"ts": 1714564800, "page": null, "tags": null, "body": null, "added": null, "d": null, "user": null}` + "\n" + `{"ts": 1714564800123}` + "\n" + `{"ts": 1714564800124}` + "\n"
		}
		rr, err = openReaderOptions(sp, format, "w", strings.NewReader(in), readerOptions{OnWarning: func(w Warning) { warns = append(warns, w) }})
		require.NoError(t, err)
		rows, bad, end = readAll(t, sp, rr)
		require.NoError(t, end)
		require.Empty(t, bad)
		require.Len(t, rows, 3)
		line := 3
		if format == NDJSON {
			line = 2
		}
		require.Equal(t, []Warning{{file: "w", line: line, column: "ts", message: `time "1714564800123" read as seconds is in year 56302, outside 1900..2199: are the times in millis? (set timestamp.format); this warning is given once per input`}}, warns)
	}

	// Through Run: in Result.Warnings and to OnWarning.
	var got []Warning
	dir := t.TempDir()
	res, err := Run(context.Background(), sp, []Input{csvInput("a.csv", csvHeader+"1714564800123,A,a,b,1,1,u\n"), csvInput("b.csv", csvHeader+"-2714564800,A,a,b,1,1,u\n")},
		Options{Out: filepath.Join(dir, "w.seg"), Durability: noSync, OnWarning: func(w Warning) { got = append(got, w) }})
	require.NoError(t, err)
	require.Len(t, res.warnings, 2)
	require.Equal(t, res.warnings, got)
	require.Equal(t, "b.csv:2: column ts: time \"-2714564800\" read as seconds is in year 1883, outside 1900..2199: are the times in millis? (set timestamp.format); this warning is given once per input", got[1].String())

	// A layout: no unit to suggest.
	sp = testSpec(t, func(sp *Spec) { sp.timestamp.Format = "rfc3339" })
	warns = nil
	rr, err = openReaderOptions(sp, CSV, "r.csv", strings.NewReader(csvHeader+"2024-05-01T00:00:00Z,A,a,b,1,1,u\n1800-01-01T00:00:00Z,A,a,b,1,1,u\n"),
		readerOptions{OnWarning: func(w Warning) { warns = append(warns, w) }})
	require.NoError(t, err)
	rows, _, end = readAll(t, sp, rr)
	require.NoError(t, end)
	require.Len(t, rows, 2)
	require.Len(t, warns, 1)
	require.Equal(t, "r.csv:3: column ts: time \"1800-01-01T00:00:00Z\" read as rfc3339 is in year 1800, outside 1900..2199: check the data and timestamp.format; this warning is given once per input", warns[0].String())
}

// A byte-order mark is skipped before a quoted CSV header and before NDJSON.
func TestBOM(t *testing.T) {
	sp := testSpec(t, nil)
	for _, in := range []string{
		"\ufeff\"ts\",\"page\",\"tags\",\"body\",\"added\",\"d\",\"user\"\n1,A,a,b,1,1,u\n",
		"\ufeffts,page,tags,body,added,d,user\n1,A,a,b,1,1,u\n",
	} {
		rr, err := openCSV(sp, "b.csv", strings.NewReader(in))
		require.NoError(t, err, in)
		rows, bad, end := readAll(t, sp, rr)
		require.NoError(t, end)
		require.Empty(t, bad)
		require.Equal(t, []string{`1 ["A"] ["a"] ["b"] 1 1 1 ~1 0`}, rows)
	}
	rr, err := openNDJSON(sp, "b.ndjson", strings.NewReader("\ufeff"+`{"ts": 1, "page": "A", "tags": null, "body": null}`+"\n"+"\ufeff"+`{"ts": 2}`+"\n"))
	require.NoError(t, err)
	rows, bad, end := readAll(t, sp, rr)
	require.NoError(t, end)
	require.Len(t, rows, 1)
	require.Len(t, bad, 1) // only the input's first bytes may be a mark
	require.Contains(t, bad[0], "b.ndjson:2: not a JSON object")
}

// A key twice in one object of the spec is an error naming it, at any depth.
func TestSpecDuplicateKeys(t *testing.T) {
	for in, want := range map[string]string{
		`{"granularity": "hour", "dimensions": [], "granularity": "day"}`:                     `key "granularity" appears twice`,
		`{"timestamp": {"field": "a", "format": "millis", "field": "b"}}`:                     `timestamp: key "field" appears twice`,
		`{"dimensions": [{"name": "a"}, {"name": "b", "raw": true, "name": "c"}]}`:            `dimensions[1]: key "name" appears twice`,
		`{"input": {"fields": {"page": "x", "page": "y"}}, "dimensions": [{"name": "page"}]}`: `input.fields: key "page" appears twice`,
		`{"metrics": [{"name": "n", "aggregator": "count", "aggregator": "longSum"}]}`:        `metrics[0]: key "aggregator" appears twice`,
		`{"x": [[{"a": 1}, {"a": 1, "a": 2}]]}`:                                               `x[0][1]: key "a" appears twice`,
	} {
		_, err := ParseSpec([]byte(in))
		require.ErrorIs(t, err, ErrSpec, in)
		require.EqualError(t, err, want, in)
	}
	// The same key in different objects is fine.
	_, err := ParseSpec([]byte(`{"dimensions": [{"name": "a"}, {"name": "b"}], "metrics": [{"name": "n", "aggregator": "count"}]}`))
	require.NoError(t, err)
}

// TestEpochUnitWarning: epoch seconds read as millis land in January 1970, and millis read as
// nanos in its first second: valid times, so no error, but the input's one warning says which
// unit would make them plausible, as millis read as seconds (year 56302) always did. A time in
// 1970 that no larger unit makes plausible, or text in RFC 3339, gets none.
func TestEpochUnitWarning(t *testing.T) {
	for _, c := range []struct{ format, in, want string }{
		{"", "1714564800", `time "1714564800" read as millis is 1970-01-20T20:16:04.8Z, in the first year of the epoch: are the times in seconds? (set timestamp.format); this warning is given once per input`},
		{"nanos", "1714564800123", `time "1714564800123" read as nanos is 1970-01-01T00:28:34.564Z, in the first year of the epoch: are the times in millis? (set timestamp.format); this warning is given once per input`},
		{"", "1714564800123", ""},
		{"seconds", "1714564800", ""},
		{"", "0", ""},
		{"", "86400000", ""},
		{"rfc3339", "1970-01-20T20:16:04.8Z", ""},
	} {
		sp := testSpec(t, func(sp *Spec) { sp.timestamp.Format = c.format })
		var warns []Warning
		rr, err := openReaderOptions(sp, NDJSON, "w", strings.NewReader(`{"ts": "`+c.in+`", "page": null, "tags": null, "body": null, "added": 1, "d": 1, "user": "u"}`+"\n"),
			readerOptions{OnWarning: func(w Warning) { warns = append(warns, w) }})
		require.NoError(t, err)
		rows, bad, end := readAll(t, sp, rr)
		require.NoError(t, end, c.in)
		require.Empty(t, bad, c.in)
		require.Len(t, rows, 1, c.in)
		if c.want == "" {
			require.Empty(t, warns, "%s as %q", c.in, c.format)
			continue
		}
		require.Len(t, warns, 1, c.in)
		require.Equal(t, c.want, warns[0].message, c.in)
	}
}

// An unmatched quote that RFC 4180 still reads folds the rows after it into one field: the
// input gets one warning, at its end, naming the line where the quote opened and how many
// more such fields there are. A quoted field over a few lines gets none.
func TestCSVLongQuotedFieldWarns(t *testing.T) {
	sp := testSpec(t, nil)
	row := func(i int) string { return fmt.Sprintf("17145648000%02d,A,a,b,1,1,u\n", i) }
	read := func(in string) (rows []string, warns []string) {
		t.Helper()
		rr, err := openReaderOptions(sp, CSV, "q.csv", strings.NewReader(in),
			readerOptions{OnWarning: func(w Warning) { warns = append(warns, w.String()) }})
		require.NoError(t, err)
		rows, bad, end := readAll(t, sp, rr)
		require.NoError(t, end)
		require.Empty(t, bad)
		return rows, warns
	}

	// 10 rows on lines 2-11; the quote opened on line 4 closes on line 8: 6 rows come out.
	in := csvHeader + row(1) + row(2) + "1714564800003,A,a,\"oops,1,1,u\n" + row(4) + row(5) + row(6) +
		"1714564800007,A,a,b\",1,1,u\n" + row(8) + row(9) + row(10)
	rows, warns := read(in)
	require.Len(t, rows, 6)
	require.Equal(t, []string{`q.csv:4: column body: a quoted field opened on this line spans 5 lines (108 bytes): the rows on those lines are one field of one record; is a quote unmatched?`}, warns)

	// Two of them: one warning, the first named, the other counted.
	rows, warns = read(in + "1714564800011,A,a,\"x\n\n\n\n\nend\",1,1,u\n")
	require.Len(t, rows, 7)
	require.Len(t, warns, 1)
	require.True(t, strings.HasPrefix(warns[0], "q.csv:4: column body: a quoted field opened on this line spans 5 lines"), warns[0])
	require.True(t, strings.HasSuffix(warns[0], "(and 1 more quoted fields over more than 4 lines or 64 KiB)"), warns[0])

	// Over 64 KiB on two lines: a warning; a field over 4 lines, or a long one on one line: none.
	long := strings.Repeat("z", 70_000)
	_, warns = read(csvHeader + row(1) + "1714564800002,A,a,\"" + long + "\n" + long + "\",1,1,u\n")
	require.Len(t, warns, 1)
	require.Contains(t, warns[0], "q.csv:3: column body: a quoted field opened on this line spans 2 lines (140001 bytes)")
	rows, warns = read(csvHeader + "1714564800002,A,a,\"line 1\nline 2\n\nline 4\",1,1,u\n" + "1714564800003,A,a,\"" + long + "\",1,1,u\n")
	require.Len(t, rows, 2)
	require.Empty(t, warns)
}
