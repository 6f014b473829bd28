package ingest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strings"
	"unsafe"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/suggest"
)

// csvReader reads CSV whose first line is a header of field names (see SpecHelp).
//
// Its syntax is RFC 4180's, as encoding/csv reads it without LazyQuotes: fields separated by
// the delimiter, quoted fields ("" is a quote) that may hold delimiters and newlines, \r\n
// read as \n, empty lines skipped. A record that is not well formed (a bare quote in an
// unquoted field, a quote that does not end its field, a quoted field still open at the end
// of the input), and a record over several lines with a wrong number of fields, is a
// *RowError naming the line where the record starts, and reading goes on at the line after
// that one: an unmatched quote costs its own line, not the rest of the input. A record is
// at most the spec's input.maxRecordBytes long (all its lines, line endings included): a longer record of several
// lines is a *RowError as above, a single line that long ends the input (ErrInput). A quoted
// field over more than longQuoteLines lines, or over longQuoteBytes bytes on several lines,
// is read as RFC 4180 says but gets a warning at the end of the input (see longQuote).
type csvReader struct {
	fieldParser
	sc        csvScanner
	timeIdx   int
	header    []string // the header's field names
	dimIdx    []int
	metricIdx []int // -1: no field
	null      string
	multi     string
	nfields   int
	// The quoted fields of the records read that span more than longQuoteLines lines or
	// longQuoteBytes bytes over several lines: their number, and the first.
	longQuotes int
	firstQuote longQuote
}

// A quoted field that spans more than longQuoteLines lines, or more than longQuoteBytes
// bytes over two lines or more, is RFC 4180 CSV but most likely an unmatched quote that folds
// the rows after it into one field: the input gets a warning naming the line where the first
// such field opened, and how many more there are.
const (
	longQuoteLines = 4
	longQuoteBytes = 64 << 10
)

// longQuote is a long quoted field: the line where it opened, its field's index, its lines
// and bytes.
type longQuote struct {
	line, field, lines, bytes int
}

// warnLongQuotes gives the input's warning of its long quoted fields, once, at its end.
func (x *csvReader) warnLongQuotes() {
	if x.longQuotes == 0 || x.onWarning == nil {
		x.longQuotes = 0
		return
	}
	q, more := x.firstQuote, x.longQuotes-1
	x.longQuotes = 0
	column := ""
	if q.field < len(x.header) {
		column = x.header[q.field]
	}
	msg := fmt.Sprintf("a quoted field opened on this line spans %d lines (%d bytes): the rows on those lines are one field of one record; is a quote unmatched?", q.lines, q.bytes)
	if more > 0 {
		msg += fmt.Sprintf(" (and %d more quoted fields over more than %d lines or %d KiB)", more, longQuoteLines, longQuoteBytes>>10)
	}
	x.onWarning(Warning{file: x.file, line: q.line, column: column, message: msg})
}

// CSV is the name of the CSV format.
const CSV Format = "csv"

var csvFormat = inputFormat{
	name:  CSV,
	title: "CSV",
	exts:  []string{".csv"},
	gzip:  true,
	newReader: func(pl *plan, name string, src io.Reader, opts readerOptions) (reader, error) {
		return newCSVReader(pl, name, src, opts)
	},
	help: `CSV: the first line is the header of field names; input.delimiter separates fields (default
","); a multi-value cell is split on input.multiValueDelimiter (default "|"); a field equal
to input.nullValue (default: the empty field) is null. An empty element of a multi-value cell
is the empty string. A quoted field over more than 4 lines (or over 64 KiB on several lines)
gets a warning naming the line where it opened: most likely an unmatched quote.`,
}

