package ingest

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
)

// A reader reads the rows of one input as columns.Row values shaped by a spec's schema, ready
// for merger.Builder.Add. Each format of the registry (formats) makes its own.
type reader interface {
	// Read parses the next row into row: nil, io.EOF at the end, a *RowError (wrapping ErrRow)
	// for a row that does not parse, after which reading can go on, or another error, which
	// ends the input (wrapping ErrInput, or the underlying reader's error).
	//
	// row should come from Spec.newRow (Read reshapes it otherwise). Read reuses its slices
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

// readerOptions configure a reader beyond its spec. The zero value is the default.
type readerOptions struct {
	// Context, when set, is checked each time the reader reads from its input (every 64 KiB
	// at most), so that a cancellation is noticed within a long record too: the read then
	// fails with an error wrapping the context's error.
	Context context.Context
	// OnWarning, when set, is called with the input's warnings: a time outside the plausible
	// years 1900 to 2199, once per input (most likely a wrong timestamp.format); CSV quoted
	// fields over many lines, once per input at its end (most likely an unmatched quote).
	OnWarning func(Warning)
}

// Warning is something odd about an input that is not an error. String writes it as
// "file:line: column c: message" (without the column when there is none).
type Warning struct {
	file    string // the input's name
	line    int    // the line of the row it is about, from 1
	column  string // the column (or the time field) it is about; may be empty
	message string
}

func (w Warning) String() string {
	if w.column == "" {
		return fmt.Sprintf("%s:%d: %s", w.file, w.line, w.message)
	}
	return fmt.Sprintf("%s:%d: column %s: %s", w.file, w.line, w.column, w.message)
}

// newInput is the source of a reader: r through a buffer of 64 KiB, with a byte-order mark
// at its start skipped, checking ctx (when not nil) at each refill.
func newInput(ctx context.Context, r io.Reader) *bufio.Reader {
	if ctx != nil {
		r = ctxReader{ctx: ctx, r: r}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	if b, err := br.Peek(len(bom)); err == nil && string(b) == bom {
		_, _ = br.Discard(len(bom))
	}
	return br
}

const bom = "\ufeff"

// ctxReader is a reader that fails once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, &cancelled{err}
	}
	return c.r.Read(p)
}

// cancelled is the context's error, as a reader returns it.
type cancelled struct{ err error }

func (c *cancelled) Error() string { return "ingest: " + c.err.Error() }
func (c *cancelled) Unwrap() error { return c.err }

// readErr is the error of a read from the input named name: the context's error as it is,
// any other naming the input.
func readErr(name string, err error) error {
	var c *cancelled
	if errors.As(err, &c) {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}

// openFile opens the file at path for reading, through gzip when its name ends in .gz. Its
// errors are os.Open's, or name the file. Unless gzipped, what it returns is also an
// io.ReaderAt with a Stat method, as a Parquet input needs. A named pipe's open waits for a
// writer: ctx ends the wait.
func openFile(ctx context.Context, path string) (io.ReadCloser, error) {
	return openCounted(ctx, path, nil)
}

// openCounted is openFile; when count is not nil, every byte read from the file (by Read or
// ReadAt, before any decompression) is added to it.
func openCounted(ctx context.Context, path string, count *atomic.Int64) (io.ReadCloser, error) {
	f, err := openWaiting(ctx, path)
	if err != nil {
		return nil, err
	}
	var src io.Reader = f
	if count != nil {
		src = countingReader{r: f, n: count}
	}
	br := bufio.NewReaderSize(src, 256<<10)
	if !strings.HasSuffix(strings.ToLower(path), ".gz") {
		return fileReader{br, f, count}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return readCloser{zr, func() error { return errors.Join(zr.Close(), f.Close()) }}, nil
}

// openWaiting opens the file at path for reading. Opening a named pipe blocks until a writer
// opens it, so it waits on a goroutine of its own, and when ctx ends first it returns ctx's
// error: it then opens the pipe for writing itself (which ends the wait) and closes both ends.
func openWaiting(ctx context.Context, path string) (*os.File, error) {
	if fi, err := os.Stat(path); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		return os.Open(path)
	}
	type opened struct {
		f   *os.File
		err error
	}
	done := make(chan opened, 1)
	go func() {
		f, err := os.Open(path)
		done <- opened{f, err}
	}()
	select {
	case o := <-done:
		return o.f, o.err
	case <-ctx.Done():
	}
	// A writer of our own ends the open (a non-blocking open for writing succeeds once a
	// reader waits; should it fail, the reader waits on until a writer comes).
	if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		o := <-done
		if o.f != nil {
			_ = o.f.Close()
		}
		_ = w.Close()
	}
	return nil, &cancelled{fmt.Errorf("open %s (a named pipe, no writer yet): %w", path, ctx.Err())}
}

