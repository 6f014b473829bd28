package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/suggest"
)

// Spec is an ingestion spec: the segment schema plus how input fields map to it. Its JSON form
// (ParseSpec, MarshalJSON) is the schema's JSON at the top level with two more keys,
// "timestamp" and "input"; SpecHelp describes it for users.
//
// A Spec is made by ParseSpec (which validates it), or in Go from a schema alone (NewSpec, or
// a Spec with only its Schema set): the time then is epoch milliseconds in the field "__time",
// and the inputs are read with each format's defaults. Run validates the spec it is given once,
// before it reads anything; its readers take it as valid.
type Spec struct {
	Schema    columns.Schema
	timestamp timestampSpec
	input     inputSpec
}

// NewSpec returns the spec of schema whose time is epoch milliseconds in the field "__time",
// written out (MarshalJSON gives its "timestamp" key), the rest the defaults.
func NewSpec(schema columns.Schema) *Spec {
	return &Spec{Schema: schema, timestamp: timestampSpec{Field: columns.TimeColumn, Format: "millis"}}
}

// timestampSpec says where the time of a row is and how it is written.
type timestampSpec struct {
	// Field is the input field of the time; empty means "__time".
	Field string `json:"field,omitempty"`
	// Format is one of seconds (or posix), millis (the default, also when empty), micros,
	// nanos, rfc3339 (or iso), or a Go time layout with a year (see SpecHelp).
	Format string `json:"format,omitempty"`
}

// inputSpec says how input fields are read.
type inputSpec struct {
	// Format is one of FormatNames; empty means by the input's content (a format's magic
	// bytes, as a Parquet file's) and name (its extension).
	Format Format `json:"format,omitempty"`
	// Delimiter separates CSV fields: one character; empty means ",".
	Delimiter string `json:"delimiter,omitempty"`
	// MultiValueDelimiter splits the CSV cells of multi-value dimensions; empty means "|".
	MultiValueDelimiter string `json:"multiValueDelimiter,omitempty"`
	// NullValue is the CSV text of a null; nil (or "") means the empty field.
	NullValue *string `json:"nullValue,omitempty"`
	// Fields maps a dimension to the input field it is read from; a dimension not listed
	// reads the field of its name. Metrics name theirs in the schema's fieldName.
	Fields map[string]string `json:"fields,omitempty"`
	// NullAsZero names long and double metrics whose missing values read as 0, as before
	// null handling. By default a missing value (an empty CSV field or the null text, a
	// column the header lacks; an NDJSON null, "" or missing key) is null: sums and counts
	// skip it, min, max, first and last ignore it, and a rolled-up row whose values were all
	// null is null (columns/agg). That is SQL's meaning of a missing value and Druid's default
	// since version 28, and the one that does not lie: a missing delay read as 0 would be
	// every longMin's answer. Naming a metric here restores 0 for it, for data where empty
	// does mean zero.
	NullAsZero []string `json:"nullAsZero,omitempty"`
	// MaxRecordBytes bounds the bytes of one record: a CSV record (all its lines) or an NDJSON
	// line; 0 means defaultMaxRecordBytes (Options.MaxRecordBytes overrides it). A longer record is an error naming its line, and
	// the memory a reader holds stays within a few times this bound.
	MaxRecordBytes int64 `json:"maxRecordBytes,omitempty"`
}

// defaultMaxRecordBytes is the default of inputSpec.MaxRecordBytes: 64 MiB.
const defaultMaxRecordBytes = 64 << 20

// maxRecordBytes returns the record size limit of the spec.
func (s *Spec) maxRecordBytes() int {
	n := s.input.MaxRecordBytes
	switch {
	case n <= 0:
		return defaultMaxRecordBytes
	case n > math.MaxInt32:
		return math.MaxInt32
	}
	return int(n)
}