// newCSVReader returns a reader of the CSV in r, named name in messages, and reads its header
// line: a header that is missing, malformed, names a field twice or lacks a field the spec
// reads is an error wrapping ErrInput. A byte-order mark at the start is skipped.
func newCSVReader(pl *plan, name string, r io.Reader, opts readerOptions) (*csvReader, error) {
	p := newFieldParser(pl, name, opts)
	sp := pl.sp
	comma := ","
	if sp.input.Delimiter != "" {
		comma = string([]rune(sp.input.Delimiter)[0])
	}
	x := &csvReader{fieldParser: p, multi: sp.input.MultiValueDelimiter,
		sc: csvScanner{br: newInput(opts.Context, r), file: name, comma: []byte(comma), commaS: comma, max: pl.maxRecord}}
	header, err := x.sc.next()
	if err != nil {
		var re *RowError
		switch {
		case err == io.EOF:
			return nil, inputErr("%s: empty file, want a header line of field names", name)
		case errors.As(err, &re):
			return nil, inputErr("%s:%d: header: %s", name, re.Line, re.Reason)
		case errors.Is(err, ErrInput):
			return nil, err
		}
		var c *cancelled
		if errors.As(err, &c) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: header: %w", name, err)
	}
	x.header = append([]string(nil), header...)
	index := make(map[string]int, len(header))
	for i, h := range header {
		if _, dup := index[h]; dup {
			return nil, inputErr("%s:%d: field %q appears twice in the header", name, x.sc.start, h)
		}
		index[h] = i
	}
	find := func(what, field string) (int, error) {
		i, ok := index[field]
		if !ok {
			return 0, inputErr("%s:%d: %s: field %q is not in the header%s", name, x.sc.start, what, field, suggest.Hint(field, header))
		}
		return i, nil
	}
	x.line = x.sc.line
	x.nfields = len(header)
	if x.multi == "" {
		x.multi = "|"
	}
	if sp.input.NullValue != nil {
		x.null = *sp.input.NullValue
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
			var ok bool
			if k, ok = index[f]; !ok {
				// A missing column is a missing value in every row: null (0 for a metric
				// of input.nullAsZero; a sketch adds nothing), as NDJSON's missing keys.
				k = -1
				if p.onWarning != nil {
					p.onWarning(Warning{file: name, line: x.sc.start, column: m.Name,
						message: fmt.Sprintf("field %q is not in the header%s: every value of metric %s is missing", f, suggest.Hint(f, header), m.Name)})
				}
			}
		}
		x.metricIdx = append(x.metricIdx, k)
	}
	return x, nil
}