// fileReader reads a file through a buffer, and also at offsets (for Parquet).
type fileReader struct {
	*bufio.Reader
	f *os.File
	n *atomic.Int64 // when not nil, counts the bytes read
}

func (r fileReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.f.ReadAt(p, off)
	if r.n != nil {
		r.n.Add(int64(n))
	}
	return n, err
}

// countingReader adds the bytes read from r to n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
func (r fileReader) Stat() (os.FileInfo, error) { return r.f.Stat() }
func (r fileReader) Close() error               { return r.f.Close() }

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
	metSketch // a sketch from an input field: its value inserted, or its sketch (isInputSketch)
	metNone   // a sketch over a dimension: the Builder fills it
)

// plan is what every reader of a spec needs, worked out once from a validated spec (newPlan):
// the readers of a Run share it, and none validates the spec again.
type plan struct {
	sp        *Spec
	parseTime func(string) (int64, error)
	timeField string
	dimFields []string
	metFields []string // "" for count and hyperUnique over a dimension
	kinds     []metricKind
	sks       []agg.Sketches // per metric: a sketch metric's kind, else nil
	zero      []bool         // per metric: a missing value reads as 0 (Spec.nullAsZero), not null
	maxRecord int            // inputSpec.MaxRecordBytes, defaulted
}

// newPlan returns the plan of sp, which has been validated (ParseSpec, Spec.Validate);
// maxRecord, when positive, overrides the spec's input.maxRecordBytes.
func newPlan(sp *Spec, maxRecord int64) (*plan, error) {
	pl := &plan{sp: sp, timeField: sp.timestamp.Field, maxRecord: sp.maxRecordBytes()}
	if maxRecord > 0 {
		pl.maxRecord = int(min(maxRecord, math.MaxInt32))
	}
	if pl.timeField == "" {
		pl.timeField = columns.TimeColumn
	}
	var err error
	if pl.parseTime, err = timeParser(sp.timestamp.Format); err != nil {
		return nil, specErr(err)
	}
	for _, d := range sp.Schema.Dimensions {
		pl.dimFields = append(pl.dimFields, sp.dimensionField(d))
	}
	for _, m := range sp.Schema.Metrics {
		f := sp.metricField(m)
		pl.metFields = append(pl.metFields, f)
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
		}
		sks, err := m.Sketches()
		if err != nil {
			return nil, specErr(err)
		}
		pl.kinds = append(pl.kinds, k)
		pl.sks = append(pl.sks, sks)
		pl.zero = append(pl.zero, sp.nullAsZero(m))
	}
	return pl, nil
}

// fieldParser turns the text of fields into a row, shared by the formats: the plan, and the
// state of one input.
type fieldParser struct {
	plan
	file      string
	line      int
	onWarning func(Warning)
	warned    bool // a time was implausible: the input's one warning is given
}

func newFieldParser(pl *plan, name string, opts readerOptions) fieldParser {
	return fieldParser{plan: *pl, file: name, onWarning: opts.OnWarning}
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
	return p.acceptTime(row, t, s)
}

// acceptTime sets the row's time to t, read from the text s, after the range check (and the
// input's one warning of an implausible time).
func (p *fieldParser) acceptTime(row *columns.Row, t int64, s string) error {
	if t < columns.MinTime || t > columns.MaxTime {
		return p.errf(p.timeField, "time %q out of range (%d..%d milliseconds since the epoch)", s, columns.MinTime, columns.MaxTime)
	}
	if !p.warned && (t < plausibleMin || t > plausibleMax || t >= 0 && t < epochYear && p.largerUnit(t) != "") {
		p.warned = true
		p.warn(s, t)
	}
	row.Time = t
	return nil
}

// The plausible event times: years 1900 to 2199. A time outside gets a warning (once per
// input): it is valid, but most likely read in the wrong unit.
var (
	plausibleMin = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	plausibleMax = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() - 1
)

// epochUnits are the epoch time formats, with the milliseconds of one unit.
var epochUnits = []struct {
	name   string
	millis float64
}{{"seconds", 1e3}, {"millis", 1}, {"micros", 1e-3}, {"nanos", 1e-6}}

// epochYear is the end of 1970: an epoch time read before it, that a larger unit would put in
// a plausible year from 1990, is most likely in that unit (epoch seconds read as millis land
// in January 1970), and gets the warning too.
var epochYear = time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// epochFormat returns the epoch unit the spec's timestamp.format reads, or "".
func (p *fieldParser) epochFormat() string {
	format := strings.ToLower(p.sp.timestamp.Format)
	switch format {
	case "":
		return "millis"
	case "posix":
		return "seconds"
	}
	for _, u := range epochUnits {
		if u.name == format {
			return format
		}
	}
	return ""
}

