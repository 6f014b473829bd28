package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/merger/table"
)

const tableHelp = `A table is a location, a local directory or s3://BUCKET/PREFIX/, holding segments (in
segments/) and a log of versions (in _log/, one JSON file per version). Each version lists
every live segment; a version is committed by creating the next log entry only if it is
absent (on disk a rename that never replaces, then a directory fsync; on S3 a PutObject with
If-None-Match: *), so any number of writers on any machines can append at once, and a reader
sees one whole version. compact replaces a time chunk's many small segments by a few, in
one version, so that a reader sees the inputs or the outputs, never both. query, dump,
export, inspect and verify read a table's newest version, or --version N: a directory
holding _log/, or an s3:// location ending in /. vacuum removes what no retained version
needs.

Whether an S3 service honours If-None-Match is probed once, at a command's first write: on
one that does not, create, append and compact refuse to write, since two writers could both
commit one version, unless --single-writer is given. Then each commit checks that its log
entry is absent and puts it plainly: safe only while no other writer works on the table.`

func newTableCmd() *cobra.Command {
	s3 := &s3Flags{}
	var singleWriter bool // of create and append: one command runs
	cmd := &cobra.Command{
		Use:   "table",
		Short: "Create a table of segments, append to it, compact and vacuum it, show its log",
		Long:  tableHelp,
		Example: `  segtool table create new-table/
  segtool table append events/ day1.seg day2.seg
  segtool table compact --target-rows 1000000 events/
  segtool table vacuum --retain 24h events/
  segtool table log events/
  segtool table segments --json events/
  segtool query --group-by page events/
  segtool table create s3://seg/tables/events/`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("table: no subcommand given (create, append, compact, vacuum, log, segments; see 'segtool table --help')")
		},
	}
	create := &cobra.Command{
		Use:     "create [--single-writer] TABLE",
		Short:   "Create an empty table (version 1)",
		Long:    "create makes an empty table at TABLE: its directories on disk, and version 1 of its log.\n\n" + tableHelp,
		Example: "  segtool table create new-table/\n  segtool table create s3://seg/tables/events/",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := tableOptions(args[0], s3)
			if err != nil {
				return err
			}
			o.SingleWriter = singleWriter
			t, err := table.Create(cmd.Context(), args[0], o)
			if err != nil {
				return writeErr(args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created table %s (version 1)\n", t)
			return nil
		},
	}
	appendCmd := &cobra.Command{
		Use:   "append [--single-writer] TABLE SEG...",
		Short: "Copy segments into a table and commit them as one version",
		Long: `append checks each segment file (its footer, every checksum, columns equal to the table's:
the first append sets its schema), copies or uploads them into the table under new names,
then commits one version that adds them, on top of whatever version is newest by then. A
segment may be a local file or an object (s3://BUCKET/KEY: fetched once, checked, then
uploaded or written to disk), whatever the table's location. A segment whose rollup or
granularity differs from the table's schema is appended all the same: the log records its
own ('table segments' shows it).

` + tableHelp,
		Example: "  segtool table append events/ day1.seg day2.seg\n  segtool table append events/ s3://seg/day1.seg",
		Args:    usageArgs(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openWriter(cmd.Context(), args[0], s3, singleWriter, args[1:]...)
			if err != nil {
				return err
			}
			v, err := t.Append(cmd.Context(), args[1:])
			if err != nil {
				return writeErr(args[0], err)
			}
			e, err := t.Snapshot(cmd.Context(), v)
			if err != nil {
				return err
			}
			var rows int64
			for _, s := range e.Segments {
				if slices.Contains(e.Operation.Added, s.Name) {
					rows += s.Rows
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "appended %d segment(s), %d rows, to %s: version %d (%d segments, %d rows live)\n",
				len(args)-1, rows, t, v, len(e.Segments), e.Rows())
			return nil
		},
	}
	logCmd := &cobra.Command{
		Use:   "log TABLE",
		Short: "List a table's versions",
		Long: `log prints one line per version of the table, oldest first: its number, time, kind
(create, append, replace), the segments it added and removed, and the segments and rows live
in it.`,
		Example: "  segtool table log events/",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTable(cmd.Context(), args[0], s3)
			if err != nil {
				return err
			}
			log, err := t.Log(cmd.Context())
			if err != nil {
				return tableErr(err)
			}
			return writeLog(cmd.OutOrStdout(), log)
		},
	}
	var segVersion int
	var segJSON bool
	segmentsCmd := &cobra.Command{
		Use:   "segments [--version N] [--json] TABLE",
		Short: "List the live segments of a table's version",
		Long: `segments lists the segments live in the newest version of the table (or --version N): name,
interval, rows, bytes and footer checksum, and, for a segment whose rollup differs from the
table's schema (after 'table compact --rollup', say), its own rollup and granularity; with
--json, a JSON array of objects with those keys (rollup and granularity only where they
differ).`,
		Example: "  segtool table segments events/\n  segtool table segments --version 3 --json events/",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if segVersion < 0 {
				return usagef("table segments: --version %d: want a version number (0: the newest)", segVersion)
			}
			t, err := openTable(cmd.Context(), args[0], s3)
			if err != nil {
				return err
			}
			e, err := t.Snapshot(cmd.Context(), segVersion)
			if err != nil {
				return tableErr(err)
			}
			return writeSegments(cmd.OutOrStdout(), e, segJSON)
		},
	}
	segmentsCmd.Flags().IntVar(&segVersion, "version", 0, "the version to list (default: the newest)")
	segmentsCmd.Flags().BoolVar(&segJSON, "json", false, "print a JSON array")
	addSingleWriterFlag(create, &singleWriter)
	addSingleWriterFlag(appendCmd, &singleWriter)
	for _, c := range []*cobra.Command{create, appendCmd, newTableCompactCmd(s3), newTableVacuumCmd(s3), logCmd, segmentsCmd} {
		addS3Flags(c, s3)
		cmd.AddCommand(c)
	}
	return cmd
}

// tableOptions returns the options of the table at loc: its S3 client for an s3:// one.
func tableOptions(loc string, s3 *s3Flags) (table.Options, error) {
	var o table.Options
	if strings.HasPrefix(loc, "s3://") {
		c, err := s3.clientFor()
		if err != nil {
			return o, err
		}
		o.S3 = c
	}
	return o, nil
}

// openTable opens the table at loc; a malformed location is a usage error.
func openTable(ctx context.Context, loc string, s3 *s3Flags) (*table.Table, error) {
	return openWriter(ctx, loc, s3, false)
}

// openWriter opens the table at loc for a command that writes it: singleWriter is
// --single-writer (table.Options.SingleWriter). sources are the files the command reads
// besides the table: with an s3:// one among them, the table gets the S3 client too.
func openWriter(ctx context.Context, loc string, s3 *s3Flags, singleWriter bool, sources ...string) (*table.Table, error) {
	o, err := tableOptions(loc, s3)
	if err != nil {
		return nil, err
	}
	if o.S3 == nil && slices.ContainsFunc(sources, objstore.IsURL) {
		if o.S3, err = s3.clientFor(); err != nil {
			return nil, err
		}
	}
	o.SingleWriter = singleWriter
	t, err := table.Open(ctx, loc, o)
	if err != nil {
		return nil, tableErr(err)
	}
	return t, nil
}

// addSingleWriterFlag adds --single-writer to a command that commits versions of a table.
func addSingleWriterFlag(cmd *cobra.Command, v *bool) {
	cmd.Flags().BoolVar(v, "single-writer", false,
		"on an S3 service that ignores conditional writes (If-None-Match), commit anyway: check, then put; safe only while no other writer works on the table")
}

