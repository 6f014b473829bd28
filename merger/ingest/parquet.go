package ingest

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/suggest"
)

// Parquet is the name of the Parquet format.
const Parquet Format = "parquet"

// parquetMagic is the first (and last) four bytes of a Parquet file.
const parquetMagic = "PAR1"

var parquetFormat = inputFormat{
	name:     Parquet,
	title:    "Parquet",
	exts:     []string{".parquet"},
	magic:    parquetMagic,
	seekable: true,
	newReader: func(pl *plan, name string, src io.Reader, opts readerOptions) (reader, error) {
		ra, size, err := readerAtSize("Parquet", name, src)
		if err != nil {
			return nil, err
		}
		return newParquetReader(pl, name, ra, size, opts)
	},
	help: `Parquet: columns by the names of top-level fields; the time from INT64 TIMESTAMP (millis,
micros, nanos), INT32 DATE, an integer in the unit of timestamp.format, or a string;
dimensions from strings, integers and booleans (their CSV text), a LIST (or repeated field)
giving multi-value cells (an empty list is null); metrics from integers, floating-point
numbers and strings; a null is null. A column of another type is an error naming it. A file
whose footer, row groups and pages disagree (a length past the file or its column chunk, row
counts that do not add up, a page that decodes to another size) is an error naming it.`,
}

// parquetReader reads the rows of a Parquet file (see SpecHelp), with
// github.com/parquet-go/parquet-go: one row group at a time and, within it, one page of each
// column read at a time, so that the memory it holds is a page (and a dictionary) per column
// read, whatever the size of the file. Only the columns the spec reads are read.
//
// Columns are found by name among the file's top-level fields; a LIST (or a repeated field)
// reads as its elements. The mapping of types:
//
//   - the time: INT64 TIMESTAMP (millis, micros, nanos; truncated to milliseconds), INT32 DATE
//     (days), an INT32 or INT64 without a time type read in the spec's epoch unit
//     (timestamp.format seconds, millis, micros or nanos), or a string parsed by
//     timestamp.format;
//   - a dimension: strings, integers (as their decimal text) and booleans (true, false), as the
//     same data written as CSV would give them; a null is null; a list gives the values of a
//     multi-value dimension (a null element is the empty string, an empty or null list is
//     null; a single-value dimension takes a list of at most one element);
//   - a long metric: integers, floating-point values that are integers, strings parsed as CSV
//     does; a double metric: integers, floating-point values (FLOAT as its shortest decimal,
//     as CSV would write it), strings; a null is a null value (columns.Value.Null);
//   - hyperUnique over an input field: the value's text (strings, integers, booleans).
//
// Any other type is an error wrapping ErrInput naming the file, the column and its type, from
// newParquetReader. A file that is not Parquet, or a corrupt one, is an error wrapping
// ErrInput (never a panic); every length parquet-go would allocate by is checked first, and
// the row counts of the footer, the row groups and the pages must agree (parquet_check.go). A row's errors (*RowError) name its row number, from 1, in place
// of a line.
type parquetReader struct {
	fieldParser
	ctx     context.Context
	pf      *parquet.File
	pqf     *pqFile // the footer, checked (parquet_check.go)
	groups  []parquet.RowGroup
	group   int   // the next row group
	left    int64 // rows left in the current one
	cols    []*pqColumn
	timeCol *pqColumn
	dimCols []*pqColumn
	metCols []*pqColumn // nil where the metric reads no field
	err     error       // sticky: the input's error, once it fails
	scratch []byte
}

