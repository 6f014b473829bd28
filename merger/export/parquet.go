package export

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/invalid"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/parquetpool"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/location"
)

// schemaKey is the key of the Parquet file's key/value metadata that holds the exported
// segment's schema, as columns.Schema's JSON.
const schemaKey = "writeout.schema"

// DefaultRowGroupRows is the default of Options.RowGroupRows: about what DuckDB writes
// (122,880 rows), a size readers handle well while the writer's memory stays bounded.
const DefaultRowGroupRows = 1 << 17

// ErrInvalid marks invalid options. It wraps medium.ErrInvalid.
var ErrInvalid = invalid.Sentinel("export: invalid options")

// Options configure an export. The zero value writes row groups of DefaultRowGroupRows rows
// and stages parquet-go's column pages in memory.
type Options struct {
	// RowGroupRows is the number of rows of each row group (the last may hold fewer); 0 means
	// DefaultRowGroupRows. The writer holds about one row group's encoded pages at a time.
	RowGroupRows int
	// Medium, when set, is where parquet-go stages the column pages of the row group being
	// written (through a parquetpool.Pool: one child of Medium per page buffer, all released
	// when the export returns); nil means parquet-go's in-memory buffers. The export does not
	// close Medium.
	Medium medium.Medium
	// PageBufferSize is parquet-go's page buffer size (see parquet.PageBufferSize); 0 means
	// parquet-go's default.
	PageBufferSize int
	// Progress, when set, is called with the rows written so far, from the export's
	// goroutine, about every ProgressRows rows and after the last row (with the segment's
	// rows; no call for a segment of none), before the file is closed. It must return quickly.
	Progress func(rowsDone int64)
	// ProgressRows is the interval of Progress calls; 0 means 65536 rows.
	ProgressRows int
}

func (o *Options) ensureDefaults() error {
	switch {
	case o.RowGroupRows < 0:
		return fmt.Errorf("%w: RowGroupRows %d is negative", ErrInvalid, o.RowGroupRows)
	case o.PageBufferSize < 0:
		return fmt.Errorf("%w: PageBufferSize %d is negative", ErrInvalid, o.PageBufferSize)
	case o.ProgressRows < 0:
		return fmt.Errorf("%w: ProgressRows %d is negative", ErrInvalid, o.ProgressRows)
	}
	if o.RowGroupRows == 0 {
		o.RowGroupRows = DefaultRowGroupRows
	}
	if o.ProgressRows == 0 {
		o.ProgressRows = 1 << 16
	}
	return nil
}

// Info describes an export.
type Info struct {
	// Path is the published file or object (ParquetFile, ParquetTo); empty for WriteParquet.
	Path string
	// Rows and RowGroups count what the file holds; Size is its bytes.
	Rows      int
	RowGroups int
	Size      int64
	// Syncs counts the fdatasync and fsync calls of ParquetFile's publication.
	Syncs int
	// Schema is the exported segment's schema.
	Schema columns.Schema
	// CountsAbove1 lists the count metrics holding a value other than 1 in some row (a
	// rolled-up segment's): re-ingesting the file would count each row once, so IngestSpec
	// reads them with longSum instead.
	CountsAbove1 []string
}

// batchRows is the number of rows given to parquet-go at once.
const batchRows = 256

// WriteParquet writes the rows of seg, in segment order, to w as a Parquet file (see the
// package documentation for its schema). A segment that does not read back (a part that fails
// its checksum or does not decode) is an error naming the segment and wrapping
// columns.ErrCorrupt; an error of w is returned wrapped. w then holds a partial file. The
// export stops with ctx's error once ctx is done.
func WriteParquet(ctx context.Context, w io.Writer, seg *columns.Segment, opts Options) (Info, error) {
	if err := opts.ensureDefaults(); err != nil {
		return Info{}, err
	}
	x := newExporter(seg.Schema(), []merger.Input{segmentInput{seg}})
	cw := &countingWriter{w: w}
	info, err := x.run(ctx, cw, opts)
	info.Size = cw.n
	if err != nil {
		return Info{}, err
	}
	return info, nil
}