// SpecHelp describes the spec's JSON and the input conventions, for users (segtool ingest
// --help prints it).
var SpecHelp = `The spec is the segment schema's JSON with two more keys, "timestamp" and "input":

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
name): count counts input rows (no field); ` + aggNames(agg.Long) + ` read integers;
` + aggNames(agg.Double) + ` read numbers; the sketches (` + aggNames(agg.SketchType) + `) add the field's
value to the row's sketch, or, when its fieldName names a dimension, that dimension's values;
a sketch metric may take parameters of its kind, and with "isInputSketch": true its field
holds serialized sketches (as segtool export writes them; base64 in CSV and NDJSON). An
empty, null or missing metric field is null (SQL's and Druid's null handling): sums and
counts skip it, min, max, first and last ignore it, and a row or query group whose values
were all null is null, not 0 (count still counts the row; hyperUnique adds nothing);
input.nullAsZero lists metrics whose missing values read as 0 instead. With "rollup": true,
rows with the same truncated time and dimension values are combined: sums add (doubleSum
exactly, rounded once; count and longSum exactly: a sum that does not fit a 64-bit integer
fails the ingest, naming the metric, never wraps), min and max keep the extreme, first and last keep the value of the
earliest or latest row by its time (ties: the first or last row read), sketches merge.

input.format is ` + FormatNames() + `; --format overrides it. Without either, an input's content
or name decides:
` + recognitionHelp() + formatHelp()

// ParseSpec decodes and validates a spec's JSON. Unknown keys under "timestamp" and "input"
// are errors, and so are unknown schema keys. The defaults are filled in: the time field
// "__time" and the multi-value delimiter "|". Errors wrap ErrSpec (and, for the schema,
// columns.ErrSchema).
func ParseSpec(data []byte) (*Spec, error) {
	// A byte-order mark, as editors on Windows write, is not part of the JSON.
	sp, err := decodeSpec(bytes.TrimPrefix(data, []byte("\ufeff")))
	if err != nil {
		return nil, specErr(err)
	}
	return sp, nil
}

// atOffset places a JSON syntax or type error of data at its line and column (the byte
// offset alone says little in a spec of many lines).
func atOffset(data []byte, err error) error {
	var off int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset - 1 // the byte that was not what the syntax wants
	case errors.As(err, &te):
		off = te.Offset
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		off = int64(len(data))
	default:
		return err
	}
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := 1 + bytes.Count(before, []byte{'\n'})
	col := int64(len(before)) - int64(bytes.LastIndexByte(before, '\n'))
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}

func decodeSpec(data []byte) (*Spec, error) {
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&top); err != nil {
		return nil, atOffset(data, err)
	}
	if dec.More() {
		return nil, errors.New("trailing data after the spec's JSON object")
	}
	if top == nil {
		return nil, errors.New("the spec is null, want a JSON object")
	}
	if err := checkDuplicateKeys(data); err != nil {
		return nil, err
	}
	sp := &Spec{}
	strict := func(key string, into any) error {
		raw, ok := top[key]
		if !ok {
			return nil
		}
		delete(top, key)
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(into); err != nil {
			return fmt.Errorf("%q: %w%s", key, err, suggest.JSONField(err, into))
		}
		return nil
	}
	if err := strict("timestamp", &sp.timestamp); err != nil {
		return nil, err
	}
	if err := strict("input", &sp.input); err != nil {
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
	if sp.timestamp.Field == "" {
		sp.timestamp.Field = columns.TimeColumn
	}
	if sp.input.MultiValueDelimiter == "" {
		sp.input.MultiValueDelimiter = "|"
	}
	if err := sp.validate(); err != nil {
		return nil, err
	}
	return sp, nil
}