// newParquetReader returns a reader of the Parquet file in r, of size bytes, named name in
// messages. It reads the file's footer and checks that every column the spec reads is in the
// file with a type it can map; errors wrap ErrInput. Call Close when done.
func newParquetReader(pl *plan, name string, r io.ReaderAt, size int64, opts readerOptions) (x *parquetReader, err error) {
	p := newFieldParser(pl, name, opts)
	sp := pl.sp
	defer func() {
		if v := recover(); v != nil {
			x, err = nil, inputErr("%s: not a readable Parquet file: %v", name, v)
		}
	}()
	pqf, err := checkParquetFooter(name, r, size)
	if err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true),
		parquet.ReadBufferSize(pqReadBuffer))
	if err != nil {
		return nil, inputErr("%s: not a readable Parquet file: %v", name, err)
	}
	x = &parquetReader{fieldParser: p, ctx: opts.Context, pf: pf, pqf: pqf, groups: pf.RowGroups()}
	if len(x.groups) != len(pqf.md.RowGroups) {
		return nil, inputErr("%s: not a readable Parquet file: %d row groups, its footer says %d", name, len(x.groups), len(pqf.md.RowGroups))
	}
	byField := map[string]*pqColumn{}
	column := func(what, field string) (*pqColumn, error) {
		if c := byField[field]; c != nil {
			return c, nil
		}
		c, err := x.findColumn(what, field)
		if err != nil {
			return nil, err
		}
		byField[field] = c
		x.cols = append(x.cols, c)
		return c, nil
	}
	if x.timeCol, err = column("timestamp", p.timeField); err != nil {
		return nil, err
	}
	if err := x.checkTime(x.timeCol); err != nil {
		return nil, err
	}
	for i, d := range sp.Schema.Dimensions {
		c, err := column("dimension "+d.Name, p.dimFields[i])
		if err != nil {
			return nil, err
		}
		if err := x.check(c, "dimension "+d.Name, c.dimOK()); err != nil {
			return nil, err
		}
		c.wantStr = true
		x.dimCols = append(x.dimCols, c)
	}
	for i, m := range sp.Schema.Metrics {
		var c *pqColumn
		if f := p.metFields[i]; f != "" {
			if c, err = column("metric "+m.Name, f); err != nil {
				return nil, err
			}
			ok := false
			switch p.kinds[i] {
			case metLong, metDouble:
				ok = c.numberOK()
			case metSketch:
				ok = c.sketchOK(m.InputSketch, agg.NumericInput(x.sks[i]))
			case metCount, metNone:
			}
			if err := x.check(c, "metric "+m.Name, ok && c.maxRep == 0); err != nil {
				return nil, err
			}
			c.wantScalar = true
		}
		x.metCols = append(x.metCols, c)
	}
	return x, nil
}

// pqReadBuffer is the read buffer of each column's pages.
const pqReadBuffer = 64 << 10

// findColumn returns the column of a top-level field of the file.
func (x *parquetReader) findColumn(what, field string) (*pqColumn, error) {
	var names []string
	for _, top := range x.pf.Root().Columns() {
		if top.Name() != field {
			names = append(names, top.Name())
			continue
		}
		c := &pqColumn{name: field}
		node, def := top, 0
		reps := 0
		for {
			if !node.Required() {
				def++
			}
			if node.Repeated() {
				reps++
				c.elemDef = byte(def)
			}
			if node.Leaf() {
				break
			}
			kids := node.Columns()
			if len(kids) != 1 {
				return nil, inputErr("%s: %s: column %q is a group of %d fields, want a value or a list of values", x.file, what, field, len(kids))
			}
			node = kids[0]
		}
		if reps > 1 {
			return nil, inputErr("%s: %s: column %q is a list of lists, want a value or a list of values", x.file, what, field)
		}
		c.leaf = node
		c.index = node.Index()
		c.maxDef = byte(node.MaxDefinitionLevel())
		c.maxRep = byte(node.MaxRepetitionLevel())
		c.setType(node.Type())
		return c, nil
	}
	return nil, inputErr("%s: %s: field %q is not a column of the Parquet file%s (its columns: %s)", x.file, what, field,
		suggest.Hint(field, names), strings.Join(names, ", "))
}

// check is the error of column c that cannot be what, or nil when ok.
func (x *parquetReader) check(c *pqColumn, what string, ok bool) error {
	if ok {
		return nil
	}
	list := ""
	if c.maxRep > 0 {
		list = "a list of "
	}
	return inputErr("%s: %s: column %q is %s%s, which it cannot read", x.file, what, c.name, list, c.typeName)
}