// ParquetFile writes the rows of seg as WriteParquet does into a file published at dst with
// columns.PublishFile: written under a temp name (or unnamed) in dst's directory, synced per
// publish.Durability, then named dst, never replacing an existing file unless publish.Replace.
// On failure nothing is left behind and an existing dst is as it was. It is ParquetTo a
// location.File.
func ParquetFile(ctx context.Context, dst string, seg *columns.Segment, opts Options, publish columns.PublishOptions) (Info, error) {
	return ParquetTo(ctx, &location.File{Path: dst, Options: publish}, seg, opts)
}

// ParquetTo writes the rows of seg as WriteParquet does into out, published as
// merger.MergeTo publishes a merge: a local file or an S3 object (merger/location). out.Check
// runs first; on failure out leaves nothing (merger.Output.Publish). Info.Path is out's name.
func ParquetTo(ctx context.Context, out merger.Output, seg *columns.Segment, opts Options) (Info, error) {
	if err := opts.ensureDefaults(); err != nil {
		return Info{}, err
	}
	return newExporter(seg.Schema(), []merger.Input{segmentInput{seg}}).publish(ctx, out, opts)
}

// ParquetInputsTo writes the rows of inputs one after the other, each in segment order, into
// out as one Parquet file, published as ParquetTo publishes one segment's: the live segments
// of a table, say, which share their columns. The file's columns and metadata are those of
// the export of a segment of schema s (its types spelled out, as a segment's are). Each
// input is opened when its turn comes and closed once its rows are written; one whose
// columns are not s's fails the export with an error naming it and wrapping
// columns.ErrSchema. Inputs may differ from s in rollup and granularity, which the Parquet
// columns do not hold: a row is exported as its segment stores it (a rolled-up row's count
// is its count: CountsAbove1), so s should be one every input's rows fit (a table's
// table.Entry.CommonSchema: rolled up only when every input is, at the finest granularity).
// Info counts the rows of every input (CountsAbove1 lists a count metric above 1 in any),
// and Options.Progress the rows written so far over all of them. With no input the file
// holds no row.
func ParquetInputsTo(ctx context.Context, out merger.Output, s columns.Schema, inputs []merger.Input, opts Options) (Info, error) {
	if err := opts.ensureDefaults(); err != nil {
		return Info{}, err
	}
	if err := s.Validate(); err != nil {
		return Info{}, fmt.Errorf("%w: schema: %w", ErrInvalid, err)
	}
	return newExporter(s.Normalized(), inputs).publish(ctx, out, opts)
}

// publish runs the export into out.
func (x *exporter) publish(ctx context.Context, out merger.Output, opts Options) (Info, error) {
	if err := out.Check(ctx); err != nil {
		return Info{}, fmt.Errorf("export: %w", err)
	}
	var (
		info   Info
		runErr error
	)
	err := out.Publish(ctx, func(w io.Writer) error {
		cw := &countingWriter{w: w}
		info, runErr = x.run(ctx, cw, opts)
		info.Size = cw.n
		return runErr
	})
	if err != nil {
		if runErr != nil && errors.Is(err, runErr) {
			return Info{}, err // names the segment already
		}
		return Info{}, fmt.Errorf("export: %w", err)
	}
	info.Path = out.Name()
	if f, ok := out.(*location.File); ok {
		info.Path, info.Size, info.Syncs = f.Info.Path, f.Info.Size, f.Info.Syncs
	}
	return info, nil
}

// exporter writes the rows of its inputs, one after the other, as one Parquet file of schema.
type exporter struct {
	schema columns.Schema
	pq     *parquet.Schema
	inputs []merger.Input
}

func newExporter(s columns.Schema, inputs []merger.Input) *exporter {
	return &exporter{schema: s, pq: parquetSchema(s), inputs: inputs}
}

// name names the export in errors that are about no one input: the input's name when there
// is one, else how many.
func (x *exporter) name() string {
	if len(x.inputs) == 1 {
		return x.inputs[0].Name()
	}
	return fmt.Sprintf("%d segments", len(x.inputs))
}

// segmentInput is an open segment as a merger.Input; its close leaves it open.
type segmentInput struct{ seg *columns.Segment }

