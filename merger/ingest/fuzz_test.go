package ingest

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
)

// FuzzParseSpec: any bytes decode to a spec or to an error wrapping ErrSpec, never a panic;
// a spec that decodes marshals and decodes back to itself.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		testSpecJSON, hourSpec, genSpecJSON,
		`{"timestamp": {"field": "ts", "format": "seconds"}, "input": {"delimiter": ";", "nullValue": "\\N", "fields": {"page": "title"}},
		  "dimensions": [{"name": "page"}], "metrics": [{"name": "n", "aggregator": "count"}], "rollup": true, "granularity": "minute"}`,
		`{"timestamp": {"format": "2006-01-02 15:04:05"}, "input": {"format": "ndjson"}, "dimensions": []}`,
		`{"dimensions": [{"name": "a", "raw": true, "multiValue": true}]}`,
		`{"input": {"delimiter": "\u0000"}}`,
		`{"timestamp": {"format": "06"}}`,
		`null`, `[]`, `{}`, `{"dimensions": []} {}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sp, err := ParseSpec(data)
		if err != nil {
			require.ErrorIs(t, err, ErrSpec)
			require.Nil(t, sp)
			return
		}
		require.NoError(t, sp.Validate())
		js, err := json.Marshal(sp)
		require.NoError(t, err)
		back, err := ParseSpec(js)
		require.NoError(t, err, "%s", js)
		require.True(t, back.Schema.Equal(sp.Schema))
		require.Equal(t, sp.timestamp, back.timestamp)
		require.Equal(t, sp.input.Format, back.input.Format)
		require.Equal(t, sp.input.Delimiter, back.input.Delimiter)
		require.Equal(t, sp.input.MultiValueDelimiter, back.input.MultiValueDelimiter)
		require.Equal(t, sp.input.NullValue, back.input.NullValue)
		require.Equal(t, len(sp.input.Fields), len(back.input.Fields))
		for k, v := range sp.input.Fields {
			require.Equal(t, v, back.input.Fields[k])
		}
	})
}

// fuzzRows reads every row of rr and checks what it gives: rows fit the schema, within the
// segment limits, times within columns.MinTime..MaxTime; row errors wrap ErrRow and name the
// input; the lines of rows and row errors strictly increase, never past the input's lines (no
// record read twice, none skipped as a whole after a bad one); other errors wrap ErrInput.
// It never loops forever.
func fuzzRows(t *testing.T, sp *Spec, rr reader, name string, data []byte) {
	row := sp.newRow()
	lines := bytes.Count(data, []byte{'\n'}) + 1
	last := 0
	for range 1 << 16 {
		err := rr.Read(&row)
		if err == io.EOF {
			return
		}
		var re *RowError
		if errors.As(err, &re) {
			require.ErrorIs(t, err, ErrRow)
			require.Equal(t, name, re.File)
			require.Greater(t, re.Line, last, "%v", err)
			require.LessOrEqual(t, re.Line, lines)
			last = re.Line
			continue
		}
		if err != nil {
			require.ErrorIs(t, err, ErrInput)
			return
		}
		line := lineOf(rr)
		require.Greater(t, line, last)
		require.LessOrEqual(t, line, lines)
		last = line
		require.GreaterOrEqual(t, row.Time, columns.MinTime)
		require.LessOrEqual(t, row.Time, columns.MaxTime)
		require.Len(t, row.Dims, len(sp.Schema.Dimensions))
		require.Len(t, row.Metrics, len(sp.Schema.Metrics))
		for i, d := range sp.Schema.Dimensions {
			if !d.MultiValue {
				require.LessOrEqual(t, len(row.Dims[i]), 1)
			}
			require.LessOrEqual(t, len(row.Dims[i]), maxRowValues)
			for _, v := range row.Dims[i] {
				require.LessOrEqual(t, len(v), columns.MaxValueBytes)
			}
		}
		for i, m := range sp.Schema.Metrics {
			if m.ValueType() == columns.MetricDouble {
				require.False(t, math.IsInf(row.Metrics[i].Double, 0) || math.IsNaN(row.Metrics[i].Double))
			}
		}
	}
	t.Fatal("the reader did not end")
}

// lineOf returns the line of the row rr read last.
func lineOf(rr reader) int {
	switch x := rr.(type) {
	case *csvReader:
		return x.line
	case *ndjsonReader:
		return x.line
	}
	return 0
}

// fuzzSpecs are the specs the reader fuzz tests read with: the test spec in its formats, with
// a custom delimiter and null.
func fuzzSpecs(t testing.TB) []*Spec {
	null := "NULL"
	return []*Spec{
		testSpec(t, nil),
		testSpec(t, func(sp *Spec) {
			sp.input.Delimiter = "\t"
			sp.input.MultiValueDelimiter = ";"
			sp.input.NullValue = &null
			sp.timestamp.Format = "seconds"
		}),
		testSpec(t, func(sp *Spec) { sp.input.MaxRecordBytes = 40 }),
	}
}

// csvRecords splits data into records with encoding/csv, until its first error: the records
// and each one's first line, and the error's record's first line (0 when it read all).
func csvRecords(data []byte, comma rune) (recs [][]string, starts []int, errLine int) {
	cr := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, []byte(bom))))
	cr.Comma = comma
	cr.FieldsPerRecord = -1
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return recs, starts, 0
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return recs, starts, pe.StartLine
		}
		if err != nil {
			panic(err)
		}
		line, _ := cr.FieldPos(0)
		recs, starts = append(recs, rec), append(starts, line)
	}
}

// FuzzCSVReader: any bytes are rows, row errors or an input error; never a panic (fuzzRows).
// The records are encoding/csv's: the same fields at the same lines up to its first error, at
// the same line.
func FuzzCSVReader(f *testing.F) {
	for _, s := range []string{
		"ts,page,tags,body,added,d,user\n5,Main,a|b|a,hello,3,1.5,u1\n6,,,,,,\n",
		"\ufeffts,page,tags,body,added,d,user\n7,\"Talk, page\",|c||,\"multi\nline\",-4,1e3,u2\n",
		"ts\tpage\ttags\tbody\tadded\td\tuser\n1.5\tNULL\ta;b\tNULL\t1\t2\tu\n",
		"ts,page,tags,body,added,d,user\n1,Main,a,b,lots,1,u\n9,Main,a\n11,Ma\"in,a,b,1,1,u\n,Main,a,b,1,NaN,u\n",
		"ts,page,ts\n", "", "\"", "ts,page,\"tags\n",
	} {
		f.Add([]byte(s))
	}
	specs := fuzzSpecs(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, sp := range specs {
			rr, err := openCSV(sp, "f.csv", bytes.NewReader(data))
			if err != nil {
				require.ErrorIs(t, err, ErrInput)
				continue
			}
			fuzzRows(t, sp, rr, "f.csv", data)
		}
		for _, comma := range []rune{',', '\t'} {
			checkScanner(t, data, comma, 1<<30)
		}
	})
}

// checkScanner checks csvScanner's records of data against encoding/csv's: the same fields at
// the same lines up to its first error, at the same line.
func checkScanner(t *testing.T, data []byte, comma rune, max int) {
	t.Helper()
	want, starts, errLine := csvRecords(data, comma)
	sc := csvScanner{br: newInput(context.Background(), bytes.NewReader(data)), file: "f.csv", comma: []byte(string(comma)), max: max}
	for i := 0; ; i++ {
		rec, err := sc.next()
		if i == len(want) {
			if errLine == 0 {
				require.Equal(t, io.EOF, err)
			} else {
				var re *RowError
				require.True(t, errors.As(err, &re), "%v", err)
				require.Equal(t, errLine, re.Line)
			}
			break
		}
		require.NoError(t, err, "record %d", i)
		require.Equal(t, want[i], rec, "record %d", i)
		require.Equal(t, starts[i], sc.start, "record %d", i)
	}
}

// The scanner's fast path (records of one line without quotes, split from a block of whole
// lines taken from the buffer at once) and its general path hand over correctly wherever
// they meet: inputs of several buffers (64 KiB) of plain lines with, at random, quoted fields
// (with delimiters, doubled quotes and newlines), empty lines, CRLF endings, and a last line
// with or without its newline, read as encoding/csv reads them.
func TestCSVScannerBlocks(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	for c := 0; c < 8; c++ {
		var b bytes.Buffer
		for b.Len() < 200<<10 {
			switch k := rng.IntN(40); {
			case k == 0:
				b.WriteString("\n")
			case k == 1:
				fmt.Fprintf(&b, "%d,\"a, \"\"quoted\"\"\nfield\",x\n", rng.IntN(1000))
			case k == 2:
				fmt.Fprintf(&b, "%d,b,\"q\"\r\n", rng.IntN(1000))
			case k < 6:
				fmt.Fprintf(&b, "%d,crlf,%d\r\n", rng.IntN(1000), rng.IntN(9))
			default:
				fmt.Fprintf(&b, "%d,plain-%d,%d\n", rng.IntN(1_000_000), rng.IntN(5000), rng.IntN(99))
			}
		}
		data := b.Bytes()
		if c%2 == 1 {
			data = append(data, "7,last,1"...) // no newline at the end
		}
		if c%4 == 2 {
			data = bytes.ReplaceAll(data, []byte{'"'}, nil) // no quotes: the fast path only
		}
		checkScanner(t, data, ',', 1<<30)
	}
}

// FuzzParseInt10: where parseInt10 parses, it gives strconv.ParseInt's value.
func FuzzParseInt10(f *testing.F) {
	for _, s := range []string{"0", "-0", "+7", "138741", "1767225600019", "999999999999999999", "-999999999999999999",
		"9223372036854775807", "1000000000000000000", "", "-", "+", "1_000", "0x10", "1e3", "12a", " 1", "--1", "+-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := parseInt10(s)
		want, err := strconv.ParseInt(s, 10, 64)
		if ok {
			require.NoError(t, err, "%q", s)
			require.Equal(t, want, n, "%q", s)
		} else if len(strings.TrimLeft(s, "+-")) <= 18 && len(strings.TrimLeft(s, "+-")) > 0 && len(s)-len(strings.TrimLeft(s, "+-")) <= 1 {
			require.Error(t, err, "%q: strconv parses what parseInt10 refused", s)
		}
	})
}

// FuzzNDJSONReader: any bytes are rows, row errors or an input error; never a panic
// (fuzzRows); rows round-trip (ndjsonRoundTrip).
func FuzzNDJSONReader(f *testing.F) {
	for _, s := range []string{
		`{"ts": 5, "page": "Main", "tags": ["a", "b", "a"], "body": "hello", "added": 3, "d": 1.5, "user": "u1"}` + "\n\n" + `{"ts": "6"}`,
		`{"ts": 7, "page": true, "tags": [null, 1.5, "c"], "body": null, "added": -4, "d": "1e3", "user": 17}` + "\r\n",
		`{"ts": 1, "page": ["a", "b"]}` + "\n" + `{"ts": 3, "tags": [["a"]]}` + "\n" + `null` + "\n" + `[1]`,
		`{"ts": 14, "page": "bad \u00zz escape"}`, `{"ts": 10,`, "", "\n\n", `{"ts": 1.5e3, "added": 1e2, "d": -0}`,
	} {
		f.Add([]byte(s))
	}
	specs := fuzzSpecs(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, sp := range specs {
			rr, err := openNDJSON(sp, "f.ndjson", bytes.NewReader(data))
			require.NoError(t, err)
			fuzzRows(t, sp, rr, "f.ndjson", data)
		}
		ndjsonRoundTrip(t, specs[0], data)
	})
}

// ndjsonRoundTrip: each row read from data, written back as an NDJSON line (time, dimensions,
// and the long and double metrics: the test spec's columns but the sketches), reads back as
// the same row.
func ndjsonRoundTrip(t *testing.T, sp *Spec, data []byte) {
	rr, err := openNDJSON(sp, "f.ndjson", bytes.NewReader(data))
	require.NoError(t, err)
	row, back := sp.newRow(), sp.newRow()
	for range 1 << 16 {
		err := rr.Read(&row)
		if err == io.EOF {
			return
		}
		if err != nil {
			if errors.Is(err, ErrRow) {
				continue
			}
			return
		}
		obj := map[string]any{"ts": row.Time}
		for i, d := range sp.Schema.Dimensions {
			obj[sp.dimensionField(d)] = row.Dims[i]
		}
		for i, m := range sp.Schema.Metrics {
			switch m.ValueType() {
			case columns.MetricLong:
				if f := sp.metricField(m); f != "" {
					obj[f] = row.Metrics[i].Long
				}
			case columns.MetricDouble:
				obj[sp.metricField(m)] = json.Number(strconv.FormatFloat(row.Metrics[i].Double, 'g', -1, 64))
			case columns.MetricHyperUnique:
			}
		}
		line, err := json.Marshal(obj)
		require.NoError(t, err)
		br, err := openNDJSON(sp, "back.ndjson", bytes.NewReader(line))
		require.NoError(t, err)
		require.NoError(t, br.Read(&back), "%s", line)
		require.Equal(t, row.Time, back.Time, "%s", line)
		for i := range row.Dims {
			require.Equal(t, len(row.Dims[i]), len(back.Dims[i]), "%s", line)
			for k := range row.Dims[i] {
				require.Equal(t, row.Dims[i][k], back.Dims[i][k], "%s", line)
			}
		}
		for i, m := range sp.Schema.Metrics {
			switch m.ValueType() {
			case columns.MetricLong:
				require.Equal(t, row.Metrics[i].Long, back.Metrics[i].Long, "%s", line)
			case columns.MetricDouble:
				require.Equal(t, math.Float64bits(row.Metrics[i].Double), math.Float64bits(back.Metrics[i].Double), "%s", line)
			case columns.MetricHyperUnique:
			}
		}
	}
}

// zeroBytes marks exactly the zero bytes of a word: every byte value at every position, with
// the other bytes zero or not (a borrow must not mark a neighbour).
func TestZeroBytes(t *testing.T) {
	for pos := range 8 {
		for v := range 256 {
			for _, fill := range []uint64{0, 0x0101010101010101, 0xffffffffffffffff, 0x8080808080808080} {
				w := fill&^(0xff<<(8*pos)) | uint64(v)<<(8*pos)
				var want uint64
				for k := range 8 {
					if byte(w>>(8*k)) == 0 {
						want |= 0x80 << (8 * k)
					}
				}
				require.Equal(t, want, zeroBytes(w), "w %#x", w)
			}
		}
	}
}