// checkTime decides how the time column is read.
func (x *parquetReader) checkTime(c *pqColumn) error {
	c.wantScalar = true
	if c.maxRep == 0 && c.logical == nil || c.maxRep == 0 && c.intType {
		switch c.kind {
		case parquet.ByteArray:
			c.timeHow = timeString
			return nil
		case parquet.Int32, parquet.Int64:
			c.timeMul, c.timeDiv = 1, 1
			switch strings.ToLower(x.sp.timestamp.Format) {
			case "", "millis":
				c.timeHow, c.timeDiv = timeEpoch, 1
			case "seconds", "posix":
				c.timeHow, c.timeMul = timeEpoch, 1000
			case "micros":
				c.timeHow, c.timeDiv = timeEpoch, 1000
			case "nanos":
				c.timeHow, c.timeDiv = timeEpoch, 1_000_000
			default:
				return inputErr("%s: timestamp: column %q is %s, and timestamp.format %q reads strings (integers are read by seconds, millis, micros or nanos)", x.file, c.name, c.typeName, x.sp.timestamp.Format)
			}
			return nil
		case parquet.Boolean, parquet.Int96, parquet.Float, parquet.Double, parquet.FixedLenByteArray:
		}
	}
	if c.maxRep == 0 && c.logical != nil {
		switch lt := c.logical.Value.(type) {
		case *format.TimestampType:
			if c.kind == parquet.Int64 {
				c.timeHow, c.timeMul = timeEpoch, 1
				switch lt.Unit.Value.(type) {
				case *format.MilliSeconds:
					c.timeDiv = 1
				case *format.MicroSeconds:
					c.timeDiv = 1000
				case *format.NanoSeconds:
					c.timeDiv = 1_000_000
				default:
					c.timeHow = timeNone
				}
			}
		case *format.DateType:
			if c.kind == parquet.Int32 {
				c.timeHow, c.timeMul, c.timeDiv = timeEpoch, 86_400_000, 1
			}
		case *format.StringType, *format.EnumType:
			if c.kind == parquet.ByteArray {
				c.timeHow = timeString
			}
		}
		if c.timeHow != timeNone {
			return nil
		}
	}
	return x.check(c, "timestamp", false)
}

// Close releases the pages the reader holds. The io.ReaderAt stays the caller's.
func (x *parquetReader) Close() error {
	for _, c := range x.cols {
		c.closePages()
	}
	return nil
}

// Read implements Reader.
func (x *parquetReader) Read(row *columns.Row) (err error) {
	if x.err != nil {
		return x.err
	}
	defer func() {
		if v := recover(); v != nil {
			err = x.corrupt(fmt.Errorf("%v", v))
		}
	}()
	for x.left == 0 {
		if x.group == len(x.groups) {
			_ = x.Close()
			return io.EOF
		}
		if x.ctx != nil {
			if err := x.ctx.Err(); err != nil {
				x.err = &cancelled{err}
				return x.err
			}
		}
		if err := x.openGroup(); err != nil {
			return x.corrupt(err)
		}
	}
	x.left--
	x.line++
	for _, c := range x.cols {
		if err := c.next(); err != nil {
			return x.corrupt(fmt.Errorf("column %q: %w", c.name, err))
		}
	}
	if x.left == 0 {
		if err := x.endGroup(); err != nil {
			return x.corrupt(err)
		}
	}
	x.shape(row)
	if err := x.readTime(row); err != nil {
		return err
	}
	for i, c := range x.dimCols {
		v := append(row.Dims[i][:0], c.strs...)
		row.Dims[i] = v
		if len(v) > 1 && !x.sp.Schema.Dimensions[i].MultiValue {
			return x.errf(x.sp.Schema.Dimensions[i].Name, "%d values for a single-value dimension", len(v))
		}
		if err := x.checkValues(i, v); err != nil {
			return err
		}
	}
	for i, c := range x.metCols {
		if err := x.readMetric(row, i, c); err != nil {
			return err
		}
	}
	return nil
}

// corrupt makes err the reader's sticky error: the file cannot be read on.
func (x *parquetReader) corrupt(err error) error {
	_ = x.Close()
	x.err = inputErr("%s: row %d: corrupt Parquet file: %v", x.file, x.line, err)
	return x.err
}

