package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/merger/table"
)

// segmentReport is what inspect prints; its JSON form is --json's output.
type segmentReport struct {
	Path        string           `json:"path"`
	Size        int64            `json:"size"`
	Rows        int              `json:"rows"`
	Interval    columns.Interval `json:"interval"`
	IntervalISO string           `json:"intervalISO"`
	Rollup      bool             `json:"rollup"`
	Granularity string           `json:"granularity"`
	Schema      columns.Schema   `json:"schema"`
	Columns     []columnReport   `json:"columns"`
}

// schemaColumn is a column as a schema says it: its name, type and aggregator.
type schemaColumn struct {
	Name       string `json:"name"`
	Type       string `json:"type"` // long (time), string, string multi-value, string raw, long, double, hyperUnique
	Aggregator string `json:"aggregator,omitempty"`
}

type columnReport struct {
	schemaColumn
	Cardinality int     `json:"cardinality,omitempty"` // dictionary dimensions: ids, null included
	HasNull     bool    `json:"hasNull,omitempty"`
	NullRows    int64   `json:"nullRows,omitempty"` // long and double metrics: the rows holding null
	Bytes       int64   `json:"bytes"`              // all parts in the file
	PlainBytes  int64   `json:"plainBytes"`         // the values written plainly (see the help)
	Ratio       float64 `json:"ratio"`              // PlainBytes / Bytes
	Parts       []part  `json:"parts"`
}

type part struct {
	Kind     string `json:"kind"`
	Encoding string `json:"encoding"`
	// Compression is the codec of a chunked part's chunks (columns.ChunkCodecs.String: "s2",
	// "zstd", "none", or with counts when they differ, "zstd:12+none:3"); empty for the
	// other parts. Chunks holds the counts.
	Compression string               `json:"compression,omitempty"`
	Chunks      *columns.ChunkCodecs `json:"chunks,omitempty"`
	Offset      int64                `json:"offset"`
	Bytes       int64                `json:"bytes"`
	CRC         string               `json:"crc32c"`
}

