package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/writeout/writeout/columns"
)

// inRow is one parsed input row, in schema order. Its slices are reused from row to row.
type inRow struct {
	time int64
	// dims holds each dimension's values; an empty list is null.
	dims [][]string
	// longs, doubles and hyper hold each metric's value, by metric index: longs for count and
	// the long aggregators, doubles for the double ones, hyper (with hyperSet) for hyperUnique.
	longs    []int64
	doubles  []float64
	hyper    []string
	hyperSet []bool
}

func newInRow(s columns.Schema) *inRow {
	return &inRow{
		dims:     make([][]string, len(s.Dimensions)),
		longs:    make([]int64, len(s.Metrics)),
		doubles:  make([]float64, len(s.Metrics)),
		hyper:    make([]string, len(s.Metrics)),
		hyperSet: make([]bool, len(s.Metrics)),
	}
}

// rowError is a row that does not parse: FILE:LINE: column NAME: reason. It can be skipped.
type rowError struct {
	file   string
	line   int
	column string // empty when the row as a whole is malformed
	reason string
}

func (e *rowError) Error() string {
	if e.column == "" {
		return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.reason)
	}
	return fmt.Sprintf("%s:%d: column %s: %s", e.file, e.line, e.column, e.reason)
}

// rowReader reads rows of one input.
type rowReader interface {
	// read parses the next row into r: nil, io.EOF at the end, a *rowError for a row that does
	// not parse (reading can go on), or another error, which ends the input.
	read(r *inRow) error
	close() error
}

// inputName is how an input is named in messages.
func inputName(path string) string {
	if path == "-" {
		return "<stdin>"
	}
	return path
}

// inputFormat decides the format of path: the flag, else the spec, else the extension.
func inputFormat(path, flag string, sp *spec) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if sp.Input.Format != "" {
		return sp.Input.Format, nil
	}
	p := strings.TrimSuffix(strings.ToLower(path), ".gz")
	switch {
	case strings.HasSuffix(p, ".csv"):
		return "csv", nil
	case strings.HasSuffix(p, ".ndjson"), strings.HasSuffix(p, ".jsonl"), strings.HasSuffix(p, ".json"):
		return "ndjson", nil
	}
	if path == "-" {
		return "", usagef("standard input: say its format with --format csv or --format ndjson")
	}
	return "", usagef("%s: cannot tell the format from the extension (.csv, .ndjson, .jsonl, .json): use --format", path)
}

// openInput opens one input file ("-" is stdin) in the given format.
func openInput(path, format string, sp *spec, stdin io.Reader) (rowReader, error) {
	var rc io.ReadCloser
	if path == "-" {
		rc = io.NopCloser(stdin)
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		rc = f
	}
	var r io.Reader = bufio.NewReaderSize(rc, 256<<10)
	if strings.HasSuffix(strings.ToLower(path), ".gz") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			rc.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		r = zr
	}
	name := inputName(path)
	var rr rowReader
	var err error
	switch format {
	case "csv":
		rr, err = newCSVReader(name, r, rc, sp)
	case "ndjson":
		rr = newNDJSONReader(name, r, rc, sp)
	default:
		err = usagef("unknown input format %q (want csv or ndjson)", format)
	}
	if err != nil {
		rc.Close()
		return nil, err
	}
	return rr, nil
}

// fieldParser turns the text of fields into an inRow, shared by the formats.
type fieldParser struct {
	sp   *spec
	file string
	line int
}

func (p *fieldParser) errf(column, format string, args ...any) *rowError {
	return &rowError{file: p.file, line: p.line, column: column, reason: fmt.Sprintf(format, args...)}
}

func (p *fieldParser) setTime(r *inRow, s string, null bool) error {
	if null || s == "" {
		return p.errf(p.sp.Timestamp.Field, "missing time")
	}
	t, err := p.sp.Timestamp.parse(s)
	if err != nil {
		return p.errf(p.sp.Timestamp.Field, "%v", err)
	}
	r.time = p.sp.Schema.Granularity.Truncate(t)
	return nil
}