// Read implements Reader.
func (x *csvReader) Read(row *columns.Row) error {
	rec, err := x.sc.next()
	if err != nil {
		var re *RowError
		switch {
		case err == io.EOF:
			x.warnLongQuotes()
			return io.EOF
		case errors.As(err, &re):
			x.line = re.Line
			return re
		case errors.Is(err, ErrInput):
			x.warnLongQuotes()
			return err
		}
		return readErr(x.file, err)
	}
	x.line = x.sc.start
	if len(rec) != x.nfields {
		if x.sc.line > x.sc.start {
			// Most likely a quote out of place: the lines after the first are read again.
			end := x.sc.line
			x.sc.rewind()
			return x.errf("", "%d fields, the header has %d (a record over lines %d-%d: is a quote unmatched?)", len(rec), x.nfields, x.sc.start, end)
		}
		return x.errf("", "%d fields, the header has %d", len(rec), x.nfields)
	}
	if q := x.sc.recQuote; q.lines > 0 {
		if x.longQuotes == 0 {
			x.firstQuote = q
		}
		x.longQuotes++
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
				if len(v) > maxRowValues {
					break
				}
			}
		default:
			v = append(v, s)
		}
		row.Dims[i] = v
		if d.MultiValue || len(s) > columns.MaxValueBytes { // one value: checked here, without a call
			if err := x.checkValues(i, v); err != nil {
				return err
			}
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

// csvScanner splits CSV into records. It keeps the lines of the record it reads, so that
// after a malformed record it can read again from the line after the record's first.
type csvScanner struct {
	br      *bufio.Reader
	pending []byte // bytes read past the position, to be read before br's
	file    string
	comma   []byte
	commaS  string // comma as a string
	max     int    // the most bytes of a record
	line    int    // lines read
	start   int    // the line of the record read last
	raw     []byte // the lines of the record, as read
	first   int    // the bytes of raw in the record's first line; 0 while it is read
	fields  []byte // the fields of the record, unquoted, one after the other
	ends    []int  // where each field ends in fields
	rec     []string
	// block holds whole lines taken from br at once, as one string, for the records of one
	// line without quotes (fast); the other records read it through pending.
	block string
	ring  blockRing
	// recQuote is the first long quoted field of the record read last (see longQuote), or
	// the zero value.
	recQuote longQuote
}

// errTooLong is a record over the limit, as readLine returns it.
var errTooLong = errors.New("record too long")

// readLine appends the next line, its newline included, to raw and returns it (a slice of
// raw). At the end of the input it returns what is left (maybe nothing) and io.EOF. A line
// that brings raw over the record limit gives errTooLong.
func (s *csvScanner) readLine() ([]byte, error) {
	start := len(s.raw)
	for {
		if len(s.pending) > 0 {
			if i := bytes.IndexByte(s.pending, '\n'); i >= 0 {
				s.raw = append(s.raw, s.pending[:i+1]...)
				s.pending = s.pending[i+1:]
				if len(s.raw) > s.max {
					return nil, errTooLong
				}
				return s.raw[start:], nil
			}
			s.raw = append(s.raw, s.pending...)
			s.pending = nil
		}
		frag, err := s.br.ReadSlice('\n')
		s.raw = append(s.raw, frag...)
		if len(s.raw) > s.max {
			return nil, errTooLong
		}
		switch err {
		case nil:
			return s.raw[start:], nil
		case bufio.ErrBufferFull:
			continue
		}
		return s.raw[start:], err
	}
}

// content returns line without its line ending: \n, \r\n, or a \r at the end of the input.
func content(line []byte, eof bool) []byte {
	n := len(line)
	switch {
	case n > 0 && line[n-1] == '\n':
		n--
		if n > 0 && line[n-1] == '\r' {
			n--
		}
	case eof && n > 0 && line[n-1] == '\r':
		n--
	}
	return line[:n]
}

// rewind makes the lines of the record after its first the next to read.
func (s *csvScanner) rewind() {
	if len(s.raw) > s.first {
		p := make([]byte, 0, len(s.raw)-s.first+len(s.pending))
		p = append(p, s.raw[s.first:]...)
		s.pending = append(p, s.pending...)
	}
	s.line = s.start
	s.shrink()
}

// shrink lets a large record's buffers go.
func (s *csvScanner) shrink() {
	if cap(s.raw) > 1<<20 {
		s.raw = nil
	}
	if cap(s.fields) > 1<<20 {
		s.fields = nil
	}
}

// malformed is a record that is not well formed: its lines after the first are read again.
func (s *csvScanner) malformed(reason string) error {
	if s.line != s.start {
		reason += fmt.Sprintf(" (line %d)", s.line)
	}
	s.rewind()
	return &RowError{File: s.file, Line: s.start, Reason: "malformed CSV: " + reason}
}

// tooLong is the error of a record over the limit.
func (s *csvScanner) tooLong() error {
	if s.first == 0 { // its first line: reading cannot go on
		s.raw = nil
		return inputErr("%s:%d: line longer than %d bytes (input.maxRecordBytes, --max-record-bytes)", s.file, s.line+1, s.max)
	}
	s.line++ // the line that passes the limit
	return s.malformed(fmt.Sprintf("record longer than %d bytes (input.maxRecordBytes, --max-record-bytes): is a quote unmatched?", s.max))
}

// fast reads the next record when it is one line without a quote, the common case, with
// fewer copies than next's general path: it takes every whole line in br's buffer as one
// string (one allocation for many records, whose fields are slices of it) and splits the
// line at the delimiters. Empty lines are skipped as next skips them. At a line it does not
// read (a quote, over the record limit) it hands the rest of the block to the general path
// through pending and returns false, as it does when br holds no whole line.
func (s *csvScanner) fast() ([]string, bool) {
	if len(s.pending) > 0 {
		return nil, false
	}
	for {
		if len(s.block) == 0 {
			buf, _ := s.br.Peek(s.br.Buffered())
			i := bytes.LastIndexByte(buf, '\n')
			if i < 0 {
				return nil, false
			}
			s.block = s.ring.take(buf[:i+1])
			_, _ = s.br.Discard(i + 1)
		}
		if s.commaS == "" {
			s.commaS = string(s.comma)
		}
		if c := s.commaS; len(c) == 1 && c[0] != '\n' && c[0] != '\r' && c[0] != '"' { // (Spec.Validate refuses those)
			rec, ok, skip := s.fastByte()
			if skip {
				continue
			}
			return rec, ok
		}
		i := strings.IndexByte(s.block, '\n')
		line := s.block[:i+1]
		if len(line) > s.max || strings.IndexByte(line, '"') >= 0 {
			s.pending = []byte(s.block)
			s.block = ""
			return nil, false
		}
		s.block = s.block[i+1:]
		s.line++
		cur := line[:i]
		if len(cur) > 0 && cur[len(cur)-1] == '\r' {
			cur = cur[:len(cur)-1]
		}
		if len(cur) == 0 {
			continue // an empty line
		}
		s.start, s.raw, s.first = s.line, s.raw[:0], 0
		s.rec = s.rec[:0]
		comma := s.commaS
		for {
			k := strings.Index(cur, comma)
			if k < 0 {
				s.rec = append(s.rec, cur)
				return s.rec, true
			}
			s.rec = append(s.rec, cur[:k])
			cur = cur[k+len(comma):]
		}
	}
}

// fastByte is fast's reading of the block's next line for a one-byte delimiter: one pass over
// the line's bytes finds its delimiters, a quote and its end (where fast's general loop makes
// a call to find each, nine calls for a line of seven fields). It returns the record, or
// false when the line is for the general path (the rest of the block handed to it), or skip
// for an empty line.
func (s *csvScanner) fastByte() (rec []string, ok, skip bool) {
	c := s.commaS[0]
	blk := s.block
	s.rec = s.rec[:0]
	from, i := 0, 0
	// Eight bytes at a time: a word's delimiters, newline and quote are found at once (a
	// line of the peers' table is 7 words holding 7 of them), then the rest byte by byte.
	commas, quotes := repeatByte(c), repeatByte('"')
	b := unsafe.Slice(unsafe.StringData(blk), len(blk))
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		for m := zeroBytes(w^commas) | zeroBytes(w^newlines) | zeroBytes(w^quotes); m != 0; m &= m - 1 {
			j := i + bits.TrailingZeros64(m)>>3
			switch b[j] {
			case c:
				s.rec = append(s.rec, blk[from:j])
				from = j + 1
			case '\n':
				i = j
				goto end
			default: // a quote: the general path reads the line
				i = len(blk)
				goto end
			}
		}
	}
	for ; i < len(blk); i++ {
		switch blk[i] {
		case c:
			s.rec = append(s.rec, blk[from:i])
			from = i + 1
		case '\n':
			goto end
		case '"':
			i = len(blk) // a quote: the general path reads the line
			goto end
		}
	}
end:
	if i >= len(blk) || i+1 > s.max {
		s.pending = []byte(s.block)
		s.block = ""
		return nil, false, false
	}
	s.block = blk[i+1:]
	s.line++
	end := i
	if end > 0 && blk[end-1] == '\r' {
		end--
	}
	if end == 0 {
		return nil, false, true // an empty line
	}
	s.start, s.raw, s.first = s.line, s.raw[:0], 0
	s.rec = append(s.rec, blk[from:max(end, from)])
	return s.rec, true, false
}

