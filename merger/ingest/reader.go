package ingest

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/axiomhq/hyperloglog"

	"github.com/writeout/writeout/columns"
)

// A Reader reads the rows of one input as columns.Row values shaped by a spec's schema, ready
// for merger.Builder.Add.
type Reader interface {
	// Read parses the next row into row: nil, io.EOF at the end, a *RowError (wrapping ErrRow)
	// for a row that does not parse, after which reading can go on, or another error, which
	// ends the input (wrapping ErrInput, or the underlying reader's error).
	//
	// row should come from Spec.NewRow (Read reshapes it otherwise). Read reuses its slices
	// and its sketches from row to row; the strings it stores are never overwritten and may be
	// kept. Time is the input's time in epoch milliseconds, not truncated to the granularity
	// (the Builder truncates it). Metrics hold Long for count (1) and the long aggregators,
	// Double for the double ones, and for hyperUnique metrics that read an input field a
	// sketch of the field's value (nil when the field is null or empty); a hyperUnique metric
	// over a dimension has a nil Sketch, the Builder derives it.
	Read(row *columns.Row) error
}

// RowError is a row that does not parse. Its message is FILE:LINE: column NAME: reason, or
// FILE:LINE: reason for a row malformed as a whole. It wraps ErrRow.
type RowError struct {
	File   string // the input's name
	Line   int    // the row's line, from 1
	Column string // the column (or the time field) at fault; empty for the row as a whole
	Reason string
}

func (e *RowError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("%s:%d: column %s: %s", e.File, e.Line, e.Column, e.Reason)
}

// Unwrap returns ErrRow.
func (e *RowError) Unwrap() error { return ErrRow }

// inputErr is an ErrInput error with the message text.
func inputErr(format string, args ...any) error {
	e := fmt.Errorf(format, args...)
	return &wrapped{msg: e.Error(), kind: ErrInput, cause: errors.Unwrap(e)}
}

// FormatOf returns the format an input's name says by its extension: .csv is CSV, .ndjson,
// .jsonl and .json are NDJSON, each optionally followed by .gz (case does not matter).
func FormatOf(name string) (Format, bool) {
	p := strings.TrimSuffix(strings.ToLower(name), ".gz")
	switch {
	case strings.HasSuffix(p, ".csv"):
		return CSV, true
	case strings.HasSuffix(p, ".ndjson"), strings.HasSuffix(p, ".jsonl"), strings.HasSuffix(p, ".json"):
		return NDJSON, true
	}
	return "", false
}

// NewReader returns the reader of format (csv or ndjson) over r; name names the input in
// messages. It validates the spec first. A CSV reader reads the header line at once: its
// errors come from here.
func NewReader(sp *Spec, format Format, name string, r io.Reader) (Reader, error) {
	switch format {
	case CSV:
		return NewCSVReader(sp, name, r)
	case NDJSON:
		return NewNDJSONReader(sp, name, r)
	}
	return nil, fmt.Errorf("%w: unknown input format %q (want csv or ndjson)", ErrInvalid, format)
}

// OpenFile opens the file at path for reading, through gzip when its name ends in .gz. Its
// errors are os.Open's, or name the file.
func OpenFile(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 256<<10)
	if !strings.HasSuffix(strings.ToLower(path), ".gz") {
		return readCloser{br, f.Close}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return readCloser{zr, func() error { return errors.Join(zr.Close(), f.Close()) }}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// metricKind is how a reader fills one metric.
type metricKind uint8

const (
	metCount metricKind = iota
	metLong
	metDouble
	metSketch // hyperUnique from an input field
	metNone   // hyperUnique over a dimension: the Builder fills it
)

// fieldParser turns the text of fields into a row, shared by the formats.
type fieldParser struct {
	sp        *Spec
	file      string
	line      int
	parseTime func(string) (int64, error)
	timeField string
	dimFields []string
	metFields []string // "" for count and hyperUnique over a dimension
	kinds     []metricKind
	sketches  []*hyperloglog.Sketch // scratch sketch of each metSketch metric
}

func newFieldParser(sp *Spec, name string) (fieldParser, error) {
	if err := sp.Validate(); err != nil {
		return fieldParser{}, err
	}
	p := fieldParser{sp: sp, file: name, timeField: sp.Timestamp.Field}
	if p.timeField == "" {
		p.timeField = columns.TimeColumn
	}
	var err error
	if p.parseTime, err = timeParser(sp.Timestamp.Format); err != nil {
		return fieldParser{}, specErr(err)
	}
	for _, d := range sp.Schema.Dimensions {
		p.dimFields = append(p.dimFields, sp.DimensionField(d))
	}
	p.sketches = make([]*hyperloglog.Sketch, len(sp.Schema.Metrics))
	for i, m := range sp.Schema.Metrics {
		f := sp.MetricField(m)
		p.metFields = append(p.metFields, f)
		k := metCount
		switch {
		case m.Agg().CountsRows:
		case m.ValueType() == columns.MetricLong:
			k = metLong
		case m.ValueType() == columns.MetricDouble:
			k = metDouble
		case f == "":
			k = metNone
		default:
			k = metSketch
			p.sketches[i] = hyperloglog.New()
		}
		p.kinds = append(p.kinds, k)
	}
	return p, nil
}

// shape makes row fit the schema.
func (p *fieldParser) shape(row *columns.Row) {
	if len(row.Dims) != len(p.dimFields) {
		row.Dims = make([][]string, len(p.dimFields))
	}
	if len(row.Metrics) != len(p.kinds) {
		row.Metrics = make([]columns.Value, len(p.kinds))
	}
}

func (p *fieldParser) errf(column, format string, args ...any) *RowError {
	return &RowError{File: p.file, Line: p.line, Column: column, Reason: fmt.Sprintf(format, args...)}
}

func (p *fieldParser) setTime(row *columns.Row, s string, null bool) error {
	if null || s == "" {
		return p.errf(p.timeField, "missing time")
	}
	t, err := p.parseTime(s)
	if err != nil {
		return p.errf(p.timeField, "%v", err)
	}
	row.Time = t
	return nil
}

// checkValues rejects a dimension value longer than a segment holds.
func (p *fieldParser) checkValues(d int, v []string) error {
	for _, s := range v {
		if len(s) > columns.MaxValueBytes {
			return p.errf(p.sp.Schema.Dimensions[d].Name, "value of %d bytes, at most %d", len(s), columns.MaxValueBytes)
		}
	}
	return nil
}

// setMetric parses metric i from its field's text; empty (or null) reads as 0.
func (p *fieldParser) setMetric(row *columns.Row, i int, s string, null bool) error {
	v := &row.Metrics[i]
	*v = columns.Value{}
	switch p.kinds[i] {
	case metCount:
		v.Long = 1
		return nil
	case metNone:
		return nil
	case metLong, metDouble, metSketch: // parsed below
	}
	if null || s == "" {
		return nil
	}
	switch p.kinds[i] {
	case metLong:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			f, ferr := strconv.ParseFloat(s, 64)
			if ferr != nil || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
				return p.errf(p.sp.Schema.Metrics[i].Name, "not an integer: %q", s)
			}
			n = int64(f)
		}
		v.Long = n
	case metDouble:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return p.errf(p.sp.Schema.Metrics[i].Name, "not a finite number: %q", s)
		}
		v.Double = f
	case metSketch:
		sk := p.sketches[i]
		sk.Reset()
		sk.Insert([]byte(s))
		v.Sketch = sk
	case metCount, metNone: // set above
	}
	return nil
}