// largerUnit returns the larger epoch unit than the format's in which time t, read in 1970,
// would fall in 1990..2199, or "".
func (p *fieldParser) largerUnit(t int64) string {
	format := p.epochFormat()
	from := math.Inf(1)
	for _, u := range epochUnits {
		if u.name == format {
			from = u.millis
		}
	}
	low := float64(time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	for _, v := range epochUnits { // the largest first
		if m := float64(t) / from * v.millis; v.millis > from && low <= m && m <= float64(plausibleMax) {
			return v.name
		}
	}
	return ""
}

// warn reports time t, read from s, as implausible.
func (p *fieldParser) warn(s string, t int64) {
	if p.onWarning == nil {
		return
	}
	format := strings.ToLower(p.sp.timestamp.Format)
	switch format {
	case "":
		format = "millis"
	case "posix":
		format = "seconds"
	}
	if t >= plausibleMin && t <= plausibleMax { // in 1970, and plausible in a larger unit
		p.onWarning(Warning{file: p.file, line: p.line, column: p.timeField,
			message: fmt.Sprintf("time %q read as %s is %s, in the first year of the epoch: are the times in %s? (set timestamp.format); this warning is given once per input",
				s, format, time.UnixMilli(t).UTC().Format(time.RFC3339Nano), p.largerUnit(t))})
		return
	}
	msg := fmt.Sprintf("time %q read as %s is in year %d, outside %d..%d", s, format,
		time.UnixMilli(t).UTC().Year(), 1900, 2199)
	hint := "check the data and timestamp.format"
	for _, u := range epochUnits {
		if u.name != format {
			continue
		}
		// The largest unit that makes the time plausible (a smaller one gives a time in 1970).
		for _, v := range epochUnits {
			m := float64(t) / u.millis * v.millis
			if v.name != format && float64(plausibleMin) <= m && m <= float64(plausibleMax) {
				hint = fmt.Sprintf("are the times in %s? (set timestamp.format)", v.name)
				break
			}
		}
	}
	p.onWarning(Warning{file: p.file, line: p.line, column: p.timeField,
		message: msg + ": " + hint + "; this warning is given once per input"})
}

// checkValues rejects a dimension value longer than a segment holds, and a multi-value row
// of more values than a segment holds.
func (p *fieldParser) checkValues(d int, v []string) error {
	if len(v) > maxRowValues {
		return p.errf(p.sp.Schema.Dimensions[d].Name, "%d values, at most %d", len(v), maxRowValues)
	}
	for _, s := range v {
		if len(s) > columns.MaxValueBytes {
			return p.errf(p.sp.Schema.Dimensions[d].Name, "value of %d bytes, at most %d", len(s), columns.MaxValueBytes)
		}
	}
	return nil
}

// maxRowValues is the most values a multi-value dimension holds in one row (the columns
// package's limit on the values of one row, which it does not export).
const maxRowValues = 1 << 20

// setMetric parses metric i from its field's text; empty (or null) is null, or 0 for a
// metric of input.nullAsZero (a sketch adds nothing).
func (p *fieldParser) setMetric(row *columns.Row, i int, s string, null bool) error {
	v := &row.Metrics[i]
	sk := v.Sketch // the row's own sketch, reused from row to row
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
		v.Null = p.kinds[i] != metSketch && !p.zero[i]
		return nil
	}
	switch p.kinds[i] {
	case metLong:
		n, err := parseLong(s)
		if err != nil {
			return p.errf(p.sp.Schema.Metrics[i].Name, "%v", err)
		}
		v.Long = n
	case metDouble:
		f, err := parseDouble(s)
		if err != nil {
			return p.errf(p.sp.Schema.Metrics[i].Name, "%v", err)
		}
		v.Double = f
	case metSketch:
		var err error
		if v.Sketch, err = p.sketch(i, sk, []byte(s), true); err != nil {
			return p.errf(p.sp.Schema.Metrics[i].Name, "%v", err)
		}
	case metCount, metNone: // set above
	}
	return nil
}

// sketch returns the sketch of metric i from one input value b: the row's sketch sk (reused
// from row to row: rows are parsed ahead of the Builder, which clones a row's sketch when it
// adds the row; nil makes a new one), emptied, with b inserted; or, for a metric whose input
// holds sketches (isInputSketch), the sketch b holds, base64 (standard encoding) in text
// formats.
func (p *fieldParser) sketch(i int, sk agg.Sketch, b []byte, text bool) (agg.Sketch, error) {
	sks := p.sks[i]
	if p.sp.Schema.Metrics[i].InputSketch {
		if text {
			raw := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
			n, err := base64.StdEncoding.Decode(raw, b)
			if err != nil {
				return nil, fmt.Errorf("isInputSketch: not base64: %w", err)
			}
			b = raw[:n]
		}
		return sks.Decode(b)
	}
	if sk == nil {
		sk = sks.New()
	} else {
		sk.Reset()
	}
	return sk, sk.Insert(b)
}
