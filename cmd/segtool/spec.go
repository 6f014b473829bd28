package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/writeout/writeout/columns"
)

// spec is an ingestion spec: the segment schema (columns.Schema's JSON, at the top level) plus
// the input mapping under "timestamp" and "input":
//
//	{
//	  "timestamp": {"field": "ts", "format": "rfc3339"},
//	  "input": {"format": "csv", "multiValueDelimiter": "|", "nullValue": "",
//	            "fields": {"page": "page_title"}},
//	  "dimensions": [{"name": "page"}, {"name": "tags", "multiValue": true}],
//	  "metrics": [{"name": "count", "aggregator": "count"},
//	              {"name": "added", "aggregator": "longSum", "fieldName": "chars_added"}],
//	  "rollup": true, "granularity": "hour"
//	}
//
// See specHelp for the rules.
type spec struct {
	Schema    columns.Schema
	Timestamp timestampSpec
	Input     inputSpec
}

type timestampSpec struct {
	Field  string `json:"field"`
	Format string `json:"format"`
	parse  func(s string) (int64, error)
}

type inputSpec struct {
	// Format is csv or ndjson; empty means by file extension.
	Format string `json:"format"`
	// Delimiter separates CSV fields; empty means ",".
	Delimiter string `json:"delimiter"`
	// MultiValueDelimiter splits the CSV cells of multi-value dimensions; empty means "|".
	MultiValueDelimiter string `json:"multiValueDelimiter"`
	// NullValue is the CSV text of a null; it defaults to the empty field. A pointer so that an
	// explicit "" can be told from absence (both mean the empty field).
	NullValue *string `json:"nullValue"`
	// Fields maps a column name to the input field it is read from, for dimensions; metrics
	// name theirs in the schema's fieldName. A column not listed reads the field of its name.
	Fields map[string]string `json:"fields"`
}

const specHelp = `The spec is the segment schema's JSON with two more keys, "timestamp" and "input":

  {
    "timestamp": {"field": "ts", "format": "rfc3339"},
    "input": {"multiValueDelimiter": "|", "fields": {"page": "page_title"}},
    "dimensions": [{"name": "page"}, {"name": "tags", "multiValue": true},
                   {"name": "body", "raw": true}],
    "metrics": [{"name": "rows", "aggregator": "count"},
                {"name": "added", "aggregator": "longSum", "fieldName": "chars_added"},
                {"name": "users", "aggregator": "hyperUnique", "fieldName": "user"}],
    "rollup": true,
    "granularity": "hour"
  }

timestamp.field (default "__time") is the input field of the time; timestamp.format is one of
  seconds (or posix)  epoch seconds, an integer or a decimal (rounded down to milliseconds)
  millis              epoch milliseconds (the default)
  micros, nanos       epoch microseconds or nanoseconds, truncated to milliseconds
  rfc3339 (or iso)    e.g. 2024-05-01T12:00:00Z or 2024-05-01T14:00:00.250+02:00
  any Go time layout  e.g. "2006-01-02 15:04:05" (read as UTC unless it has a zone)
Times are truncated to the granularity (none, second, minute, hour, day; default none).

dimensions: string columns, read from the input field of the same name unless input.fields
maps the column to another field. metrics: each computed from its fieldName (default: its
name): count counts input rows (no field); longSum/longMin/longMax read integers;
doubleSum/doubleMin/doubleMax read numbers; hyperUnique adds the field's value to a
HyperLogLog sketch. An empty or missing metric field reads as 0 (hyperUnique: adds nothing).
With "rollup": true, rows with the same truncated time and dimension values are combined.

input.format is csv or ndjson; without it each file's extension decides (.csv, .ndjson,
.jsonl, .json, optionally followed by .gz); --format overrides both.
CSV: the first line is the header of field names; input.delimiter separates fields (default
","); a multi-value cell is split on input.multiValueDelimiter (default "|"); a field equal
to input.nullValue (default: the empty field) is null. An empty element of a multi-value cell
is the empty string.
NDJSON: one object per line; a string, number or boolean is a value (numbers and booleans
as their JSON text); null or a missing key is null; an array is a multi-value cell (a single-
value dimension takes an array of at most one element); a null element of an array is stored
as the empty string, since a segment has no null inside a list; an empty array is null.`

// parseSpec reads and validates a spec file.
func parseSpec(path string) (*spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sp, err := decodeSpec(data)
	if err != nil {
		return nil, fmt.Errorf("spec %s: %w", path, err)
	}
	return sp, nil
}

