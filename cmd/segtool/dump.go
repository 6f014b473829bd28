package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/suggest"
)

// textOptions say how values are written as text, by dump and query.
type textOptions struct {
	format     string // csv or ndjson
	timeFormat string // millis or rfc3339
	multiDelim string // CSV: between the values of a multi-value cell
	null       string // CSV: the text of a null
}

const textConventionsHelp = `Output conventions:
  csv     a header line of column names, then one line per row; __time in epoch milliseconds
          (--time-format rfc3339 for RFC 3339 in UTC); a multi-value cell joins its values with
          --multi-delimiter (default "|"); a null (and a null multi-value row) is --null (default:
          the empty field), so by default null and "" look alike; fields are quoted as RFC 4180
          says. This is the CSV that ingest reads with the default spec input settings.
  ndjson  one JSON object per row, keys in column order; a single-value dimension is a string or
          null, a multi-value dimension an array of strings or null; numbers are JSON numbers.
A null metric value (missing at ingestion, or a group whose values were all null) is written
as a null dimension is: --null in CSV, null in NDJSON. A hyperUnique metric is written as its
sketch's estimated count of distinct values.`

func (o textOptions) validate() error {
	switch o.format {
	case "csv", "ndjson":
	default:
		return usagef("--format %q: want csv or ndjson", o.format)
	}
	switch o.timeFormat {
	case "millis", "rfc3339":
	default:
		return usagef("--time-format %q: want millis or rfc3339", o.timeFormat)
	}
	if o.multiDelim == "" {
		return usagef("--multi-delimiter must not be empty")
	}
	return nil
}

func addTextFlags(cmd *cobra.Command, o *textOptions) {
	fl := cmd.Flags()
	fl.StringVar(&o.format, "format", "csv", "output format: csv or ndjson")
	fl.StringVar(&o.timeFormat, "time-format", "millis", "__time as millis (epoch milliseconds) or rfc3339")
	fl.StringVar(&o.multiDelim, "multi-delimiter", "|", "CSV: joins the values of a multi-value cell")
	fl.StringVar(&o.null, "null", "", "CSV: the text of a null value")
}

// tableWriter writes rows of cells in CSV or NDJSON.
type tableWriter struct {
	o     textOptions
	w     *bufio.Writer
	names []string
	line  []byte
}

// cell is one output value: kind says how to write it.
type cell struct {
	kind   cellKind
	s      string
	list   []string
	i      int64
	f      float64
	isNull bool
}

type cellKind uint8

const (
	cellTime cellKind = iota
	cellString
	cellList
	cellLong
	cellDouble
)

func newTableWriter(w io.Writer, o textOptions, names []string) *tableWriter {
	return &tableWriter{o: o, w: bufio.NewWriterSize(w, 64<<10), names: names}
}

func (t *tableWriter) header() error {
	if t.o.format != "csv" {
		return nil
	}
	b := t.line[:0]
	for i, n := range t.names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendCSVField(b, n)
	}
	b = append(b, '\n')
	t.line = b
	_, err := t.w.Write(b)
	return err
}

func (t *tableWriter) row(cells []cell) error {
	b := t.line[:0]
	if t.o.format == "csv" {
		for i, c := range cells {
			if i > 0 {
				b = append(b, ',')
			}
			b = t.appendCSV(b, c)
		}
	} else {
		b = append(b, '{')
		for i, c := range cells {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, t.names[i])
			b = append(b, ':')
			b = t.appendJSON(b, c)
		}
		b = append(b, '}')
	}
	b = append(b, '\n')
	t.line = b
	_, err := t.w.Write(b)
	return err
}

func (t *tableWriter) flush() error { return t.w.Flush() }