func newInspectCmd() *cobra.Command {
	var asJSON bool
	var version int
	s3 := &s3Flags{}
	cmd := &cobra.Command{
		Use:   "inspect [--json] SEG|TABLE",
		Short: "Describe a segment (schema, rows, interval, each column's parts and sizes) or a table",
		Long: `inspect prints a segment's schema, row count and interval, then one line per column: its type,
its cardinality (dictionary dimensions: distinct values, null counted as one; long and double
metrics: "- (N null)" when N rows hold null, nullRows in --json), the bytes of each of its
parts (values, dictionary, ids, bitmaps, nulls) with their encodings, and its compression
ratio: the column's plain size over its bytes in the file. The plain size is 8 bytes a row for
__time and numbers, the bytes of every row's strings for dimensions, and the serialized bytes of
every row's sketch for hyperUnique. A chunked part (values, ids) also shows the codec of its
chunks: none, s2 or zstd (merge and ingest --compression), or the counts when it mixes them,
as zstd:12+none:3 (a chunk is stored uncompressed when compressing does not make it smaller).
--json prints the same as one JSON object.

A table (a directory holding _log/, or an s3:// location ending in /) is described from the
log entry of its newest version, or of --version N, without reading its segments: the
version, its segment count, rows, bytes and interval (spanning its segments'), the schema's
columns with their types, then one line per live segment: name, interval, rows, bytes.
--json prints one object with the keys table, version, segmentCount, rows, bytes, interval,
intervalISO, rollup, granularity, schema, columns and segments (each with name, interval,
rows, bytes).

` + s3Help,
		Example: `  segtool inspect events.seg
  segtool inspect --json events.seg | jq '.columns[] | {name, ratio}'
  segtool inspect events/
  segtool inspect --version 2 --json events/`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rep any
			var err error
			if table.IsLocation(nil, args[0]) {
				rep, err = inspectTable(cmd.Context(), args[0], version, s3)
			} else if version != 0 {
				return usagef("--version applies to tables, and %s is none", args[0])
			} else {
				rep, err = inspectWith(cmd.Context(), args[0], s3)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			if t, ok := rep.(*tableReport); ok {
				return printTableReport(out, t)
			}
			return printReport(out, rep.(*segmentReport))
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&version, "version", 0, "the version of a table (default: the newest)")
	addS3Flags(cmd, s3)
	return cmd
}

func inspect(path string) (*segmentReport, error) {
	return inspectWith(context.Background(), path, &s3Flags{})
}

// inspectWith describes a segment file or an s3:// object.
func inspectWith(ctx context.Context, path string, s3 *s3Flags) (_ *segmentReport, err error) {
	seg, closeSeg, err := openInput(ctx, path, s3)
	if err != nil {
		return nil, err
	}
	defer func() { err = multierr.Join(err, closeSeg()) }()
	s := seg.Schema()
	rep := &segmentReport{Path: path, Size: seg.Info().Size, Rows: seg.Rows(), Interval: seg.Interval(),
		IntervalISO: seg.Interval().String(), Rollup: s.Rollup, Granularity: s.Granularity.String(), Schema: s}
	for _, c := range schemaColumns(s) {
		rep.Columns = append(rep.Columns, columnReport{schemaColumn: c})
	}
	rows := int64(seg.Rows())
	rep.Columns[0].PlainBytes = rows * 8
	for i, d := range s.Dimensions {
		c := &rep.Columns[1+i]
		var err error
		if d.Raw {
			c.PlainBytes, err = rawPlainBytes(seg, d.Name)
		} else {
			c.Cardinality, c.HasNull, c.PlainBytes, err = dimStats(seg, d.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	for i, m := range s.Metrics {
		c := &rep.Columns[1+len(s.Dimensions)+i]
		c.PlainBytes = rows * 8
		var err error
		var nulls *roaring.Bitmap
		switch m.ValueType() {
		case columns.MetricLong:
			var lc *columns.Column[int64]
			if lc, err = seg.Long(m.Name); err == nil {
				nulls, err = lc.Nulls()
			}
		case columns.MetricDouble:
			var dc *columns.Column[float64]
			if dc, err = seg.Double(m.Name); err == nil {
				nulls, err = dc.Nulls()
			}
		case columns.MetricHyperUnique:
			c.PlainBytes, err = sketchPlainBytes(seg, m.Name)
		default: // another sketch aggregator, of its own type
			c.PlainBytes, err = sketchPlainBytes(seg, m.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if nulls != nil {
			c.NullRows = int64(nulls.GetCardinality())
		}
	}
	byName := map[string]*columnReport{}
	for i := range rep.Columns {
		byName[rep.Columns[i].Name] = &rep.Columns[i]
	}
	for i, p := range seg.Info().Parts {
		c := byName[p.Column]
		if c == nil {
			continue
		}
		pr := part{Kind: p.Kind.String(), Encoding: p.Encoding.String(), Offset: p.Offset, Bytes: p.Length,
			CRC: fmt.Sprintf("%08x", p.CRC)}
		codecs, chunked, err := seg.PartCodecs(i)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if chunked {
			pr.Compression, pr.Chunks = codecs.String(), &codecs
		}
		c.Parts = append(c.Parts, pr)
		c.Bytes += p.Length
	}
	for i := range rep.Columns {
		c := &rep.Columns[i]
		if c.Bytes > 0 {
			c.Ratio = float64(c.PlainBytes) / float64(c.Bytes)
		}
	}
	return rep, nil
}

// schemaColumns returns the columns of schema s, __time first, each with its type as inspect
// names it.
func schemaColumns(s columns.Schema) []schemaColumn {
	out := []schemaColumn{{Name: columns.TimeColumn, Type: "long (time)"}}
	for _, d := range s.Dimensions {
		c := schemaColumn{Name: d.Name, Type: "string"}
		switch {
		case d.Raw:
			c.Type = "string raw"
		case d.MultiValue:
			c.Type = "string multi-value"
		}
		if d.NoBitmapIndex {
			c.Type += " (no bitmap index)"
		}
		out = append(out, c)
	}
	for _, m := range s.Metrics {
		out = append(out, schemaColumn{Name: m.Name, Type: string(m.ValueType()), Aggregator: string(m.Aggregator)})
	}
	return out
}

// typeText is the column's type as inspect prints it: with its aggregator where that says
// more.
func (c schemaColumn) typeText() string {
	if c.Aggregator != "" && c.Aggregator != c.Type {
		return c.Type + " " + c.Aggregator
	}
	return c.Type
}

// dimStats returns a dictionary dimension's cardinality, whether it has null, and the bytes
// of its rows' values.
func dimStats(seg *columns.Segment, name string) (int, bool, int64, error) {
	col, err := seg.Dim(name)
	if err != nil {
		return 0, false, 0, err
	}
	lens := make([]int64, 0, col.Cardinality())
	it := col.Dictionary()
	for it.Next() {
		lens = append(lens, int64(len(it.Value())))
	}
	if err := it.Err(); err != nil {
		return 0, false, 0, err
	}
	var total int64
	cur := col.Cursor()
	for r := 0; r < seg.Rows(); {
		first, ids, offs, err := cur.Chunk(r)
		if err != nil {
			return 0, false, 0, err
		}
		for _, id := range ids {
			if int(id) < len(lens) {
				total += lens[id]
			}
		}
		n := len(ids)
		if offs != nil {
			n = len(offs) - 1
		}
		if first+n <= r {
			return 0, false, 0, fmt.Errorf("dimension %q: empty chunk at row %d", name, r)
		}
		r = first + n
	}
	return col.Cardinality(), col.HasNull(), total, nil
}

func rawPlainBytes(seg *columns.Segment, name string) (int64, error) {
	col, err := seg.Raw(name)
	if err != nil {
		return 0, err
	}
	cur := col.Cursor()
	var total int64
	for r := 0; r < seg.Rows(); r++ {
		b, _, err := cur.Bytes(r)
		if err != nil {
			return 0, err
		}
		total += int64(len(b))
	}
	return total, nil
}

func sketchPlainBytes(seg *columns.Segment, name string) (int64, error) {
	col, err := seg.Sketch(name)
	if err != nil {
		return 0, err
	}
	cur := col.Cursor()
	var total int64
	for r := 0; r < seg.Rows(); r++ {
		b, err := cur.Bytes(r)
		if err != nil {
			return 0, err
		}
		total += int64(len(b))
	}
	return total, nil
}

func printReport(out io.Writer, rep *segmentReport) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "segment\t%s\n", rep.Path)
	fmt.Fprintf(tw, "size\t%s (%d bytes)\n", humanBytes(rep.Size), rep.Size)
	fmt.Fprintf(tw, "rows\t%d\n", rep.Rows)
	fmt.Fprintf(tw, "interval\t%s\n", rep.IntervalISO)
	fmt.Fprintf(tw, "rollup\t%v (granularity %s)\n", rep.Rollup, rep.Granularity)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "column\ttype\tcardinality\tbytes\tplain\tratio\tparts (kind encoding [compression] bytes)")
	for _, c := range rep.Columns {
		card := "-"
		if c.NullRows > 0 {
			card = fmt.Sprintf("- (%d null)", c.NullRows)
		}
		if c.Cardinality > 0 {
			card = fmt.Sprint(c.Cardinality)
			if c.HasNull {
				card += " (null)"
			}
		}
		var parts []string
		for _, p := range c.Parts {
			if p.Compression != "" {
				parts = append(parts, fmt.Sprintf("%s %s %s %d", p.Kind, p.Encoding, p.Compression, p.Bytes))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s %d", p.Kind, p.Encoding, p.Bytes))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.2f\t%s\n", c.Name, c.typeText(), card, c.Bytes, c.PlainBytes, c.Ratio, strings.Join(parts, ", "))
	}
	return tw.Flush()
}
