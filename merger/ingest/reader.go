package ingest

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/writeout/writeout/columns"
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
	// years 1900 to 2199, once per input (most likely a wrong timestamp.format).
	OnWarning func(Warning)
}

// Warning is something odd about an input that is not an error.
type Warning struct {
	File    string // the input's name
	Line    int    // the line of the row it is about, from 1
	Column  string // the column (or the time field) it is about; may be empty
	Message string
}

func (w Warning) String() string {
	if w.Column == "" {
		return fmt.Sprintf("%s:%d: %s", w.File, w.Line, w.Message)
	}
	return fmt.Sprintf("%s:%d: column %s: %s", w.File, w.Line, w.Column, w.Message)
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
// io.ReaderAt with a Stat method, as a Parquet input needs.
func openFile(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 256<<10)
	if !strings.HasSuffix(strings.ToLower(path), ".gz") {
		return fileReader{br, f}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return readCloser{zr, func() error { return errors.Join(zr.Close(), f.Close()) }}, nil
}

// fileReader reads a file through a buffer, and also at offsets (for Parquet).
type fileReader struct {
	*bufio.Reader
	f *os.File
}

func (r fileReader) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }
func (r fileReader) Stat() (os.FileInfo, error)              { return r.f.Stat() }
func (r fileReader) Close() error                            { return r.f.Close() }

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }
