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
	// Rollup and Granularity are Schema's; MixedRollup says the segments differ in them
	// (each segment's are in Segments).
	Rollup      bool   `json:"rollup"`
	Granularity string `json:"granularity"`
	MixedRollup bool   `json:"mixedRollup"`
	// Schema is one every live segment fits (table.Entry.CommonSchema): the table's columns,
	// rolled up only when every segment is, at the finest of their granularities. Null until
	// a segment is appended; Columns lists its columns.
	Schema   *columns.Schema `json:"schema"`
	Columns  []schemaColumn  `json:"columns"`
	Segments []tableSegment  `json:"segments"`
}

// tableSegment is a live segment of a table's version, as its log lists it, with its rollup.
type tableSegment struct {
	Name        string `json:"name"`
	Interval    string `json:"interval"`
	Rows        int64  `json:"rows"`
	Bytes       int64  `json:"bytes"`
	Rollup      bool   `json:"rollup"`
	Granularity string `json:"granularity"`
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
	if common, ok := e.CommonSchema(); ok {
		rep.Schema, rep.Rollup, rep.Granularity = &common, common.Rollup, common.Granularity.String()
		rep.Columns = schemaColumns(common)
	}
	for _, s := range e.Segments {
		sch := e.SegmentSchema(s)
		rep.Segments = append(rep.Segments, tableSegment{Name: s.Name, Interval: s.Interval, Rows: s.Rows, Bytes: s.Bytes,
			Rollup: sch.Rollup, Granularity: sch.Granularity.String()})
	}
	rep.MixedRollup = e.Mixed()
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
	mixed := ""
	if rep.MixedRollup {
		mixed = "; the segments differ, each below"
	}
	fmt.Fprintf(tw, "rollup\t%v (granularity %s%s)\n", rep.Rollup, rep.Granularity, mixed)
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
	fmt.Fprintln(tw, "segment\tinterval\trows\tbytes\trollup")
	for _, s := range rep.Segments {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%v (%s)\n", s.Name, s.Interval, s.Rows, s.Bytes, s.Rollup, s.Granularity)
	}
	return tw.Flush()
}