// openGroup starts reading the next row group, once the pages of each column read are
// checked (checkPages).
func (x *parquetReader) openGroup() error {
	g := x.groups[x.group]
	x.group++
	chunks := g.ColumnChunks()
	for _, c := range x.cols {
		c.closePages()
		if c.index < 0 || c.index >= len(chunks) {
			return fmt.Errorf("row group %d has no column %d", x.group-1, c.index)
		}
		if err := x.pqf.checkPages(x.group-1, c.index); err != nil {
			return fmt.Errorf("row group %d, column %q: %w", x.group-1, c.name, err)
		}
		c.pages = chunks[c.index].Pages()
		c.li, c.n = 0, 0
	}
	x.left = g.NumRows()
	if x.left < 0 || x.left != x.pqf.md.RowGroups[x.group-1].NumRows {
		return fmt.Errorf("row group %d of %d rows", x.group-1, x.left)
	}
	return nil
}

// endGroup checks, after the last row of a row group, that no column read holds more.
func (x *parquetReader) endGroup() error {
	for _, c := range x.cols {
		for c.li == c.n {
			if err := c.load(); err == io.EOF {
				break
			} else if err != nil {
				return fmt.Errorf("column %q: %w", c.name, err)
			}
		}
		if c.li < c.n {
			return fmt.Errorf("column %q: more values than row group %d has rows (%d)", c.name, x.group-1, x.groups[x.group-1].NumRows())
		}
	}
	return nil
}

// readTime sets the row's time from the time column.
func (x *parquetReader) readTime(row *columns.Row) error {
	c := x.timeCol
	if c.null {
		return x.errf(x.timeField, "missing time")
	}
	if c.timeHow == timeString {
		return x.setTime(row, c.text(), false)
	}
	v := c.i64
	if c.big {
		return x.errf(x.timeField, "time %d out of range", c.u64)
	}
	if c.timeMul > 1 && (v > math.MaxInt64/c.timeMul || v < math.MinInt64/c.timeMul) {
		return x.errf(x.timeField, "time %d out of range", v)
	}
	t := floorDiv(v*c.timeMul, c.timeDiv)
	if t < columns.MinTime || t > columns.MaxTime || (t < plausibleMin || t > plausibleMax) && !x.warned {
		return x.acceptTime(row, t, strconv.FormatInt(v, 10)) // the checks and the warning
	}
	row.Time = t
	return nil
}

// readMetric sets metric i from column c.
func (x *parquetReader) readMetric(row *columns.Row, i int, c *pqColumn) error {
	v := &row.Metrics[i]
	sk := v.Sketch // the row's own sketch, reused from row to row
	*v = columns.Value{}
	switch x.kinds[i] {
	case metCount:
		v.Long = 1
		return nil
	case metNone:
		return nil
	case metLong, metDouble, metSketch:
	}
	if c.null {
		if x.kinds[i] != metSketch {
			v.Null = true
		}
		return nil
	}
	name := x.sp.Schema.Metrics[i].Name
	switch x.kinds[i] {
	case metLong:
		switch {
		case c.kind == parquet.ByteArray:
			n, err := parseLong(c.text())
			if err != nil {
				return x.errf(name, "%v", err)
			}
			v.Long = n
		case c.isFloat:
			f := c.f64
			if f != math.Trunc(f) || math.IsInf(f, 0) {
				return x.errf(name, "not an integer: %s", c.text())
			}
			if f < -(1<<63) || f >= 1<<63 {
				return x.errf(name, "integer out of range: %s", c.text())
			}
			v.Long = int64(f)
		case c.big:
			return x.errf(name, "integer out of range: %d", c.u64)
		default:
			v.Long = c.i64
		}
	case metDouble:
		switch {
		case c.kind == parquet.ByteArray:
			f, err := parseDouble(c.text())
			if err != nil {
				return x.errf(name, "%v", err)
			}
			v.Double = f
		case c.isFloat:
			f := c.f64
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return x.errf(name, "not a finite number: %v", f)
			}
			if c.kind == parquet.Float {
				// As CSV would give it: the float's shortest decimal, read as a double.
				f, _ = strconv.ParseFloat(strconv.FormatFloat(f, 'g', -1, 32), 64)
			}
			v.Double = f
		case c.big:
			v.Double = float64(c.u64)
		default:
			v.Double = float64(c.i64)
		}
	case metSketch:
		b := c.raw // an input sketch's bytes as they are
		if c.kind != parquet.ByteArray {
			x.scratch = c.appendText(x.scratch[:0])
			b = x.scratch
		}
		var err error
		if v.Sketch, err = x.sketch(i, sk, b, false); err != nil {
			return x.errf(name, "%v", err)
		}
	case metCount, metNone:
	}
	return nil
}