// checkDuplicateKeys reports the first key that appears twice in one object of the JSON value
// data, at any depth (encoding/json would silently keep the last). data is valid JSON.
func checkDuplicateKeys(data []byte) error {
	type frame struct {
		object bool
		keys   map[string]bool
		key    string // the object's current key
		index  int    // the array's next index
		path   string
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*frame
	// child returns the path of the value that comes next in the top frame, and moves on.
	child := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.object {
			if f.path == "" {
				return f.key
			}
			return f.path + "." + f.key
		}
		f.index++
		return fmt.Sprintf("%s[%d]", f.path, f.index-1)
	}
	expectKey := func() bool {
		return len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].key == ""
	}
	for {
		if expectKey() {
			tok, err := dec.Token()
			if err != nil {
				return nil // not valid JSON: the decoder reports it
			}
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return nil
				}
				continue
			}
			k, _ := tok.(string)
			f := stack[len(stack)-1]
			if f.keys[k] {
				if f.path == "" {
					return fmt.Errorf("key %q appears twice", k)
				}
				return fmt.Errorf("%s: key %q appears twice", f.path, k)
			}
			f.keys[k] = true
			f.key = k
			continue
		}
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		d, isDelim := tok.(json.Delim)
		if isDelim && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return nil
			}
			continue
		}
		path := child()
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = ""
		}
		if isDelim {
			stack = append(stack, &frame{object: d == '{', keys: map[string]bool{}, path: path})
			continue
		}
		if len(stack) == 0 {
			return nil
		}
	}
}

// UnmarshalJSON implements json.Unmarshaler with ParseSpec.
func (s *Spec) UnmarshalJSON(data []byte) error {
	sp, err := ParseSpec(data)
	if err != nil {
		return err
	}
	*s = *sp
	return nil
}

