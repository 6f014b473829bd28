package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
)

// testSpec: every kind of column, rollup off.
const testSpecJSON = `{"timestamp": {"field": "ts", "format": "millis"},
 "dimensions": [{"name": "page"}, {"name": "tags", "multiValue": true}, {"name": "body", "raw": true}],
 "metrics": [{"name": "rows", "aggregator": "count"}, {"name": "added", "aggregator": "longSum"},
             {"name": "delta", "aggregator": "doubleSum", "fieldName": "d"},
             {"name": "users", "aggregator": "hyperUnique", "fieldName": "user"},
             {"name": "pages", "aggregator": "hyperUnique", "fieldName": "page"}]}`

func testSpec(t testing.TB, edit func(*Spec)) *Spec {
	t.Helper()
	sp, err := ParseSpec([]byte(testSpecJSON))
	require.NoError(t, err)
	if edit != nil {
		edit(sp)
	}
	return sp
}

// rowString renders a row: time, each dimension's values as a list (null as <nil>), each
// metric (a sketch as ~estimate).
func rowString(r columns.Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", r.Time)
	for _, d := range r.Dims {
		if len(d) == 0 {
			b.WriteString(" <nil>")
			continue
		}
		fmt.Fprintf(&b, " %q", d)
	}
	for _, m := range r.Metrics {
		switch {
		case m.Null:
			b.WriteString(" null")
		case m.Sketch != nil:
			fmt.Fprintf(&b, " ~%d", uint64(m.Sketch.Estimate()))
		case m.Double != 0:
			fmt.Fprintf(&b, " %g", m.Double)
		default:
			fmt.Fprintf(&b, " %d", m.Long)
		}
	}
	return b.String()
}

// readAll reads every row of rr: the rows and the errors of rows that did not parse, in
// order, and the error that ended reading (nil at EOF).
func readAll(t testing.TB, sp *Spec, rr reader) (rows, bad []string, end error) {
	t.Helper()
	row := sp.newRow()
	for range 10000 {
		err := rr.Read(&row)
		if err == io.EOF {
			return rows, bad, nil
		}
		var re *RowError
		if errors.As(err, &re) {
			require.ErrorIs(t, err, ErrRow)
			bad = append(bad, err.Error())
			continue
		}
		if err != nil {
			return rows, bad, err
		}
		rows = append(rows, rowString(row))
	}
	t.Fatal("too many rows")
	return
}

func TestCSVReader(t *testing.T) {
	sp := testSpec(t, nil)
	in := "\ufeffts,page,tags,body,added,d,user,extra\n" +
		"5,Main,a|b|a,hello,3,1.5,u1,x\n" +
		"6,,,,,,,\n" + // nulls (metrics too)
		"7,\"Talk, page\",|c||,\"multi\nline\",-4,1e3,u2,\n" + // quoted comma and newline; empty elements
		"8,Main,solo,x,2.0,-0.25,u1,\n"
	rr, err := openCSV(sp, "in.csv", strings.NewReader(in))
	require.NoError(t, err)
	rows, bad, end := readAll(t, sp, rr)
	require.NoError(t, end)
	require.Empty(t, bad)
	require.Equal(t, []string{
		`5 ["Main"] ["a" "b" "a"] ["hello"] 1 3 1.5 ~1 0`,
		`6 <nil> <nil> <nil> 1 null null 0 0`,
		`7 ["Talk, page"] ["" "c" "" ""] ["multi\nline"] 1 -4 1000 ~1 0`,
		`8 ["Main"] ["solo"] ["x"] 1 2 -0.25 ~1 0`,
	}, rows)
}