func decodeSpec(data []byte) (*spec, error) {
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&top); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the spec's JSON object")
	}
	sp := &spec{}
	strict := func(key string, into any) error {
		raw, ok := top[key]
		if !ok {
			return nil
		}
		delete(top, key)
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(into); err != nil {
			return fmt.Errorf("%q: %w", key, err)
		}
		return nil
	}
	if err := strict("timestamp", &sp.Timestamp); err != nil {
		return nil, err
	}
	if err := strict("input", &sp.Input); err != nil {
		return nil, err
	}
	rest, err := json.Marshal(top)
	if err != nil {
		return nil, err
	}
	sp.Schema, err = columns.ParseSchema(rest)
	if err != nil {
		return nil, err
	}
	if sp.Timestamp.Field == "" {
		sp.Timestamp.Field = columns.TimeColumn
	}
	if sp.Timestamp.parse, err = timeParser(sp.Timestamp.Format); err != nil {
		return nil, err
	}
	switch sp.Input.Format {
	case "", "csv", "ndjson":
	default:
		return nil, fmt.Errorf("input.format %q: want csv or ndjson", sp.Input.Format)
	}
	if d := sp.Input.Delimiter; d != "" {
		r, n := utf8.DecodeRuneInString(d)
		if n != len(d) || r == '"' || r == '\r' || r == '\n' || r == utf8.RuneError {
			return nil, fmt.Errorf("input.delimiter %q: want one character other than a quote or newline", d)
		}
	}
	for col := range sp.Input.Fields {
		if sp.Schema.Dimension(col) < 0 {
			return nil, fmt.Errorf("input.fields: %q is not a dimension of the schema", col)
		}
	}
	if sp.Input.MultiValueDelimiter == "" {
		sp.Input.MultiValueDelimiter = "|"
	}
	return sp, nil
}

// dimField returns the input field of dimension d.
func (sp *spec) dimField(d columns.Dimension) string {
	if f, ok := sp.Input.Fields[d.Name]; ok && f != "" {
		return f
	}
	return d.Name
}

// metricField returns the input field of metric m, or "" for count.
func metricField(m columns.Metric) string {
	if m.Aggregator == columns.AggCount {
		return ""
	}
	if m.Field != "" {
		return m.Field
	}
	return m.Name
}

// timeParser returns the parser of a timestamp format (see specHelp).
func timeParser(format string) (func(string) (int64, error), error) {
	switch strings.ToLower(format) {
	case "", "millis":
		return func(s string) (int64, error) { return parseEpoch(s, 1, 1) }, nil
	case "seconds", "posix":
		return func(s string) (int64, error) { return parseEpoch(s, 1000, 1) }, nil
	case "micros":
		return func(s string) (int64, error) { return parseEpoch(s, 1, 1000) }, nil
	case "nanos":
		return func(s string) (int64, error) { return parseEpoch(s, 1, 1_000_000) }, nil
	case "rfc3339", "iso":
		return func(s string) (int64, error) {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return 0, fmt.Errorf("not an RFC 3339 time: %q", s)
			}
			return t.UnixMilli(), nil
		}, nil
	}
	if !strings.Contains(format, "2006") && !strings.Contains(format, "06") {
		return nil, fmt.Errorf("timestamp.format %q: want seconds, millis, micros, nanos, rfc3339 or a Go time layout with a year (2006)", format)
	}
	ref := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	if _, err := time.Parse(format, ref.Format(format)); err != nil {
		return nil, fmt.Errorf("timestamp.format %q: not a usable Go time layout: %w", format, err)
	}
	return func(s string) (int64, error) {
		t, err := time.Parse(format, s)
		if err != nil {
			return 0, fmt.Errorf("%q does not match the layout %q", s, format)
		}
		return t.UnixMilli(), nil
	}, nil
}

// parseEpoch parses an integer, or a decimal when mul > 1, as a count of 1/mul seconds...
// precisely: the result is value*mul/div milliseconds, rounded down, with no floating point.
func parseEpoch(s string, mul, div int64) (int64, error) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		if mul > 1 && (v > math.MaxInt64/mul || v < math.MinInt64/mul) {
			return 0, fmt.Errorf("time %s out of range", s)
		}
		return floorDiv(v*mul, div), nil
	}
	if mul > 1 && s != "" {
		// A decimal number of seconds: exact with big.Rat.
		r, ok := new(big.Rat).SetString(s)
		if ok && !strings.ContainsAny(s, "eE/") {
			r.Mul(r, new(big.Rat).SetInt64(mul))
			q := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: rounds down for a positive denominator
			if q.IsInt64() {
				return q.Int64(), nil
			}
			return 0, fmt.Errorf("time %s out of range", s)
		}
	}
	return 0, fmt.Errorf("not an integer time: %q", s)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