// setMetric parses metric i from its field's text; empty (or null) reads as 0.
func (p *fieldParser) setMetric(r *inRow, i int, s string, null bool) error {
	m := p.sp.Schema.Metrics[i]
	r.longs[i], r.doubles[i], r.hyperSet[i] = 0, 0, false
	if m.Aggregator == columns.AggCount {
		r.longs[i] = 1
		return nil
	}
	if null || s == "" {
		return nil
	}
	switch m.ValueType() {
	case columns.MetricLong:
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			f, ferr := strconv.ParseFloat(s, 64)
			if ferr != nil || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
				return p.errf(m.Name, "not an integer: %q", s)
			}
			v = int64(f)
		}
		r.longs[i] = v
	case columns.MetricDouble:
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return p.errf(m.Name, "not a finite number: %q", s)
		}
		r.doubles[i] = v
	case columns.MetricHyperUnique:
		r.hyper[i], r.hyperSet[i] = s, true
	}
	return nil
}

// csvReader reads CSV with a header line.
type csvReader struct {
	fieldParser
	cr        *csv.Reader
	c         io.Closer
	timeIdx   int
	dimIdx    []int
	metricIdx []int
	null      string
	multi     string
	nfields   int
}

func newCSVReader(name string, r io.Reader, c io.Closer, sp *spec) (*csvReader, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	if sp.Input.Delimiter != "" {
		cr.Comma = []rune(sp.Input.Delimiter)[0]
	}
	header, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty file, want a header line of field names", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", name, err)
	}
	index := make(map[string]int, len(header))
	for i, h := range header {
		h = strings.TrimPrefix(h, "\ufeff") // a byte-order mark before the first name
		if _, dup := index[h]; dup {
			return nil, fmt.Errorf("%s:1: field %q appears twice in the header", name, h)
		}
		index[h] = i
	}
	find := func(what, field string) (int, error) {
		i, ok := index[field]
		if !ok {
			return 0, fmt.Errorf("%s:1: %s: field %q is not in the header", name, what, field)
		}
		return i, nil
	}
	x := &csvReader{fieldParser: fieldParser{sp: sp, file: name, line: 1}, cr: cr, c: c, multi: sp.Input.MultiValueDelimiter, nfields: len(header)}
	if sp.Input.NullValue != nil {
		x.null = *sp.Input.NullValue
	}
	if x.timeIdx, err = find("timestamp", sp.Timestamp.Field); err != nil {
		return nil, err
	}
	for _, d := range sp.Schema.Dimensions {
		i, err := find("dimension "+d.Name, sp.dimField(d))
		if err != nil {
			return nil, err
		}
		x.dimIdx = append(x.dimIdx, i)
	}
	for _, m := range sp.Schema.Metrics {
		i := -1
		if f := metricField(m); f != "" {
			if i, err = find("metric "+m.Name, f); err != nil {
				return nil, err
			}
		}
		x.metricIdx = append(x.metricIdx, i)
	}
	return x, nil
}

func (x *csvReader) close() error { return x.c.Close() }

func (x *csvReader) read(r *inRow) error {
	rec, err := x.cr.Read()
	if err != nil {
		if err == io.EOF {
			return io.EOF
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			x.line = pe.StartLine
			return &rowError{file: x.file, line: pe.Line, reason: "malformed CSV: " + pe.Err.Error()}
		}
		return fmt.Errorf("%s: %w", x.file, err)
	}
	x.line, _ = x.cr.FieldPos(0)
	if len(rec) != x.nfields {
		return x.errf("", "%d fields, the header has %d", len(rec), x.nfields)
	}
	if err := x.setTime(r, rec[x.timeIdx], rec[x.timeIdx] == x.null); err != nil {
		return err
	}
	for i, d := range x.sp.Schema.Dimensions {
		s := rec[x.dimIdx[i]]
		v := r.dims[i][:0]
		switch {
		case s == x.null:
		case d.MultiValue:
			for {
				j := strings.Index(s, x.multi)
				if j < 0 {
					v = append(v, s)
					break
				}
				v = append(v, s[:j])
				s = s[j+len(x.multi):]
			}
		default:
			v = append(v, s)
		}
		r.dims[i] = v
	}
	for i, j := range x.metricIdx {
		s := ""
		if j >= 0 {
			s = rec[j]
		}
		if err := x.setMetric(r, i, s, s == x.null); err != nil {
			return err
		}
	}
	return nil
}