func (in segmentInput) Name() string {
	if n := in.seg.Name(); n != "" {
		return n
	}
	return "segment"
}

func (in segmentInput) Open(context.Context) (*columns.Segment, func() error, error) {
	return in.seg, func() error { return nil }, nil
}

// column reads one segment column row by row and appends its Parquet values.
type column struct {
	index  int // the Parquet leaf column
	multi  bool
	dim    *columns.DimCursor
	raw    *columns.RawCursor
	long   *columns.Cursor[int64]
	double *columns.Cursor[float64]
	sketch *columns.SketchCursor
	nulls  *roaring.Bitmap // metric nulls; nil: none
	count  bool            // a count metric
	above1 bool            // the count metric held a value other than 1
}

// segmentColumns returns the column readers of seg, of schema s.
func segmentColumns(seg *columns.Segment, s columns.Schema) ([]column, error) {
	cols := make([]column, 0, len(s.Dimensions)+len(s.Metrics))
	for i, d := range s.Dimensions {
		c := column{index: 1 + i, multi: d.MultiValue}
		if d.Raw {
			rc, err := seg.Raw(d.Name)
			if err != nil {
				return nil, err
			}
			c.raw = rc.Cursor()
		} else {
			dc, err := seg.Dim(d.Name)
			if err != nil {
				return nil, err
			}
			c.dim = dc.Cursor()
		}
		cols = append(cols, c)
	}
	for i, m := range s.Metrics {
		c := column{index: 1 + len(s.Dimensions) + i, count: m.Agg().CountsRows}
		var err error
		switch storedType(m) {
		case columns.MetricLong:
			var lc *columns.Column[int64]
			if lc, err = seg.Long(m.Name); err == nil {
				c.long = lc.Cursor()
				c.nulls, err = metricNulls(seg, m)
			}
		case columns.MetricDouble:
			var dc *columns.Column[float64]
			if dc, err = seg.Double(m.Name); err == nil {
				c.double = dc.Cursor()
				c.nulls, err = metricNulls(seg, m)
			}
		case columns.MetricHyperUnique:
			var sc *columns.SketchColumn
			if sc, err = seg.Sketch(m.Name); err == nil {
				c.sketch = sc.Cursor()
			}
		}
		if err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// metricNulls returns the rows where metric m of seg is null, or nil when it has none (always
// so for segments before format version 3). Every long and double metric's nulls come through
// here.
func metricNulls(seg *columns.Segment, m columns.Metric) (*roaring.Bitmap, error) {
	switch storedType(m) {
	case columns.MetricLong:
		c, err := seg.Long(m.Name)
		if err != nil {
			return nil, err
		}
		return c.Nulls()
	case columns.MetricDouble:
		c, err := seg.Double(m.Name)
		if err != nil {
			return nil, err
		}
		return c.Nulls()
	case columns.MetricHyperUnique:
	}
	return nil, nil
}

// rowWriter hands the rows of segments to one parquet.Writer, batchRows at a time, and counts
// them for Options.Progress.
type rowWriter struct {
	pw       parquet.RowWriter
	opts     Options
	batch    []parquet.Row
	arena    []byte
	done     int    // rows written, over every segment
	next     int    // the row count of the next Progress call
	reported int    // the rows of the last Progress call
	above1   []bool // by metric: a count metric held a value other than 1
}

// run writes the Parquet file to w.
func (x *exporter) run(ctx context.Context, w io.Writer, opts Options) (info Info, err error) {
	info.Schema = x.schema
	meta, err := json.Marshal(x.schema)
	if err != nil {
		return info, fmt.Errorf("export: %s: schema: %w", x.name(), err)
	}
	wopts := []parquet.WriterOption{
		x.pq,
		parquet.Compression(&parquet.Zstd),
		parquet.MaxRowsPerRowGroup(int64(opts.RowGroupRows)),
		parquet.KeyValueMetadata(schemaKey, string(meta)),
		// A dictionary is held in memory while its row group is written: past this size the
		// rest of the row group's column is written PLAIN (parquet-go's fallback).
		parquet.DictionaryMaxBytes(8 << 20),
	}
	if opts.PageBufferSize > 0 {
		wopts = append(wopts, parquet.PageBufferSize(opts.PageBufferSize))
	}
	if opts.Medium != nil {
		pool := parquetpool.New(opts.Medium)
		defer func() { err = multierr.Join(err, pool.Close()) }()
		wopts = append(wopts, parquet.ColumnPageBuffers(pool))
	}
	cfg, err := parquet.NewWriterConfig(wopts...)
	if err != nil {
		return info, fmt.Errorf("export: %s: %w", x.name(), err)
	}
	pw := parquet.NewWriter(w, cfg)
	rw := &rowWriter{pw: pw, opts: opts, batch: make([]parquet.Row, 0, batchRows),
		next: opts.ProgressRows, above1: make([]bool, len(x.schema.Metrics))}
	for _, in := range x.inputs {
		if err := x.writeInput(ctx, rw, in); err != nil {
			return info, err
		}
	}
	if opts.Progress != nil && rw.done > rw.reported {
		opts.Progress(int64(rw.done))
	}
	if err := pw.Close(); err != nil {
		return info, fmt.Errorf("export: %s: write: %w", x.name(), err)
	}
	info.Rows = rw.done
	info.RowGroups = (rw.done + opts.RowGroupRows - 1) / opts.RowGroupRows
	for i, above := range rw.above1 {
		if above {
			info.CountsAbove1 = append(info.CountsAbove1, x.schema.Metrics[i].Name)
		}
	}
	return info, nil
}

// writeInput opens in and writes its rows through rw.
func (x *exporter) writeInput(ctx context.Context, rw *rowWriter, in merger.Input) (err error) {
	name := in.Name()
	seg, closeSeg, err := in.Open(ctx)
	if err != nil {
		return fmt.Errorf("export: %s: %w", name, err)
	}
	defer func() {
		if cerr := closeSeg(); cerr != nil {
			err = multierr.Join(err, fmt.Errorf("export: %s: %w", name, cerr))
		}
	}()
	got := seg.Schema()
	got.Rollup, got.Granularity = x.schema.Rollup, x.schema.Granularity // not in the columns
	if !got.Equal(x.schema) {
		return fmt.Errorf("export: %s: %w: the segment's columns differ from the export's", name, columns.ErrSchema)
	}
	cols, err := segmentColumns(seg, x.schema)
	if err != nil {
		return fmt.Errorf("export: %s: %w", name, err)
	}
	rows := seg.Rows()
	tc := seg.Time().Cursor()
	for start := 0; start < rows; start += batchRows {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("export: %s: %w", name, err)
		}
		end := min(start+batchRows, rows)
		batch, arena := rw.batch[:0], rw.arena[:0]
		for r := start; r < end; r++ {
			var row parquet.Row
			if k := len(batch); k < cap(batch) {
				row = batch[:k+1][k][:0] // reuse the values slice of an earlier batch
			}
			t, err := tc.At(r)
			if err != nil {
				return fmt.Errorf("export: %s: row %d: %w", name, r, err)
			}
			row = append(row, parquet.Int64Value(t).Level(0, 0, 0))
			for i := range cols {
				if row, arena, err = cols[i].appendValues(row, arena, r); err != nil {
					return fmt.Errorf("export: %s: row %d: %w", name, r, err)
				}
			}
			batch = append(batch, row)
		}
		rw.batch, rw.arena = batch, arena
		if _, err := rw.pw.WriteRows(batch); err != nil {
			return fmt.Errorf("export: %s: write: %w", name, err)
		}
		rw.done += end - start
		if rw.opts.Progress != nil && rw.done >= rw.next {
			rw.opts.Progress(int64(rw.done))
			rw.reported, rw.next = rw.done, rw.done+rw.opts.ProgressRows
		}
	}
	nd := len(x.schema.Dimensions)
	for i, c := range cols {
		if c.above1 {
			rw.above1[i-nd] = true
		}
	}
	return nil
}

// appendValues appends row r's values of column c to row; the bytes of strings and sketches
// are copied into arena, which the caller keeps until parquet-go has taken the row.
func (c *column) appendValues(row parquet.Row, arena []byte, r int) (parquet.Row, []byte, error) {
	null := parquet.NullValue().Level(0, 0, c.index)
	bytesValue := func(b []byte, rep, def int) parquet.Value {
		k := len(arena)
		arena = append(arena, b...)
		return parquet.ByteArrayValue(arena[k:len(arena):len(arena)]).Level(rep, def, c.index)
	}
	switch {
	case c.dim != nil:
		vals, err := c.dim.Values(r)
		if err != nil {
			return row, arena, err
		}
		if len(vals) == 0 {
			return append(row, null), arena, nil
		}
		if !c.multi {
			return append(row, bytesValue([]byte(vals[0]), 0, 1)), arena, nil
		}
		for k, v := range vals {
			rep := 0
			if k > 0 {
				rep = 1
			}
			row = append(row, bytesValue([]byte(v), rep, 2))
		}
		return row, arena, nil
	case c.raw != nil:
		b, ok, err := c.raw.Bytes(r)
		if err != nil || !ok {
			return append(row, null), arena, err
		}
		return append(row, bytesValue(b, 0, 1)), arena, nil
	case c.sketch != nil:
		b, err := c.sketch.Bytes(r)
		if err != nil {
			return row, arena, err
		}
		return append(row, bytesValue(b, 0, 1)), arena, nil
	}
	if c.nulls != nil && c.nulls.Contains(uint32(r)) {
		return append(row, null), arena, nil
	}
	if c.long != nil {
		v, err := c.long.At(r)
		if err != nil {
			return row, arena, err
		}
		if c.count && v != 1 {
			c.above1 = true
		}
		return append(row, parquet.Int64Value(v).Level(0, 1, c.index)), arena, nil
	}
	v, err := c.double.At(r)
	if err != nil {
		return row, arena, err
	}
	return append(row, parquet.DoubleValue(v).Level(0, 1, c.index)), arena, nil
}

// parquetSchema returns the Parquet schema of the export of a segment of schema s: __time,
// the dimensions, then the metrics, in schema order.
func parquetSchema(s columns.Schema) *parquet.Schema {
	g := orderedGroup{Group: parquet.Group{}}
	add := func(name string, n parquet.Node) {
		g.Group[name] = n
		g.order = append(g.order, name)
	}
	add(columns.TimeColumn, parquet.Timestamp(parquet.Millisecond))
	for _, d := range s.Dimensions {
		str := parquet.String()
		switch {
		case d.Raw:
			// Long payloads, stored without a dictionary in the segment too: PLAIN.
			add(d.Name, parquet.Optional(parquet.Encoded(str, &parquet.Plain)))
		case d.MultiValue:
			add(d.Name, parquet.Optional(parquet.List(parquet.Encoded(str, &parquet.RLEDictionary))))
		default:
			add(d.Name, parquet.Optional(parquet.Encoded(str, &parquet.RLEDictionary)))
		}
	}
	for _, m := range s.Metrics {
		switch storedType(m) {
		case columns.MetricLong:
			add(m.Name, parquet.Optional(parquet.Leaf(parquet.Int64Type)))
		case columns.MetricDouble:
			add(m.Name, parquet.Optional(parquet.Leaf(parquet.DoubleType)))
		case columns.MetricHyperUnique:
			add(m.Name, parquet.Optional(parquet.Leaf(parquet.ByteArrayType)))
		}
	}
	return parquet.NewSchema("writeout", g)
}

// orderedGroup is a parquet.Group whose fields come in the order given (parquet.Group sorts
// them by name): the export's columns keep the segment's order.
type orderedGroup struct {
	parquet.Group
	order []string
}

func (g orderedGroup) Fields() []parquet.Field {
	fields := g.Group.Fields()
	rank := make(map[string]int, len(g.order))
	for i, n := range g.order {
		rank[n] = i
	}
	slices.SortFunc(fields, func(a, b parquet.Field) int { return rank[a.Name()] - rank[b.Name()] })
	return fields
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// storedType returns how metric m is stored: long, double, or, for every sketch aggregator,
// hyperUnique's form (one sketch's bytes per row).
func storedType(m columns.Metric) columns.MetricType {
	if m.Agg().Type == agg.SketchType {
		return columns.MetricHyperUnique
	}
	return m.ValueType()
}