func (t *tableWriter) timeText(ms int64) string {
	if t.o.timeFormat == "rfc3339" {
		return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return strconv.FormatInt(ms, 10)
}

// appendCSV appends a cell's CSV text: numbers as they are (they never need quotes).
func (t *tableWriter) appendCSV(b []byte, c cell) []byte {
	if !c.isNull {
		switch {
		case c.kind == cellLong, c.kind == cellTime && t.o.timeFormat != "rfc3339":
			return strconv.AppendInt(b, c.i, 10)
		case c.kind == cellDouble:
			return strconv.AppendFloat(b, c.f, 'g', -1, 64)
		}
	}
	return appendCSVField(b, t.text(c))
}

// text is a cell's CSV text.
func (t *tableWriter) text(c cell) string {
	if c.isNull {
		return t.o.null
	}
	switch c.kind {
	case cellTime:
		return t.timeText(c.i)
	case cellString:
		return c.s
	case cellList:
		return strings.Join(c.list, t.o.multiDelim)
	case cellLong:
		return strconv.FormatInt(c.i, 10)
	case cellDouble:
	}
	return strconv.FormatFloat(c.f, 'g', -1, 64)
}

func (t *tableWriter) appendJSON(b []byte, c cell) []byte {
	if c.isNull {
		return append(b, "null"...)
	}
	switch c.kind {
	case cellTime:
		if t.o.timeFormat == "rfc3339" {
			return appendJSONString(b, t.timeText(c.i))
		}
		return strconv.AppendInt(b, c.i, 10)
	case cellString:
		return appendJSONString(b, c.s)
	case cellList:
		b = append(b, '[')
		for i, s := range c.list {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, s)
		}
		return append(b, ']')
	case cellLong:
		return strconv.AppendInt(b, c.i, 10)
	case cellDouble:
	}
	if math.IsNaN(c.f) || math.IsInf(c.f, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, c.f, 'g', -1, 64)
}

// appendCSVField appends s, quoted when RFC 4180 needs it (or it starts with a space).
func appendCSVField(b []byte, s string) []byte {
	if !csvQuoted(s) {
		return append(b, s...)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// csvQuoted reports whether s needs quotes: a comma, a quote, a line break, or a leading space.
func csvQuoted(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == ' ' {
		return true
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',', '"', '\r', '\n':
			return true
		}
	}
	return false
}

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

func newDumpCmd() *cobra.Command {
	var o textOptions
	var cols, progress string
	var version int
	s3 := &s3Flags{}
	cmd := &cobra.Command{
		Use:   "dump [--format csv|ndjson] [--columns a,b] SEG|TABLE",
		Short: "Write a segment's rows as CSV or NDJSON",
		Long: `dump writes every row of a segment, in segment order (time, then dimensions), to standard
output: __time, the dimensions and the metrics in schema order, or the columns --columns names.
With standard output redirected and standard error a terminal, standard error shows a progress
bar of the rows written (--progress always shows it whatever the streams).
A table (a directory holding _log/, or an s3:// location ending in /) stands for the segments
of its newest version (or --version N), dumped one after the other under one header.

` + textConventionsHelp + `

` + s3Help,
		Example: `  segtool dump events.seg | head
  segtool dump --format ndjson --columns __time,page,added events.seg
  segtool dump s3://seg/day1.seg
  segtool dump --version 2 events/`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			paths, err := expandTables(cmd.Context(), args, version, s3)
			if err != nil {
				return err
			}
			bar, err := newCommandProgress(progress, false, cmd.ErrOrStderr(), cmd.OutOrStdout())
			if err != nil {
				return err
			}
			err = dump(cmd.Context(), cmd.OutOrStdout(), paths, o, splitList(cols), s3, bar)
			bar.finish(err == nil)
			return err
		},
	}
	addTextFlags(cmd, &o)
	addS3Flags(cmd, s3)
	cmd.Flags().StringVar(&cols, "columns", "", "comma-separated columns to write (default: all)")
	cmd.Flags().IntVar(&version, "version", 0, "the version of a table argument (default: the newest)")
	addProgressFlag(cmd, &progress, true)
	return cmd
}