// MarshalJSON implements json.Marshaler: the schema's keys, plus "timestamp" and "input"
// unless they are zero. ParseSpec reads it back.
func (s Spec) MarshalJSON() ([]byte, error) {
	schema, err := json.Marshal(s.Schema)
	if err != nil {
		return nil, fmt.Errorf("ingest: spec: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(schema, &top); err != nil {
		return nil, fmt.Errorf("ingest: spec: %w", err)
	}
	if s.timestamp != (timestampSpec{}) {
		if top["timestamp"], err = json.Marshal(s.timestamp); err != nil {
			return nil, fmt.Errorf("ingest: spec: %w", err)
		}
	}
	in := s.input
	if in.Format != "" || in.Delimiter != "" || in.MultiValueDelimiter != "" || in.NullValue != nil || len(in.Fields) > 0 || len(in.NullAsZero) > 0 || in.MaxRecordBytes != 0 {
		if top["input"], err = json.Marshal(in); err != nil {
			return nil, fmt.Errorf("ingest: spec: %w", err)
		}
	}
	return json.Marshal(top)
}

// Validate reports the first problem of the spec: an invalid schema, an unknown time or input
// format, a delimiter that is not one character, input.fields naming a column that is not a
// dimension. Errors wrap ErrSpec.
func (s *Spec) Validate() error {
	if err := s.Schema.Validate(); err != nil {
		return specErr(err)
	}
	return specErr(s.validate())
}

func (s *Spec) validate() error {
	if _, err := timeParser(s.timestamp.Format); err != nil {
		return err
	}
	if f := s.input.Format; f != "" && lookupFormat(f) == nil {
		return fmt.Errorf("input.format %q: want %s", f, FormatNames())
	}
	if d := s.input.Delimiter; d != "" {
		r, n := utf8.DecodeRuneInString(d)
		if n != len(d) || r == '"' || r == '\r' || r == '\n' || r == utf8.RuneError || r == 0 {
			return fmt.Errorf("input.delimiter %q: want one character other than a quote or newline", d)
		}
	}
	if s.input.MaxRecordBytes < 0 {
		return fmt.Errorf("input.maxRecordBytes %d: want a positive number of bytes (0: the default)", s.input.MaxRecordBytes)
	}
	for col := range s.input.Fields {
		if s.Schema.Dimension(col) < 0 {
			return fmt.Errorf("input.fields: %q is not a dimension of the schema", col)
		}
	}
	seen := map[string]bool{}
	for _, name := range s.input.NullAsZero {
		i := s.Schema.Metric(name)
		if i < 0 {
			return fmt.Errorf("input.nullAsZero: %q is not a metric of the schema", name)
		}
		if m := s.Schema.Metrics[i]; !m.Agg().Nullable() {
			return fmt.Errorf("input.nullAsZero: metric %q (%s) has no null value: want a long or double metric other than count", name, m.Aggregator)
		}
		if seen[name] {
			return fmt.Errorf("input.nullAsZero: %q listed twice", name)
		}
		seen[name] = true
	}
	return nil
}

// nullAsZero reports whether metric m's missing values read as 0 (inputSpec.NullAsZero)
// rather than null.
func (s *Spec) nullAsZero(m columns.Metric) bool {
	for _, name := range s.input.NullAsZero {
		if name == m.Name {
			return true
		}
	}
	return false
}

// newRow returns a row shaped for the spec's schema, for a Reader's Read.
func (s *Spec) newRow() columns.Row {
	return columns.Row{Dims: make([][]string, len(s.Schema.Dimensions)), Metrics: make([]columns.Value, len(s.Schema.Metrics))}
}

// dimensionField returns the input field dimension d is read from.
func (s *Spec) dimensionField(d columns.Dimension) string {
	if f, ok := s.input.Fields[d.Name]; ok && f != "" {
		return f
	}
	return d.Name
}

// metricField returns the input field metric m is read from, or "" when it reads none: count,
// and hyperUnique over a dimension (its fieldName names a dimension of the schema, whose values
// the merger's Builder adds to the row's sketch).
func (s *Spec) metricField(m columns.Metric) string {
	if m.Agg().CountsRows {
		return ""
	}
	f := m.Field
	if f == "" {
		f = m.Name
	}
	if m.Agg().Kind == agg.Union && !m.InputSketch && s.Schema.Dimension(f) >= 0 {
		return ""
	}
	return f
}

// aggNames lists the aggregators of values of type t that read an input field, from the
// aggregator table: adding an aggregator there adds it here.
func aggNames(t agg.Type) string {
	var names []string
	for _, a := range agg.All() {
		if a.Type == t && !a.CountsRows {
			names = append(names, a.Name)
		}
	}
	return strings.Join(names, "/")
}

// timeParser returns the parser of a timestamp format (see SpecHelp).
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

// parseEpoch parses a decimal integer, or when mul > 1 (seconds) a decimal number without an
// exponent (see parseDecimal), as a count of mul/div milliseconds: the result is value*mul/div milliseconds,
// rounded down, exactly (no floating point). A value out of the int64 range is an error.
func parseEpoch(s string, mul, div int64) (int64, error) {
	v, ok := parseInt10(s)
	var err error
	if !ok {
		v, err = strconv.ParseInt(s, 10, 64)
	}
	if err == nil {
		if mul > 1 && (v > math.MaxInt64/mul || v < math.MinInt64/mul) {
			return 0, fmt.Errorf("time %s out of range", s)
		}
		return floorDiv(v*mul, div), nil
	}
	d, ok := parseDecimal(s)
	if mul == 1 {
		if ok && errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("time %s out of range", s)
		}
		return 0, fmt.Errorf("not an integer time: %q", s)
	}
	if !ok || strings.ContainsAny(s, "eE") {
		return 0, fmt.Errorf("not an integer time: %q", s)
	}
	if d.digits == "" {
		return 0, nil
	}
	if int64(len(d.digits))+d.exp > 40 {
		return 0, fmt.Errorf("time %s out of range", s)
	}
	if int64(len(d.digits))+d.exp < -40 { // |value| < 1e-40: rounds down to 0 or -1
		if d.neg {
			return -1, nil
		}
		return 0, nil
	}
	num, ok := new(big.Int).SetString(d.digits, 10)
	if !ok {
		return 0, fmt.Errorf("not a number: %q", s)
	}
	if d.neg {
		num.Neg(num)
	}
	num.Mul(num, big.NewInt(mul))
	den := big.NewInt(div)
	ten := big.NewInt(10)
	if d.exp > 0 {
		num.Mul(num, new(big.Int).Exp(ten, big.NewInt(d.exp), nil))
	} else if d.exp < 0 {
		den.Mul(den, new(big.Int).Exp(ten, big.NewInt(-d.exp), nil))
	}
	q := new(big.Int).Div(num, den) // Euclidean: rounds down for a positive denominator
	if !q.IsInt64() {
		return 0, fmt.Errorf("time %s out of range", s)
	}
	return q.Int64(), nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