// How the time column is read.
type timeHow uint8

const (
	timeNone   timeHow = iota
	timeEpoch          // an integer: value*timeMul/timeDiv milliseconds
	timeString         // text, parsed by timestamp.format
)

// pqColumn is one column read: its type, and its cursor in the current row group.
type pqColumn struct {
	name     string // the field
	leaf     *parquet.Column
	index    int // the leaf's column index in a row group
	kind     parquet.Kind
	logical  *format.LogicalType
	typeName string
	intType  bool // an integer logical type (or none)
	unsigned bool
	isFloat  bool
	maxDef   byte
	maxRep   byte
	elemDef  byte // for a list: the definition level at which an element exists

	wantStr    bool // dimensions read it: strs
	wantScalar bool // the time or a metric reads it: i64/u64/f64/raw

	timeHow          timeHow
	timeMul, timeDiv int64

	// The current page.
	pages parquet.Pages
	page  parquet.Page
	def   []byte
	rep   []byte
	li, n int // the next level, and the levels of the page
	vi    int // the next value
	nvals int // the values of the page
	// Its values (or, when idx is set, the dictionary's values, indexed by idx).
	idx   []int32
	bools []byte
	i32   []int32
	i64s  []int64
	f32   []float32
	f64s  []float64
	ba    []byte
	offs  []uint32
	vlen  int // the number of values in the arrays above
	dict  parquet.Dictionary
	dstrs []string // the dictionary's values as strings, filled as they are used
	dhave []bool

	intern map[string]string

	// The current row.
	null bool
	strs []string
	i64  int64
	u64  uint64
	big  bool // an unsigned value past int64: u64
	f64  float64
	raw  []byte // the bytes of a BYTE_ARRAY value, valid until the next row
}

// setType records the column's type.
func (c *pqColumn) setType(t parquet.Type) {
	c.kind = t.Kind()
	c.logical = t.LogicalType()
	if c.logical != nil && c.logical.Value == nil {
		c.logical = nil
	}
	c.typeName = c.kind.String()
	if c.logical != nil {
		c.typeName += " " + c.logical.String()
	}
	c.intType = true
	if c.logical != nil {
		switch lt := c.logical.Value.(type) {
		case *format.IntType:
			c.unsigned = !lt.IsSigned
		default:
			c.intType = false
		}
	}
	c.isFloat = c.kind == parquet.Float || c.kind == parquet.Double
}

// isString reports whether the column holds text: a BYTE_ARRAY with no logical type, or a
// STRING or ENUM one.
func (c *pqColumn) isString() bool {
	if c.kind != parquet.ByteArray {
		return false
	}
	if c.logical == nil {
		return true
	}
	switch c.logical.Value.(type) {
	case *format.StringType, *format.EnumType:
		return true
	}
	return false
}

func (c *pqColumn) isInt() bool {
	return (c.kind == parquet.Int32 || c.kind == parquet.Int64) && c.intType
}

func (c *pqColumn) dimOK() bool {
	return c.isString() || c.isInt() || c.kind == parquet.Boolean && c.intType
}

func (c *pqColumn) numberOK() bool {
	return c.isString() || c.isInt() || c.isFloat && c.intType
}

// sketchOK reports whether the column fits a sketch metric: bytes or text, an integer or a
// boolean, inserted as their text; a float too for a kind over numbers (agg.NumericInput);
// bytes or text for an input sketch.
func (c *pqColumn) sketchOK(input, numeric bool) bool {
	if input {
		return c.kind == parquet.ByteArray
	}
	return c.isString() || c.isInt() || c.kind == parquet.Boolean && c.intType || numeric && c.isFloat
}

func (c *pqColumn) closePages() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	if c.pages != nil {
		_ = c.pages.Close()
		c.pages = nil
	}
	c.li, c.n = 0, 0
}
