package ingest

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/writeout/writeout/columns"
)

// CSVReader reads CSV whose first line is a header of field names (see SpecHelp).
type CSVReader struct {
	fieldParser
	cr        *csv.Reader
	timeIdx   int
	dimIdx    []int
	metricIdx []int // -1: no field
	null      string
	multi     string
	nfields   int
}

// NewCSVReader returns a reader of the CSV in r, named name in messages, and reads its header
// line: a header that is missing, malformed, names a field twice or lacks a field the spec
// reads is an error wrapping ErrInput (or the spec's error, wrapping ErrSpec).
func NewCSVReader(sp *Spec, name string, r io.Reader) (*CSVReader, error) {
	p, err := newFieldParser(sp, name)
	if err != nil {
		return nil, err
	}
	cr := csv.NewReader(bufio.NewReaderSize(r, 64<<10))
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	if sp.Input.Delimiter != "" {
		cr.Comma = []rune(sp.Input.Delimiter)[0]
	}
	header, err := cr.Read()
	if err == io.EOF {
		return nil, inputErr("%s: empty file, want a header line of field names", name)
	}
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, inputErr("%s: header: %w", name, err)
		}
		return nil, fmt.Errorf("%s: header: %w", name, err)
	}
	index := make(map[string]int, len(header))
	for i, h := range header {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff") // a byte-order mark before the first name
		}
		if _, dup := index[h]; dup {
			return nil, inputErr("%s:1: field %q appears twice in the header", name, h)
		}
		index[h] = i
	}
	find := func(what, field string) (int, error) {
		i, ok := index[field]
		if !ok {
			return 0, inputErr("%s:1: %s: field %q is not in the header", name, what, field)
		}
		return i, nil
	}
	p.line = 1
	x := &CSVReader{fieldParser: p, cr: cr, nfields: len(header), multi: sp.Input.MultiValueDelimiter}
	if x.multi == "" {
		x.multi = "|"
	}
	if sp.Input.NullValue != nil {
		x.null = *sp.Input.NullValue
	}
	if x.timeIdx, err = find("timestamp", p.timeField); err != nil {
		return nil, err
	}
	for i, d := range sp.Schema.Dimensions {
		k, err := find("dimension "+d.Name, p.dimFields[i])
		if err != nil {
			return nil, err
		}
		x.dimIdx = append(x.dimIdx, k)
	}
	for i, m := range sp.Schema.Metrics {
		k := -1
		if f := p.metFields[i]; f != "" {
			if k, err = find("metric "+m.Name, f); err != nil {
				return nil, err
			}
		}
		x.metricIdx = append(x.metricIdx, k)
	}
	return x, nil
}

// Read implements Reader.
func (x *CSVReader) Read(row *columns.Row) error {
	rec, err := x.cr.Read()
	if err != nil {
		if err == io.EOF {
			return io.EOF
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			x.line = pe.StartLine
			return &RowError{File: x.file, Line: pe.Line, Reason: "malformed CSV: " + pe.Err.Error()}
		}
		return fmt.Errorf("%s: %w", x.file, err)
	}
	x.line, _ = x.cr.FieldPos(0)
	if len(rec) != x.nfields {
		return x.errf("", "%d fields, the header has %d", len(rec), x.nfields)
	}
	x.shape(row)
	if err := x.setTime(row, rec[x.timeIdx], rec[x.timeIdx] == x.null); err != nil {
		return err
	}
	for i, d := range x.sp.Schema.Dimensions {
		s := rec[x.dimIdx[i]]
		v := row.Dims[i][:0]
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
		row.Dims[i] = v
		if err := x.checkValues(i, v); err != nil {
			return err
		}
	}
	for i, j := range x.metricIdx {
		s := ""
		if j >= 0 {
			s = rec[j]
		}
		if err := x.setMetric(row, i, s, s == x.null); err != nil {
			return err
		}
	}
	return nil
}
