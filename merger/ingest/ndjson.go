package ingest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/suggest"
)

// ndjsonReader reads one JSON object per line (see SpecHelp). Blank lines are skipped.
type ndjsonReader struct {
	fieldParser
	br      *bufio.Reader
	obj     map[string]json.RawMessage
	buf     []byte
	maxLine int
	// absent: the spec's dimension and metric fields no object has had yet (what a CSV header
	// tells at once), and keys some of the keys the objects had, for the message; nil once
	// every field came.
	absent []absentField
	keys   map[string]struct{}
	rows   int
}

// absentField is a field of the spec no object of the input has had yet.
type absentField struct {
	field, what string
	metric      int // the metric's index, or -1 for a dimension
}

// maxKeysShown bounds the keys an absent field's message lists, and keysFromRows the objects
// it takes them from (a metric's field absent throughout would otherwise have every object's
// keys read again).
const (
	maxKeysShown = 40
	keysFromRows = 1000
)

// NDJSON is the name of the NDJSON format.
const NDJSON Format = "ndjson"

var ndjsonFormat = inputFormat{
	name:  NDJSON,
	title: "NDJSON",
	exts:  []string{".ndjson", ".jsonl", ".json"},
	gzip:  true,
	newReader: func(pl *plan, name string, src io.Reader, opts readerOptions) (reader, error) {
		return newNDJSONReader(pl, name, src, opts), nil
	},
	help: `NDJSON: one object per line; a string, number or boolean is a value (numbers and booleans
as their JSON text); null or a missing key is null; an array is a multi-value cell (a single-
value dimension takes an array of at most one element); a null element of an array is stored
as the empty string, since a segment has no null inside a list; an empty array is null. A
dimension's field that no object of an input has is an error, as a CSV header without it is
(a misspelled field); a metric's is a warning.`,
}

// newNDJSONReader returns a reader of the NDJSON in r, named name in messages. A byte-order
// mark at the start is skipped. A line longer than the spec's input.maxRecordBytes ends the
// input with an error wrapping ErrInput.
func newNDJSONReader(pl *plan, name string, r io.Reader, opts readerOptions) *ndjsonReader {
	x := &ndjsonReader{fieldParser: newFieldParser(pl, name, opts), br: newInput(opts.Context, r), obj: map[string]json.RawMessage{},
		maxLine: pl.maxRecord, keys: map[string]struct{}{}}
	for i, d := range x.sp.Schema.Dimensions {
		x.absent = append(x.absent, absentField{field: x.dimFields[i], what: "dimension " + d.Name, metric: -1})
	}
	for i, m := range x.sp.Schema.Metrics {
		if f := x.metFields[i]; f != "" {
			x.absent = append(x.absent, absentField{field: f, what: "metric " + m.Name, metric: i})
		}
	}
	return x
}

// noteFields strikes the fields of the object just read off absent.
func (x *ndjsonReader) noteFields() {
	x.rows++
	kept := x.absent[:0]
	for _, a := range x.absent {
		if _, ok := x.obj[a.field]; !ok {
			kept = append(kept, a)
		}
	}
	x.absent = kept
	if len(x.absent) == 0 {
		x.absent, x.keys = nil, nil
		return
	}
	if x.rows > keysFromRows {
		return // the keys of the first objects make the message; the rest need not be read
	}
	for k := range x.obj {
		if len(x.keys) >= maxKeysShown {
			break
		}
		x.keys[k] = struct{}{}
	}
}

// checkFields ends the input: a dimension's field that no object had is an error, as a CSV
// header without it is (a misspelled field would otherwise be an all-null column), a
// metric's a warning that every value of it is missing.
func (x *ndjsonReader) checkFields() error {
	if x.rows == 0 || len(x.absent) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(x.keys))
	shown := strings.Join(keys, ", ")
	if len(keys) >= maxKeysShown {
		shown += ", ..."
	}
	for _, a := range x.absent {
		if a.metric < 0 {
			return inputErr("%s: %s: field %q is in none of its %d objects%s (their keys: %s)", x.file, a.what, a.field, x.rows,
				suggest.Hint(a.field, keys), shown)
		}
	}
	if x.onWarning != nil {
		for _, a := range x.absent {
			x.onWarning(Warning{file: x.file, line: x.line, column: x.sp.Schema.Metrics[a.metric].Name,
				message: fmt.Sprintf("field %q is in none of the %d objects%s: every value of %s is missing", a.field, x.rows,
					suggest.Hint(a.field, keys), a.what)})
		}
	}
	x.absent = nil
	return nil
}

// nextLine returns the next non-blank line.
func (x *ndjsonReader) nextLine() ([]byte, error) {
	for {
		x.buf = x.buf[:0]
		for {
			frag, err := x.br.ReadSlice('\n')
			x.buf = append(x.buf, frag...)
			if len(bytes.TrimSuffix(x.buf, []byte{'\n'})) > x.maxLine {
				x.buf = nil // do not keep the memory
				return nil, inputErr("%s:%d: line longer than %d bytes (input.maxRecordBytes, --max-record-bytes)", x.file, x.line+1, x.maxLine)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF && len(x.buf) > 0 {
				break
			}
			if err != nil {
				if err == io.EOF {
					return nil, io.EOF
				}
				return nil, readErr(x.file, err)
			}
			break
		}
		x.line++
		if line := bytes.TrimSpace(x.buf); len(line) > 0 {
			return line, nil
		}
	}
}

// Read implements Reader.
func (x *ndjsonReader) Read(row *columns.Row) error {
	line, err := x.nextLine()
	if err == io.EOF {
		if err := x.checkFields(); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	clear(x.obj)
	if err := json.Unmarshal(line, &x.obj); err != nil {
		return x.errf("", "not a JSON object: %v", err)
	}
	if x.obj == nil { // the line was null
		x.obj = map[string]json.RawMessage{}
		return x.errf("", "not a JSON object: null")
	}
	if x.absent != nil {
		x.noteFields()
	}
	x.shape(row)
	ts, tnull, err := x.scalar(x.timeField, x.obj[x.timeField])
	if err != nil {
		return err
	}
	if err := x.setTime(row, ts, tnull); err != nil {
		return err
	}
	for i, d := range x.sp.Schema.Dimensions {
		v, err := x.values(d, row.Dims[i][:0], x.obj[x.dimFields[i]])
		row.Dims[i] = v
		if err != nil {
			return err
		}
		if err := x.checkValues(i, v); err != nil {
			return err
		}
	}
	for i, m := range x.sp.Schema.Metrics {
		var s string
		null := true
		if f := x.metFields[i]; f != "" {
			if s, null, err = x.scalar(m.Name, x.obj[f]); err != nil {
				return err
			}
		}
		if err := x.setMetric(row, i, s, null); err != nil {
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