// dump writes the rows of the segments at paths one after the other, under one header (the
// segments of a table, whose schemas are equal); bar (nil: none) counts them, a stage a
// segment.
func dump(ctx context.Context, out io.Writer, paths []string, o textOptions, cols []string, s3 *s3Flags, bar *progressBar) error {
	var tw *tableWriter
	for i, p := range paths {
		desc := "dumping"
		if len(paths) > 1 {
			desc = fmt.Sprintf("dumping %d/%d", i+1, len(paths))
		}
		if err := dumpSegment(ctx, out, p, o, cols, s3, &tw, bar, desc); err != nil {
			return err
		}
	}
	return nil
}

// dumpSegment writes the rows of the segment at path through *tw, made (and its header
// written) by the first segment; bar shows them as a stage named desc.
func dumpSegment(ctx context.Context, out io.Writer, path string, o textOptions, cols []string, s3 *s3Flags, twp **tableWriter,
	bar *progressBar, desc string) (err error) {
	seg, closeSeg, err := openInput(ctx, path, s3)
	if err != nil {
		return err
	}
	defer func() { err = multierr.Join(err, closeSeg()) }()
	s := seg.Schema()
	all := []string{columns.TimeColumn}
	for _, d := range s.Dimensions {
		all = append(all, d.Name)
	}
	for _, m := range s.Metrics {
		all = append(all, m.Name)
	}
	if len(cols) == 0 {
		cols = all
	}
	// pick[k] is the position of output column k: 0 time, 1.. dimensions, then metrics.
	pick := make([]int, len(cols))
	for k, c := range cols {
		pick[k] = -1
		for i, n := range all {
			if n == c {
				pick[k] = i
			}
		}
		if pick[k] < 0 {
			return fmt.Errorf("%s: no column %q%s (columns: %s)", path, c, suggest.Hint(c, all), strings.Join(all, ", "))
		}
	}
	tw := *twp
	if tw == nil {
		tw = newTableWriter(out, o, cols)
		if err := tw.header(); err != nil {
			return err
		}
		*twp = tw
	}
	rr := seg.RowReader()
	var row columns.Row
	cells := make([]cell, len(cols))
	nd := len(s.Dimensions)
	bar.stage(desc, int64(seg.Rows()), unitRows, false)
	for r := 0; r < seg.Rows(); r++ {
		if r%progressBatch == 0 {
			bar.set(int64(r))
		}
		if err := rr.Read(r, &row); err != nil {
			return fmt.Errorf("%s: row %d: %w", path, r, err)
		}
		for k, p := range pick {
			var c cell
			switch {
			case p == 0:
				c = cell{kind: cellTime, i: row.Time}
			case p <= nd:
				d := s.Dimensions[p-1]
				v := row.Dims[p-1]
				switch {
				case len(v) == 0:
					c = cell{kind: cellString, isNull: true}
				case d.MultiValue:
					c = cell{kind: cellList, list: v}
				default:
					c = cell{kind: cellString, s: v[0]}
				}
			default:
				m := s.Metrics[p-1-nd]
				v := row.Metrics[p-1-nd]
				switch {
				case m.Agg().Type == agg.SketchType: // its estimate (agg.Sketch.Estimate)
					var est float64
					if v.Sketch != nil {
						est = v.Sketch.Estimate()
					}
					c = cell{kind: cellLong, i: int64(est)}
				case m.ValueType() == columns.MetricLong:
					c = cell{kind: cellLong, i: v.Long, isNull: v.Null}
				case m.ValueType() == columns.MetricDouble:
					c = cell{kind: cellDouble, f: v.Double, isNull: v.Null}
				}
			}
			cells[k] = c
		}
		if err := tw.row(cells); err != nil {
			return err
		}
	}
	if err := tw.flush(); err != nil {
		return err
	}
	bar.set(int64(seg.Rows()))
	return nil
}