func TestCSVReaderOptions(t *testing.T) {
	null := `\N`
	sp := testSpec(t, func(sp *Spec) {
		sp.input.Delimiter = ";"
		sp.input.MultiValueDelimiter = "::"
		sp.input.NullValue = &null
		sp.input.Fields = map[string]string{"page": "title"}
		sp.timestamp.Format = "rfc3339"
	})
	in := "ts;title;tags;body;added;d;user\n" +
		"2024-05-01T12:00:00Z;Main;a::b;;1;2;u\n" +
		`2024-05-01T12:00:00.5Z;\N;\N;\N;\N;\N;\N` + "\n"
	rr, err := openCSV(sp, "in.csv", strings.NewReader(in))
	require.NoError(t, err)
	rows, bad, end := readAll(t, sp, rr)
	require.NoError(t, end)
	require.Empty(t, bad)
	require.Equal(t, []string{
		`1714564800000 ["Main"] ["a" "b"] [""] 1 1 2 ~1 0`,
		`1714564800500 <nil> <nil> <nil> 1 null null 0 0`,
	}, rows)
}

func TestCSVReaderBadRows(t *testing.T) {
	sp := testSpec(t, nil)
	long := strings.Repeat("x", columns.MaxValueBytes+1)
	in := "ts,page,tags,body,added,d,user\n" +
		"1,Main,a,b,lots,1,u\n" + // 2
		"2,Main,a,b,1.5,1,u\n" + // 3
		"3,Main,a,b,1e19,1,u\n" + // 4
		"4,Main,a,b,1,NaN,u\n" + // 5
		"5,Main,a,b,1,x,u\n" + // 6
		",Main,a,b,1,1,u\n" + // 7
		"yesterday,Main,a,b,1,1,u\n" + // 8
		"9,Main,a\n" + // 9
		"10,Main,a,b,1,1,u,more\n" + // 10
		"11,Ma\"in,a,b,1,1,u\n" + // 11
		"12," + long + ",a,b,1,1,u\n" + // 12
		"13,Main,a|" + long + ",b,1,1,u\n" + // 13
		"14,Main,a,b,1,1,u\n" // 14: good
	rr, err := openCSV(sp, "bad.csv", strings.NewReader(in))
	require.NoError(t, err)
	rows, bad, end := readAll(t, sp, rr)
	require.NoError(t, end)
	require.Equal(t, []string{`14 ["Main"] ["a"] ["b"] 1 1 1 ~1 0`}, rows)
	require.Equal(t, []string{
		`bad.csv:2: column added: not an integer: "lots"`,
		`bad.csv:3: column added: not an integer: "1.5"`,
		`bad.csv:4: column added: integer out of range: "1e19"`,
		`bad.csv:5: column delta: not a finite number: "NaN"`,
		`bad.csv:6: column delta: not a finite number: "x"`,
		`bad.csv:7: column ts: missing time`,
		`bad.csv:8: column ts: not an integer time: "yesterday"`,
		`bad.csv:9: 3 fields, the header has 7`,
		`bad.csv:10: 8 fields, the header has 7`,
		`bad.csv:11: malformed CSV: bare " in non-quoted-field`,
		fmt.Sprintf(`bad.csv:12: column page: value of %d bytes, at most %d`, len(long), columns.MaxValueBytes),
		fmt.Sprintf(`bad.csv:13: column tags: value of %d bytes, at most %d`, len(long), columns.MaxValueBytes),
	}, bad)
}

func TestCSVReaderHeader(t *testing.T) {
	sp := testSpec(t, nil)
	bad := func(in, want string) {
		t.Helper()
		_, err := openCSV(sp, "h.csv", strings.NewReader(in))
		require.EqualError(t, err, want)
		require.ErrorIs(t, err, ErrInput)
	}
	bad("", "h.csv: empty file, want a header line of field names")
	bad("ts,page,ts\n", `h.csv:1: field "ts" appears twice in the header`)
	bad("time,page,tags,body,added,d,user\n", `h.csv:1: timestamp: field "ts" is not in the header`)
	bad("ts,tags,body,added,d,user\n", `h.csv:1: dimension page: field "page" is not in the header`)
	bad("ts,pgae,tags,body,added,d,user\n", `h.csv:1: dimension page: field "page" is not in the header; did you mean "pgae"?`)
	bad("Ts,page,tags,body,added,d,user\n", `h.csv:1: timestamp: field "ts" is not in the header; did you mean "Ts"?`)
	bad("ts,page,\"tags\n", `h.csv:1: header: malformed CSV: a quoted field is still open at the end of the input: is a quote unmatched?`)
	bad("ts,page,\"ta\"gs\"\n", `h.csv:1: header: malformed CSV: extraneous or missing " in quoted-field`)

	// A metric column the header lacks is a missing value in every row: null, with a warning.
	var warnings []string
	rr, err := openReaderOptions(sp, CSV, "h.csv", strings.NewReader("ts,page,tags,body,d,user\n5,p,,,1,\n"),
		readerOptions{OnWarning: func(w Warning) { warnings = append(warnings, w.String()) }})
	require.NoError(t, err)
	rows, badRows, end := readAll(t, sp, rr)
	require.NoError(t, end)
	require.Empty(t, badRows)
	require.Equal(t, []string{`5 ["p"] <nil> <nil> 1 null 1 0 0`}, rows)
	require.Equal(t, []string{`h.csv:1: column added: field "added" is not in the header: every value of metric added is missing`}, warnings)

	// An invalid spec is the spec's error.
	_, err = openCSV(&Spec{input: inputSpec{Delimiter: "ab"}}, "h.csv", strings.NewReader("ts\n"))
	require.ErrorIs(t, err, ErrSpec)
	// The reader's own error ends the input, naming it.
	_, err = openCSV(sp, "h.csv", io.MultiReader(strings.NewReader("ts,"), errReader{}))
	require.ErrorIs(t, err, errBoom)
	require.ErrorContains(t, err, "h.csv: header: ")
}

var errBoom = errors.New("boom")

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errBoom }

func TestNDJSONReader(t *testing.T) {
	sp := testSpec(t, nil)
	in := `{"ts": 5, "page": "Main", "tags": ["a", "b", "a"], "body": "hello", "added": 3, "d": 1.5, "user": "u1", "extra": {"x": 1}}` + "\n" +
		"\n   \n" + // blank lines are skipped, and counted
		`{"ts": "6"}` + "\n" + // all missing: null
		`{"ts": 7, "page": true, "tags": [null, 1.5, "c"], "body": null, "added": -4, "d": "1e3", "user": 17}` + "\r\n" +
		`{"ts": 8, "page": ["Main"], "tags": [], "body": "", "added": 2.0, "d": null, "user": ""}` // no final newline
	rr, err := openNDJSON(sp, "in.ndjson", strings.NewReader(in))
	require.NoError(t, err)
	rows, bad, end := readAll(t, sp, rr)
	require.NoError(t, end)
	require.Empty(t, bad)
	require.Equal(t, []string{
		`5 ["Main"] ["a" "b" "a"] ["hello"] 1 3 1.5 ~1 0`,
		`6 <nil> <nil> <nil> 1 null null 0 0`,
		`7 ["true"] ["" "1.5" "c"] <nil> 1 -4 1000 ~1 0`,
		`8 ["Main"] <nil> [""] 1 2 null 0 0`,
	}, rows)
}

