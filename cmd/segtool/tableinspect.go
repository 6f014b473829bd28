package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/writeout/writeout/columns"
)

// tableReport is what inspect prints of a table's version; its JSON form is --json's output.
type tableReport struct {
	Table        string `json:"table"`
	Version      int    `json:"version"`
	SegmentCount int    `json:"segmentCount"`
	Rows         int64  `json:"rows"`
	Bytes        int64  `json:"bytes"`
	// Interval spans the segments' intervals; null (IntervalISO empty) when there is none.
	Interval    *columns.Interval `json:"interval"`
	IntervalISO string            `json:"intervalISO"`
	Rollup      bool              `json:"rollup"`
	Granularity string            `json:"granularity"`
	// Schema is the table's, null until a segment is appended; Columns lists its columns.
	Schema   *columns.Schema `json:"schema"`
	Columns  []schemaColumn  `json:"columns"`
	Segments []tableSegment  `json:"segments"`
}

// tableSegment is a live segment of a table's version, as its log lists it.
type tableSegment struct {
	Name     string `json:"name"`
	Interval string `json:"interval"`
	Rows     int64  `json:"rows"`
	Bytes    int64  `json:"bytes"`
}

// inspectTable describes version (0: the newest) of the table at loc, from its log entry.
func inspectTable(ctx context.Context, loc string, version int, s3 *s3Flags) (*tableReport, error) {
	t, e, err := tableVersion(ctx, loc, version, s3)
	if err != nil {
		return nil, err
	}
	rep := &tableReport{Table: t.String(), Version: e.Version, SegmentCount: len(e.Segments), Rows: e.Rows(), Bytes: e.Bytes(),
		Granularity: columns.GranularityNone.String(), Columns: []schemaColumn{}, Segments: []tableSegment{}}
	if iv, ok := e.Interval(); ok {
		rep.Interval, rep.IntervalISO = &iv, iv.String()
	}
	if e.Schema != nil {
		rep.Schema, rep.Rollup, rep.Granularity = e.Schema, e.Schema.Rollup, e.Schema.Granularity.String()
		rep.Columns = schemaColumns(*e.Schema)
	}
	for _, s := range e.Segments {
		rep.Segments = append(rep.Segments, tableSegment{Name: s.Name, Interval: s.Interval, Rows: s.Rows, Bytes: s.Bytes})
	}
	return rep, nil
}

// printTableReport prints a table report as inspect prints a segment's: the totals, the
// columns, then one line per segment.
func printTableReport(out io.Writer, rep *tableReport) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	iv := rep.IntervalISO
	if iv == "" {
		iv = "-"
	}
	fmt.Fprintf(tw, "table\t%s\n", rep.Table)
	fmt.Fprintf(tw, "version\t%d\n", rep.Version)
	fmt.Fprintf(tw, "segments\t%d\n", rep.SegmentCount)
	fmt.Fprintf(tw, "rows\t%d\n", rep.Rows)
	fmt.Fprintf(tw, "size\t%s (%d bytes)\n", humanBytes(rep.Bytes), rep.Bytes)
	fmt.Fprintf(tw, "interval\t%s\n", iv)
	if rep.Schema == nil {
		fmt.Fprintf(tw, "schema\tnone yet (no segment appended)\n")
		return tw.Flush()
	}
	fmt.Fprintf(tw, "rollup\t%v (granularity %s)\n", rep.Rollup, rep.Granularity)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "column\ttype")
	for _, c := range rep.Columns {
		fmt.Fprintf(tw, "%s\t%s\n", c.Name, c.typeText())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.Segments) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "segment\tinterval\trows\tbytes")
	for _, s := range rep.Segments {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", s.Name, s.Interval, s.Rows, s.Bytes)
	}
	return tw.Flush()
}