// writeErr is tableErr for a command that writes the table at loc: a service found not to
// honour conditional writes names --single-writer.
func writeErr(loc string, err error) error {
	if errors.Is(err, table.ErrUnsupported) && strings.HasPrefix(loc, "s3://") {
		return fmt.Errorf("%w; with no other writer on the table meanwhile, run this command with --single-writer", err)
	}
	return tableErr(err)
}

// tableVersion opens the table at loc and reads its version (0: the newest).
func tableVersion(ctx context.Context, loc string, version int, s3 *s3Flags) (*table.Table, *table.Entry, error) {
	if err := checkVersion(version); err != nil {
		return nil, nil, err
	}
	t, err := openTable(ctx, loc, s3)
	if err != nil {
		return nil, nil, err
	}
	e, err := t.Snapshot(ctx, version)
	if err != nil {
		return nil, nil, err
	}
	return t, e, nil
}

// checkVersion checks a --version value.
func checkVersion(version int) error {
	if version < 0 {
		return usagef("--version %d: want a version number (0: the newest)", version)
	}
	return nil
}

// noSegment is the error of a table's version that holds no segment to read.
func noSegment(t *table.Table, e *table.Entry) error {
	return fmt.Errorf("no segment to read: table %s holds no segment in version %d", t, e.Version)
}

// tableErr makes a malformed location or argument a usage error.
func tableErr(err error) error {
	if errors.Is(err, table.ErrInvalid) && !errors.Is(err, table.ErrCorrupt) {
		var u usageError
		if !errors.As(err, &u) {
			return usageError{err}
		}
	}
	return err
}

// writeLog prints one line per version.
func writeLog(w io.Writer, log []*table.Entry) error {
	if _, err := fmt.Fprintf(w, "%-8s %-24s %-8s %6s %8s %9s %12s\n", "version", "time", "kind", "added", "removed", "segments", "rows"); err != nil {
		return err
	}
	for _, e := range log {
		if _, err := fmt.Fprintf(w, "%-8d %-24s %-8s %6d %8d %9d %12d\n", e.Version, e.Time.UTC().Format("2006-01-02T15:04:05.000Z"),
			e.Operation.Kind, len(e.Operation.Added), len(e.Operation.Removed), len(e.Segments), e.Rows()); err != nil {
			return err
		}
	}
	return nil
}

// writeSegments prints a version's live segments, as text or JSON: a segment's own rollup only
// where it differs from the table's.
func writeSegments(w io.Writer, e *table.Entry, asJSON bool) error {
	if asJSON {
		b, err := json.MarshalIndent(e.Segments, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	for _, s := range e.Segments {
		own := ""
		if s.Rollup != nil {
			sch := e.SegmentSchema(s)
			own = fmt.Sprintf("  rollup %v granularity %s", sch.Rollup, sch.Granularity)
		}
		if _, err := fmt.Fprintf(w, "%s  %s  %d rows  %d bytes  footer %s%s\n", s.Name, s.Interval, s.Rows, s.Bytes, s.Footer, own); err != nil {
			return err
		}
	}
	return nil
}

// expandTables replaces each table among args (a directory holding _log/, or an s3://
// location ending in /) by the locations of the segments live in its version (0: the
// newest); other arguments stay as they are. A --version given with no table among args is a
// usage error.
func expandTables(ctx context.Context, args []string, version int, s3 *s3Flags) ([]string, error) {
	if err := checkVersion(version); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(args))
	tables := 0
	var empty error
	for _, a := range args {
		if !table.IsLocation(nil, a) {
			out = append(out, a)
			continue
		}
		tables++
		t, e, err := tableVersion(ctx, a, version, s3)
		if err != nil {
			return nil, err
		}
		for _, s := range e.Segments {
			out = append(out, t.Location(s.Name))
		}
		if len(e.Segments) == 0 {
			empty = noSegment(t, e)
		}
	}
	if version != 0 && tables == 0 {
		return nil, usagef("--version applies to tables, and no argument is one")
	}
	if len(out) == 0 {
		return nil, empty
	}
	return out, nil
}