func TestNDJSONReaderBadRows(t *testing.T) {
	sp := testSpec(t, nil)
	long := strings.Repeat("x", columns.MaxValueBytes+1)
	lines := []string{
		`{"ts": 1, "page": "Main", "tags": {"a": 1}}`, // 1
		`{"ts": 2, "page": ["a", "b"]}`,               // 2
		`{"ts": 3, "tags": [["a"]]}`,                  // 3
		`{"ts": 4, "added": "lots"}`,                  // 4
		`{"ts": 5, "d": [1]}`,                         // 5
		`{"page": "Main"}`,                            // 6
		`{"ts": null}`,                                // 7
		`{"ts": "yesterday"}`,                         // 8
		`["not", "an", "object"]`,                     // 9
		`{"ts": 10,`,                                  // 10
		`null`,                                        // 11
		`{"ts": 12, "user": {}}`,                      // 12
		`{"ts": 13, "page": "` + long + `"}`,          // 13
		`{"ts": 14, "page": "bad \u00zz escape"}`,     // 14
		`{"ts": 15, "page": "Main", "tags": ["a", "b"], "body": null}`, // 15: good
	}
	rr, err := openNDJSON(sp, "bad.ndjson", strings.NewReader(strings.Join(lines, "\n")))
	require.NoError(t, err)
	rows, bad, end := readAll(t, sp, rr)
	require.NoError(t, end)
	require.Equal(t, []string{`15 ["Main"] ["a" "b"] <nil> 1 null null 0 0`}, rows)
	require.Equal(t, []string{
		`bad.ndjson:1: column tags: want a string, number or boolean, not an object`,
		`bad.ndjson:2: column page: 2 values for a single-value dimension`,
		`bad.ndjson:3: column tags: want a string, number or boolean, not an array`,
		`bad.ndjson:4: column added: not an integer: "lots"`,
		`bad.ndjson:5: column delta: want a string, number or boolean, not an array`,
		`bad.ndjson:6: column ts: missing time`,
		`bad.ndjson:7: column ts: missing time`,
		`bad.ndjson:8: column ts: not an integer time: "yesterday"`,
		`bad.ndjson:9: not a JSON object: *`,
		`bad.ndjson:10: not a JSON object: *`,
		`bad.ndjson:11: not a JSON object: null`,
		`bad.ndjson:12: column users: want a string, number or boolean, not an object`,
		fmt.Sprintf(`bad.ndjson:13: column page: value of %d bytes, at most %d`, len(long), columns.MaxValueBytes),
		`bad.ndjson:14: not a JSON object: *`,
	}, globs(bad))
}

// globs returns the messages cut to the prefix a trailing * stands for in a want list: the
// text after it is encoding/json's.
func globs(msgs []string) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m
		if k := strings.Index(m, ": not a JSON object: "); k >= 0 && !strings.HasSuffix(m, ": null") {
			out[i] = m[:k] + ": not a JSON object: *"
		}
	}
	return out
}

func TestNDJSONReaderLongLine(t *testing.T) {
	sp := testSpec(t, nil)
	in := `{"ts": 1}` + "\n" + `{"ts": 2, "body": "` + strings.Repeat("x", defaultMaxRecordBytes) + `"}` + "\n"
	rr, err := openNDJSON(sp, "long.ndjson", strings.NewReader(in))
	require.NoError(t, err)
	rows, _, end := readAll(t, sp, rr)
	require.Len(t, rows, 1)
	require.ErrorIs(t, end, ErrInput)
	require.EqualError(t, end, fmt.Sprintf("long.ndjson:2: line longer than %d bytes (input.maxRecordBytes, --max-record-bytes)", defaultMaxRecordBytes))

	// The underlying reader's error ends the input, naming it.
	rr, err = openNDJSON(sp, "e.ndjson", io.MultiReader(strings.NewReader(`{"ts": 1}`+"\n"), errReader{}))
	require.NoError(t, err)
	rows, _, end = readAll(t, sp, rr)
	require.Len(t, rows, 1)
	require.ErrorIs(t, end, errBoom)
	require.EqualError(t, end, "e.ndjson: boom")
}

// A hyperUnique metric over a dimension reads no field of its own (the Builder derives its
// sketch); one over an input field gets a sketch of the field's value, reused from row to row.
func TestReaderSketches(t *testing.T) {
	sp := testSpec(t, nil)
	rr, err := openCSV(sp, "s.csv", strings.NewReader("ts,page,tags,body,added,d,user\n1,p,,,,,u1\n2,p,,,,,u2\n"))
	require.NoError(t, err)
	row := sp.newRow()
	require.NoError(t, rr.Read(&row))
	sk := row.Metrics[3].Sketch
	require.NotNil(t, sk)
	require.Nil(t, row.Metrics[4].Sketch)
	require.NoError(t, rr.Read(&row))
	require.Same(t, sk, row.Metrics[3].Sketch)
	require.EqualValues(t, 1, sk.Estimate(), "reset between rows")
}

