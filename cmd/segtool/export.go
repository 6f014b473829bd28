package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/export"
	"github.com/writeout/writeout/merger/location"
	"github.com/writeout/writeout/merger/table"
)

type exportFlags struct {
	format       string
	out          string
	specOut      string
	replace      bool
	rowGroupRows int
	medium       string
	tmpDir       string
	durability   string
	quiet        bool
	progress     string
	version      int // of a table; 0: the newest
	s3           *s3Flags
}

func newExportCmd() *cobra.Command {
	f := exportFlags{s3: &s3Flags{}}
	cmd := &cobra.Command{
		Use:   "export --format parquet --out FILE [--spec-out SPEC.json] SEG|TABLE",
		Short: "Write a segment's or a table's rows as a Parquet file",
		Long: `export writes every row of a segment, in segment order (time, then dimensions), as a Parquet
file: __time as INT64 TIMESTAMP(MILLIS, UTC), each dimension as an optional STRING (null as
null; dictionary-encoded, raw dimensions plain), a multi-value dimension as an optional LIST of
strings (a null row as a null list), long metrics as optional INT64, double metrics as optional
DOUBLE, hyperUnique metrics as optional BYTE_ARRAY holding the sketch's bytes. Every column is
zstd-compressed; the segment's schema is in the file's key/value metadata, key writeout.schema.
Rows stream, --row-group-rows per row group; parquet-go stages each row group's pages in
--medium (heap, offheap, tmpfile in --tmp-dir, mmapfile).

A table (a directory holding _log/, or an s3:// location ending in /) stands for the segments
live in its newest version, or in --version N: their rows go into one file, one segment
after the other (each in segment order), with the columns and metadata of one segment's
export (the segments of a table share their columns). Where they differ in rollup (after
'table compact --rollup'), each row is exported as its segment stores it, and the metadata's
schema is one every segment fits: rolled up only when all are, at the finest granularity.

--spec-out writes the ingestion spec that reads the file back ('segtool ingest --spec SPEC.json
FILE.parquet'). A count metric holding counts above 1 (a rolled-up segment's) is
read back with longSum, since ingestion counts input rows; a hyperUnique sketch of an input
field that is not a dimension cannot be read back, and --spec-out fails before anything is
written. The package documentation of merger/export lists what a round trip keeps.

The file is written under a temp name next to --out, synced per --durability and renamed into
place; an existing --out or --spec-out is an error unless --replace. On failure nothing is left
behind. On a terminal, standard error shows a progress bar (rows, rate, ETA) while the rows are
written; the summary goes to standard output (none with --quiet). An s3://BUCKET/KEY --out or
--spec-out is uploaded as one multipart upload that appears whole or not at all; an existing
object is an error unless --replace. ` + s3Help,
		Example: `  segtool export --out events.parquet events.seg
  segtool export --out basic.parquet --spec-out basic-spec.json data/basic-0000.seg
  segtool export --out all-days.parquet events/
  segtool export --version 2 --out day1.parquet events/`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlag(cmd, "out"); err != nil {
				return err
			}
			return runExport(cmd.Context(), cmd, f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", "parquet", "output format: parquet, the only one")
	fl.StringVar(&f.out, "out", "", "output file, or s3://BUCKET/KEY (required)")
	fl.StringVar(&f.specOut, "spec-out", "", "also write the ingestion spec that reads the output back")
	fl.BoolVar(&f.replace, "replace", false, "replace existing output files")
	fl.IntVar(&f.rowGroupRows, "row-group-rows", export.DefaultRowGroupRows, "rows per Parquet row group")
	fl.StringVar(&f.medium, "medium", "tmpfile", "where parquet-go stages a row group's pages: heap, offheap, tmpfile or mmapfile")
	fl.StringVar(&f.tmpDir, "tmp-dir", "", "directory of the tmpfile and mmapfile media (default: the output's directory)")
	fl.StringVar(&f.durability, "durability", "output", "none, output (sync the published files) or all (also read them back from the disk and check them)")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress bar, no summary")
	fl.IntVar(&f.version, "version", 0, "the version of a table (default: the newest)")
	addProgressFlag(cmd, &f.progress, false)
	addS3UploadFlags(cmd, f.s3)
	return cmd
}

// exportSource is what an export reads: a segment, or the live segments of a table's version.
type exportSource struct {
	name   string // in the summary
	schema columns.Schema
	rows   int64
	seg    *columns.Segment // a segment; nil for a table
	inputs []merger.Input   // a table's segments
}

// openExportSource opens the segment at path, or reads the version of the table there; close
// closes the segment.
func openExportSource(ctx context.Context, f exportFlags, path string) (src exportSource, closeSrc func() error, err error) {
	if !table.IsLocation(nil, path) {
		if f.version != 0 {
			return src, nil, usagef("--version applies to tables, and %s is none", path)
		}
		seg, closeSeg, err := openInput(ctx, path, f.s3)
		if err != nil {
			return src, nil, err
		}
		return exportSource{name: path, schema: seg.Schema(), rows: int64(seg.Rows()), seg: seg}, closeSeg, nil
	}
	t, e, err := tableVersion(ctx, path, f.version, f.s3)
	if err != nil {
		return src, nil, err
	}
	if len(e.Segments) == 0 || e.Schema == nil {
		return src, nil, noSegment(t, e)
	}
	// Segments may differ in rollup: the file declares one every segment's rows fit.
	common, _ := e.CommonSchema()
	src = exportSource{name: fmt.Sprintf("%s (version %d, %d segments)", path, e.Version, len(e.Segments)), schema: common, rows: e.Rows()}
	for _, s := range e.Segments {
		loc := t.Location(s.Name)
		src.inputs = append(src.inputs, mergeInput{path: loc, open: loc, s3: f.s3})
	}
	return src, func() error { return nil }, nil
}

// export writes the source's rows into out.
func (src exportSource) export(ctx context.Context, out merger.Output, opts export.Options) (export.Info, error) {
	if src.seg != nil {
		return export.ParquetTo(ctx, out, src.seg, opts)
	}
	return export.ParquetInputsTo(ctx, out, src.schema, src.inputs, opts)
}

func runExport(ctx context.Context, cmd *cobra.Command, f exportFlags, segPath string) (err error) {
	start := time.Now()
	if f.format != "parquet" {
		return usagef("--format %q: want parquet", f.format)
	}
	if f.rowGroupRows < 1 {
		return usagef("--row-group-rows must be at least 1")
	}
	dur, err := parseDurability(f.durability)
	if err != nil {
		return err
	}
	bar, err := newCommandProgress(f.progress, f.quiet, cmd.ErrOrStderr(), nil)
	if err != nil {
		return err
	}
	out, specOut, err := exportOutputs(f, segPath)
	if err != nil {
		return err
	}
	src, closeSrc, err := openExportSource(ctx, f, segPath)
	if err != nil {
		return err
	}
	defer func() { err = multierr.Join(err, closeSrc()) }()
	if f.specOut != "" {
		// Fail before writing anything when no spec can read the export back.
		if _, err := (export.Info{Schema: src.schema}).IngestSpec(); err != nil {
			return fmt.Errorf("%s: --spec-out: %w", segPath, err)
		}
	}
	existed := false
	if _, err := os.Lstat(f.out); err == nil && !out.IsS3() {
		existed = true
	}
	sinks, undo, err := exportSinks(f, dur, out, specOut)
	if err != nil {
		return err
	}
	removeTmp, err := makeTmpDir(f.tmpDir)
	if err != nil {
		undo()
		return err
	}
	defer removeTmp()
	tmpDir := f.tmpDir
	if tmpDir == "" && out.IsS3() {
		tmpDir = os.TempDir()
	} else if tmpDir == "" {
		tmpDir = filepath.Dir(f.out)
	}
	med, err := openMedium(f.medium, tmpDir, dur)
	if err != nil {
		undo()
		return err
	}
	opts := export.Options{RowGroupRows: f.rowGroupRows, Medium: med}
	if bar != nil {
		bar.stage("exporting", src.rows, unitRows, false)
		opts.Progress = bar.set
	}
	info, err := src.export(ctx, sinks[0], opts)
	err = multierr.Join(err, med.Close())
	bar.finish(err == nil)
	if err != nil {
		if info.Path == "" {
			undo()
		}
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: output exists (use --replace to overwrite it)", f.out)
		}
		return err
	}
	stderr := cmd.ErrOrStderr()
	if f.specOut != "" {
		if err := writeSpec(ctx, sinks[1], info); err != nil {
			if !existed && !out.IsS3() {
				// Both outputs or neither: the Parquet file is new, remove it.
				err = multierr.Join(err, os.Remove(f.out))
				undo()
				return err
			}
			return fmt.Errorf("%w (%s was replaced with the export; %s was not written)", err, f.out, f.specOut)
		}
		for _, n := range info.CountsAbove1 {
			fmt.Fprintf(stderr, "segtool: note: count metric %q holds counts above 1 (rolled-up rows): %s reads it back with longSum\n", n, f.specOut)
		}
	}
	if !f.quiet {
		w := cmd.OutOrStdout()
		el := time.Since(start)
		fmt.Fprintf(w, "exported %s: %d rows in %d row group(s), %s, to %s in %s (%s)\n",
			src.name, info.Rows, info.RowGroups, humanBytes(info.Size), f.out, humanDuration(el), rate(int64(info.Rows), el))
		if f.specOut != "" {
			fmt.Fprintf(w, "wrote %s: the ingestion spec that reads %s back\n", f.specOut, f.out)
		}
	}
	return nil
}

// exportOutputs parses --out and --spec-out (a zero Location when not given) and checks the
// local ones: not the input, not each other, not existing unless --replace.
func exportOutputs(f exportFlags, segPath string) (out, specOut location.Location, err error) {
	if out, err = location.Parse(f.out); err != nil {
		return out, specOut, usageError{fmt.Errorf("--out: %w", err)}
	}
	locs := []location.Location{out}
	if f.specOut != "" {
		if specOut, err = location.Parse(f.specOut); err != nil {
			return out, specOut, usageError{fmt.Errorf("--spec-out: %w", err)}
		}
		if specOut.String() == out.String() || !out.IsS3() && !specOut.IsS3() &&
			(filepath.Clean(f.specOut) == filepath.Clean(f.out) || sameFile(f.specOut, f.out)) {
			return out, specOut, usagef("--spec-out and --out name the same file")
		}
		locs = append(locs, specOut)
	}
	for _, l := range locs {
		if l.IsS3() {
			continue // the upload checks
		}
		if sameFile(l.Path(), segPath) {
			return out, specOut, fmt.Errorf("%s: is the input segment: exporting would overwrite it", l)
		}
		if err := checkOutput(l.Path(), f.replace); err != nil {
			return out, specOut, err
		}
	}
	return out, specOut, nil
}

// exportSinks returns the outputs of an export (--out, then --spec-out if given), creating
// the directories of local ones (undo removes those it created).
func exportSinks(f exportFlags, dur medium.Durability, locs ...location.Location) ([]merger.Output, func(), error) {
	undo := func() {}
	var sinks []merger.Output
	for _, l := range locs {
		if l == (location.Location{}) {
			continue
		}
		o := location.OutputOptions{Replace: f.replace, Durability: dur}
		if l.IsS3() {
			c, err := f.s3.clientFor()
			if err != nil {
				undo()
				return nil, nil, err
			}
			o.S3 = c
		} else {
			u, err := makeOutputDir(filepath.Dir(l.Path()), dur)
			if err != nil {
				undo()
				return nil, nil, err
			}
			prev := undo
			undo = func() { u(); prev() }
		}
		sink, err := l.Output(o)
		if err != nil {
			undo()
			return nil, nil, usageError{err}
		}
		sinks = append(sinks, sink)
	}
	return sinks, undo, nil
}

// writeSpec publishes the ingestion spec of an export to out, as the export is published.
func writeSpec(ctx context.Context, out merger.Output, info export.Info) error {
	sp, err := info.IngestSpec()
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(sp, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	err = out.Publish(ctx, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: output exists (use --replace to overwrite it)", out.Name())
	}
	return err
}