// ndjsonReader reads one JSON object per line.
type ndjsonReader struct {
	fieldParser
	br      *bufio.Reader
	c       io.Closer
	obj     map[string]json.RawMessage
	buf     []byte
	dims    []string
	metrics []string
}

const maxLine = 64 << 20

func newNDJSONReader(name string, r io.Reader, c io.Closer, sp *spec) *ndjsonReader {
	x := &ndjsonReader{fieldParser: fieldParser{sp: sp, file: name}, br: bufio.NewReaderSize(r, 64<<10), c: c,
		obj: map[string]json.RawMessage{}}
	for _, d := range sp.Schema.Dimensions {
		x.dims = append(x.dims, sp.dimField(d))
	}
	for _, m := range sp.Schema.Metrics {
		x.metrics = append(x.metrics, metricField(m))
	}
	return x
}

func (x *ndjsonReader) close() error { return x.c.Close() }

// nextLine returns the next non-blank line.
func (x *ndjsonReader) nextLine() ([]byte, error) {
	for {
		x.buf = x.buf[:0]
		for {
			frag, err := x.br.ReadSlice('\n')
			x.buf = append(x.buf, frag...)
			if err == bufio.ErrBufferFull {
				if len(x.buf) > maxLine {
					return nil, fmt.Errorf("%s:%d: line longer than %d bytes", x.file, x.line+1, maxLine)
				}
				continue
			}
			if err == io.EOF && len(x.buf) > 0 {
				break
			}
			if err != nil {
				if err == io.EOF {
					return nil, io.EOF
				}
				return nil, fmt.Errorf("%s: %w", x.file, err)
			}
			break
		}
		x.line++
		if line := bytes.TrimSpace(x.buf); len(line) > 0 {
			return line, nil
		}
	}
}

func (x *ndjsonReader) read(r *inRow) error {
	line, err := x.nextLine()
	if err != nil {
		return err
	}
	clear(x.obj)
	if err := json.Unmarshal(line, &x.obj); err != nil {
		return x.errf("", "not a JSON object: %v", err)
	}
	// The time.
	ts, tnull, err := x.scalar(x.sp.Timestamp.Field, x.obj[x.sp.Timestamp.Field])
	if err != nil {
		return err
	}
	if err := x.setTime(r, ts, tnull); err != nil {
		return err
	}
	for i, d := range x.sp.Schema.Dimensions {
		v, err := x.values(d, r.dims[i][:0], x.obj[x.dims[i]])
		if err != nil {
			return err
		}
		r.dims[i] = v
	}
	for i, m := range x.sp.Schema.Metrics {
		var s string
		null := true
		if f := x.metrics[i]; f != "" {
			if s, null, err = x.scalar(m.Name, x.obj[f]); err != nil {
				return err
			}
		}
		if err := x.setMetric(r, i, s, null); err != nil {
			return err
		}
	}
	return nil
}

// scalar returns the text of a JSON scalar: a string's value, a number's or boolean's text;
// null (or absent) reports null.
func (x *ndjsonReader) scalar(column string, raw json.RawMessage) (string, bool, error) {
	if len(raw) == 0 {
		return "", true, nil
	}
	switch raw[0] {
	case 'n':
		return "", true, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, x.errf(column, "%v", err)
		}
		return s, false, nil
	case '[', '{':
		return "", false, x.errf(column, "want a string, number or boolean, not %s", kindOf(raw))
	}
	return string(raw), false, nil
}

// values appends the values of a dimension cell to v.
func (x *ndjsonReader) values(d columns.Dimension, v []string, raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || raw[0] != '[' {
		s, null, err := x.scalar(d.Name, raw)
		if err != nil || null {
			return v, err
		}
		return append(v, s), nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return v, x.errf(d.Name, "%v", err)
	}
	if !d.MultiValue && len(elems) > 1 {
		return v, x.errf(d.Name, "%d values for a single-value dimension", len(elems))
	}
	for _, e := range elems {
		s, _, err := x.scalar(d.Name, e) // a null element is stored as ""
		if err != nil {
			return v, err
		}
		v = append(v, s)
	}
	return v, nil
}

func kindOf(raw json.RawMessage) string {
	if raw[0] == '[' {
		return "an array"
	}
	return "an object"
}