// newlines is '\n' in every byte of a word.
const newlines = 0x0a0a0a0a0a0a0a0a

// repeatByte returns c in every byte of a word.
func repeatByte(c byte) uint64 { return uint64(c) * 0x0101010101010101 }

// zeroBytes returns w with the high bit of each byte set where that byte of w is zero, and
// every other bit clear (exactly: no borrow runs from one byte into the next).
func zeroBytes(w uint64) uint64 {
	const low7 = 0x7f7f7f7f7f7f7f7f
	return ^((w&low7 + low7) | w | low7)
}

// quoted notes the quoted field that opened on line open and starts at from in fields, now
// read, in recQuote when it is the record's first long one.
func (s *csvScanner) quoted(open, from int) {
	lines, n := s.line-open+1, len(s.fields)-from
	if s.recQuote.lines == 0 && lines > 1 && (lines > longQuoteLines || n > longQuoteBytes) {
		s.recQuote = longQuote{line: open, field: len(s.ends), lines: lines, bytes: n}
	}
}

// next returns the next record: its fields (valid until the next call), io.EOF at the end, a
// *RowError for a malformed record, an error wrapping ErrInput for a line over the limit, or
// the input's error.
func (s *csvScanner) next() ([]string, error) {
	s.recQuote = longQuote{}
	if rec, ok := s.fast(); ok {
		return rec, nil
	}
	var line []byte
	var err error
	for {
		s.raw, s.first = s.raw[:0], 0
		line, err = s.readLine()
		if err == errTooLong {
			return nil, s.tooLong()
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if len(line) == 0 {
			return nil, io.EOF
		}
		s.line++
		if len(content(line, err == io.EOF)) > 0 {
			break
		}
		if err == io.EOF {
			return nil, io.EOF
		}
	}
	s.start, s.first = s.line, len(s.raw)
	eof := err == io.EOF
	cur := content(line, eof)
	s.fields, s.ends = s.fields[:0], s.ends[:0]
fields:
	for {
		if len(cur) == 0 || cur[0] != '"' {
			field := cur
			i := bytes.Index(cur, s.comma)
			if i >= 0 {
				field = cur[:i]
			}
			if bytes.IndexByte(field, '"') >= 0 {
				return nil, s.malformed(`bare " in non-quoted-field`)
			}
			s.fields = append(s.fields, field...)
			s.ends = append(s.ends, len(s.fields))
			if i < 0 {
				break fields
			}
			cur = cur[i+len(s.comma):]
			continue
		}
		cur = cur[1:]
		open, from := s.line, len(s.fields)
		for {
			i := bytes.IndexByte(cur, '"')
			if i >= 0 {
				s.fields = append(s.fields, cur[:i]...)
				cur = cur[i+1:]
				switch {
				case len(cur) > 0 && cur[0] == '"':
					s.fields = append(s.fields, '"')
					cur = cur[1:]
				case bytes.HasPrefix(cur, s.comma):
					s.quoted(open, from)
					s.ends = append(s.ends, len(s.fields))
					cur = cur[len(s.comma):]
					continue fields
				case len(cur) == 0:
					s.quoted(open, from)
					s.ends = append(s.ends, len(s.fields))
					break fields
				default:
					return nil, s.malformed(`extraneous or missing " in quoted-field`)
				}
				continue
			}
			// The line ends inside the quoted field: the field goes on on the next line.
			s.fields = append(s.fields, cur...)
			if eof {
				return nil, s.malformed(`a quoted field is still open at the end of the input: is a quote unmatched?`)
			}
			s.fields = append(s.fields, '\n')
			line, err = s.readLine()
			if err == errTooLong {
				return nil, s.tooLong()
			}
			if err != nil && err != io.EOF {
				return nil, err
			}
			eof = err == io.EOF
			if len(line) == 0 {
				return nil, s.malformed(`a quoted field is still open at the end of the input: is a quote unmatched?`)
			}
			s.line++
			cur = content(line, eof)
		}
	}
	str := string(s.fields)
	s.rec = s.rec[:0]
	prev := 0
	for _, end := range s.ends {
		s.rec = append(s.rec, str[prev:end])
		prev = end
	}
	s.shrink()
	return s.rec, nil
}
