package gen

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// CSVOptions configures CSV output. The zero value writes RFC 4180 CSV with
// a header line, ',' between fields, '|' between the values of a
// multi-value cell, and an empty field for null.
type CSVOptions struct {
	// Comma separates fields; 0 means ','. It must be a valid rune other
	// than '"', '\r', '\n' and utf8.RuneError.
	Comma rune
	// MultiDelimiter joins the values of a multi-value cell; "" means "|".
	MultiDelimiter string
	// Null is the text of a null value and of a null element; "" (the
	// default) makes a null an empty field or an empty element.
	Null string
	// NoHeader leaves out the header line of column names.
	NoHeader bool
}

func (o *CSVOptions) ensureDefaults() error {
	if o.Comma == 0 {
		o.Comma = ','
	}
	if o.MultiDelimiter == "" {
		o.MultiDelimiter = "|"
	}
	if !utf8.ValidRune(o.Comma) || o.Comma == utf8.RuneError || o.Comma == '"' || o.Comma == '\r' || o.Comma == '\n' {
		return fmt.Errorf("gen: csv: field separator %q: %w", o.Comma, ErrInvalid)
	}
	return nil
}

// WriteCSV writes every remaining row of g to w as CSV with the default
// CSVOptions. See CSVOptions.Write for the format.
func WriteCSV(w io.Writer, g Generator) error { return CSVOptions{}.Write(w, g) }

// Write writes every remaining row of g to w as CSV, one line per row, the
// columns in Schema order under a header of their names:
//   - __time is the integer milliseconds since the Unix epoch;
//   - a Long is an integer, a Double the shortest decimal that reads back
//     as the same float64 (strconv 'g' format);
//   - a multi-value cell joins its values with MultiDelimiter (an empty
//     list is an empty field, as is a null unless Null says otherwise);
//   - a field is quoted, with quotes doubled, when it holds Comma, '"',
//     '\r' or '\n' or starts with a space.
//
// With the defaults a null and the empty string look alike, and so do an
// empty list and a list of one null element; the generators never produce
// empty strings or empty lists, so for their output the text is exact. A
// value equal to Null, or a multi-value element holding MultiDelimiter, is
// reported as an error wrapping ErrInvalid rather than written ambiguously.
// Write errors are returned wrapped.
func (o CSVOptions) Write(w io.Writer, g Generator) error {
	if err := o.ensureDefaults(); err != nil {
		return err
	}
	schema := g.Schema()
	bw := bufio.NewWriterSize(w, 64<<10)
	comma := utf8.AppendRune(nil, o.Comma)
	var line, scratch []byte
	if !o.NoHeader {
		for k, c := range schema {
			if k > 0 {
				line = append(line, comma...)
			}
			start := len(line)
			line = append(line, c.Name...)
			line, scratch = quoteIfNeeded(line, start, o.Comma, scratch)
		}
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("gen: write csv: %w", err)
		}
	}
	var r Row
	for g.Next(&r) {
		line = line[:0]
		for k, c := range schema {
			if k > 0 {
				line = append(line, comma...)
			}
			start := len(line)
			switch c.Kind {
			case Time:
				line = strconv.AppendInt(line, r.Time, 10)
				continue
			case Long:
				line = strconv.AppendInt(line, r.Longs[c.Slot], 10)
				continue
			case Double:
				line = strconv.AppendFloat(line, r.Doubles[c.Slot], 'g', -1, 64)
				continue
			case Sketch:
				return fmt.Errorf("gen: write csv: column %q: a sketch is an aggregator's kind, never a row's: %w", c.Name, ErrInvalid)
			case String:
				sv := &r.Strings[c.Slot]
				if sv.Null {
					line = append(line, o.Null...)
					break
				}
				for j, v := range sv.Values {
					if j > 0 {
						line = append(line, o.MultiDelimiter...)
					}
					if sv.IsNullAt(j) {
						line = append(line, o.Null...)
						continue
					}
					if v == o.Null {
						return fmt.Errorf("gen: write csv: column %q: value %q reads as null: %w", c.Name, v, ErrInvalid)
					}
					if c.MultiValue && strings.Contains(v, o.MultiDelimiter) {
						return fmt.Errorf("gen: write csv: column %q: value %q holds the multi-value delimiter %q: %w",
							c.Name, v, o.MultiDelimiter, ErrInvalid)
					}
					line = append(line, v...)
				}
			}
			line, scratch = quoteIfNeeded(line, start, o.Comma, scratch)
		}
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("gen: write csv: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gen: write csv: %w", err)
	}
	return nil
}