// Read reshapes a row that does not fit the schema.
func TestReaderReshapes(t *testing.T) {
	sp := testSpec(t, nil)
	rr, err := openReader(sp, NDJSON, "r.ndjson", strings.NewReader(`{"ts": 1, "page": "p"}`))
	require.NoError(t, err)
	var row columns.Row
	require.NoError(t, rr.Read(&row))
	require.Len(t, row.Dims, 3)
	require.Len(t, row.Metrics, 5)
	_, err = openReader(sp, "xml", "r.xml", strings.NewReader(""))
	require.ErrorIs(t, err, ErrInvalid)
}

func TestFormatOfName(t *testing.T) {
	f := func(name string, want Format, ok bool) {
		t.Helper()
		got, gotOK := formatOf(name)
		require.Equal(t, want, got, name)
		require.Equal(t, ok, gotOK, name)
	}
	f("a.csv", CSV, true)
	f("A.CSV.GZ", CSV, true)
	f("a.ndjson", NDJSON, true)
	f("a.jsonl.gz", NDJSON, true)
	f("a.json", NDJSON, true)
	f("a.txt", "", false)
	f("-", "", false)
	f("a.gz", "", false)
}

func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "a.csv")
	require.NoError(t, os.WriteFile(plain, []byte("x\n"), 0o644))
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, err := zw.Write([]byte("y\n"))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	gz := filepath.Join(dir, "a.csv.gz")
	require.NoError(t, os.WriteFile(gz, zb.Bytes(), 0o644))
	for path, want := range map[string]string{plain: "x\n", gz: "y\n"} {
		rc, err := openFile(context.Background(), path)
		require.NoError(t, err)
		got, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.Equal(t, want, string(got))
		require.NoError(t, rc.Close())
	}
	_, err = openFile(context.Background(), filepath.Join(dir, "missing.csv"))
	require.ErrorIs(t, err, os.ErrNotExist)
	notGz := filepath.Join(dir, "b.csv.gz")
	require.NoError(t, os.WriteFile(notGz, []byte("plain text, not gzip"), 0o644))
	_, err = openFile(context.Background(), notGz)
	require.ErrorContains(t, err, "b.csv.gz: gzip: invalid header")
}

// TestNDJSONAbsentField: a dimension's field that no object of an NDJSON input has fails the
// input as a CSV header without it does, naming the field and the keys the objects had (a
// misspelling was an all-null column, exit 0); a metric's is a warning that every value is
// missing, as in CSV. A field some object has, even as null, is no error.
func TestNDJSONAbsentField(t *testing.T) {
	read := func(sp *Spec, in string) ([]string, []Warning, error) {
		var warns []Warning
		rr, err := openReaderOptions(sp, NDJSON, "in.ndjson", strings.NewReader(in), readerOptions{OnWarning: func(w Warning) { warns = append(warns, w) }})
		require.NoError(t, err)
		rows, _, end := readAll(t, sp, rr)
		return rows, warns, end
	}
	in := `{"ts": 1, "pgae": "Main", "tags": "a", "body": "x", "added": 1, "d": 1, "user": "u"}` + "\n" +
		`{"ts": 2, "pgae": "Talk", "tags": "b", "body": "y", "added": 2, "d": 2, "user": "v"}` + "\n"
	_, _, err := read(testSpec(t, nil), in)
	require.ErrorIs(t, err, ErrInput)
	require.EqualError(t, err, `in.ndjson: dimension page: field "page" is in none of its 2 objects; did you mean "pgae"? (their keys: added, body, d, pgae, tags, ts, user)`)

	// The field in one object of many, or as null only: fine.
	fine := strings.Replace(in, `"pgae": "Talk"`, `"page": null`, 1)
	rows, warns, err := read(testSpec(t, nil), fine)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Empty(t, warns)

	// A metric's field in no object: a warning, every value missing.
	noAdded := strings.ReplaceAll(strings.ReplaceAll(fine, `"added": 1, `, ``), `"added": 2, `, ``)
	rows, warns, err = read(testSpec(t, nil), noAdded)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, []Warning{{file: "in.ndjson", line: 2, column: "added",
		message: `field "added" is in none of the 2 objects: every value of metric added is missing`}}, warns)

	// An empty input tells nothing.
	_, _, err = read(testSpec(t, nil), "\n\n")
	require.NoError(t, err)
}