// quoteIfNeeded quotes the field line[start:] in place when it holds comma,
// '"', '\r' or '\n' or starts with a space, doubling its quotes. scratch is
// a reusable buffer; both slices are returned for reuse.
func quoteIfNeeded(line []byte, start int, comma rune, scratch []byte) ([]byte, []byte) {
	f := line[start:]
	quote := len(f) > 0 && f[0] == ' '
	if !quote {
		if comma < utf8.RuneSelf {
			for _, c := range f {
				if c == byte(comma) || c == '"' || c == '\r' || c == '\n' {
					quote = true
					break
				}
			}
		} else {
			quote = bytes.ContainsAny(f, "\"\r\n") || bytes.ContainsRune(f, comma)
		}
	}
	if !quote {
		return line, scratch
	}
	scratch = append(scratch[:0], f...)
	line = append(line[:start], '"')
	for _, c := range scratch {
		if c == '"' {
			line = append(line, '"')
		}
		line = append(line, c)
	}
	return append(line, '"'), scratch
}

// WriteNDJSON writes every remaining row of g to w as newline-delimited
// JSON: one object per line, its keys the column names in Schema order.
//   - __time is the integer milliseconds since the Unix epoch;
//   - a Long is a JSON integer, a Double the shortest decimal that reads
//     back as the same float64 (a NaN or an infinity is an error wrapping
//     ErrInvalid: JSON has no such numbers);
//   - a single-value String column is a JSON string, or null;
//   - a multi-value String column is always a JSON array (even of one
//     value) whose null elements are null, or null when the row is null.
//
// Strings are escaped as JSON requires; invalid UTF-8 becomes U+FFFD.
// Write errors are returned wrapped.
func WriteNDJSON(w io.Writer, g Generator) error {
	schema := g.Schema()
	keys := make([][]byte, len(schema))
	for k, c := range schema {
		if k > 0 {
			keys[k] = append(keys[k], ',')
		}
		keys[k] = appendJSONString(keys[k], c.Name)
		keys[k] = append(keys[k], ':')
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var line []byte
	var r Row
	for g.Next(&r) {
		line = append(line[:0], '{')
		for k, c := range schema {
			line = append(line, keys[k]...)
			switch c.Kind {
			case Time:
				line = strconv.AppendInt(line, r.Time, 10)
			case Long:
				line = strconv.AppendInt(line, r.Longs[c.Slot], 10)
			case Double:
				f := r.Doubles[c.Slot]
				if math.IsNaN(f) || math.IsInf(f, 0) {
					return fmt.Errorf("gen: write ndjson: column %q: %v is not a JSON number: %w", c.Name, f, ErrInvalid)
				}
				line = strconv.AppendFloat(line, f, 'g', -1, 64)
			case Sketch:
				return fmt.Errorf("gen: write ndjson: column %q: a sketch is an aggregator's kind, never a row's: %w", c.Name, ErrInvalid)
			case String:
				sv := &r.Strings[c.Slot]
				switch {
				case sv.Null:
					line = append(line, "null"...)
				case c.MultiValue:
					line = append(line, '[')
					for j, v := range sv.Values {
						if j > 0 {
							line = append(line, ',')
						}
						if sv.IsNullAt(j) {
							line = append(line, "null"...)
						} else {
							line = appendJSONString(line, v)
						}
					}
					line = append(line, ']')
				case len(sv.Values) == 0:
					line = append(line, "null"...)
				default:
					line = appendJSONString(line, sv.Values[0])
				}
			}
		}
		line = append(line, '}', '\n')
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("gen: write ndjson: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gen: write ndjson: %w", err)
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\\ufffd"...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
