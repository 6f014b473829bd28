package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/table"
)

const tableCompactHelp = `compact plans the table's newest version: it groups the live segments by time chunk
(--segment-granularity, UTC days by default) and, in each chunk, cuts a segment of more than
--target-rows rows into pieces of that many rows and packs the pieces into groups of at most
--target-rows rows (largest first). Each group of two or more pieces, or holding a piece of a
cut segment, is merged into one output aligned to the chunk (rows combined as the table's
schema says), and each chunk is committed as one version of kind replace: its inputs
removed, its outputs added, so a reader sees one or the other, never both. A segment that
crosses a chunk boundary is first split into one piece per chunk it holds rows of (each cut
to --target-rows too), committed as a replacement of its own. Another writer that replaced an input
first makes the chunk's outputs go and the chunk be planned again from the newest version.
compact plans again until nothing is left to do, and exits 0 then, having replaced nothing
or not.

With --shard I/N it takes only the chunks whose start hashes to I (FNV-1a of the chunk's
start as "2024-05-01T00:00:00.000Z", modulo N), and the crossing segments that reach one of
them (the first worker to split one wins): N workers started by any job runner, a
Kubernetes Indexed Job passing JOB_COMPLETION_INDEX for I say, share a table with no
coordinator; workers on the same shard, or without --shard, are safe too (the loser of a
chunk plans again).

--rollup --granularity G rolls the table up (Druid's compaction with rollup and a query
granularity): every output is rolled up at G, and every segment not already rolled up at G
is rewritten, alone in its chunk or not (a segment crossing a chunk is split and rolled up
at once), chunk by chunk, one version a chunk, so readers see exact totals throughout. The
segments of a table share their columns, not their rollup: the log records a segment's own
rollup and granularity where they differ from the table's schema (see 'segtool table
segments'), and raw segments appended later are rolled up by the next compaction with
--rollup. G must be no coarser than --segment-granularity. Without --rollup, outputs keep
their inputs' rollup and granularity, segments that differ in them are never merged
together, and the chunks must be at least as coarse as every segment's granularity.

On an S3 service that does not honour conditional writes, compact writes only with
--single-writer, and then only one writer at a time may work on the table (see 'segtool
table --help').`

// newTableCompactCmd returns "table compact".
func newTableCompactCmd(s3 *s3Flags) *cobra.Command {
	var segGran, gran, shard string
	var target int64
	var rollup, singleWriter, dryRun bool
	cmd := &cobra.Command{
		Use:   "compact TABLE [--segment-granularity G] [--target-rows N] [--rollup --granularity G] [--shard I/N] [--single-writer]",
		Short: "Replace each time chunk's segments by a few of at most N rows, in one version a chunk",
		Long:  tableCompactHelp,
		Example: `  segtool table compact events/
  segtool table compact --segment-granularity hour --target-rows 100000 events/
  segtool table compact --shard 0/4 events/
  segtool table compact --rollup --granularity hour events/
  segtool table compact --dry-run --target-rows 100000 events/`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := table.CompactOptions{TargetRows: target, Rollup: rollup}
			g, err := columns.ParseGranularity(segGran)
			if err != nil || g < columns.GranularityMinute {
				return usagef("table compact: --segment-granularity %q: want minute, hour or day", segGran)
			}
			o.SegmentGranularity = g
			if target < 1 {
				return usagef("table compact: --target-rows %d: want at least 1", target)
			}
			if cmd.Flags().Changed("granularity") && !rollup {
				return usagef("table compact: --granularity applies with --rollup")
			}
			if o.RollupGranularity, err = columns.ParseGranularity(gran); err != nil {
				return usagef("table compact: --granularity %q: want none, second, minute, hour or day", gran)
			}
			if shard != "" {
				if o.Shard, o.Shards, err = parseShard(shard); err != nil {
					return usagef("table compact: --shard %q: %v", shard, err)
				}
			}
			if dryRun {
				t, err := openTable(cmd.Context(), args[0], s3)
				if err != nil {
					return err
				}
				e, err := t.Snapshot(cmd.Context(), 0)
				if err != nil {
					return tableErr(err)
				}
				p, err := table.PlanCompaction(e, o)
				if err != nil {
					return tableErr(err)
				}
				return writePlan(cmd.OutOrStdout(), t, p)
			}
			t, err := openWriter(cmd.Context(), args[0], s3, singleWriter)
			if err != nil {
				return err
			}
			res, err := t.Compact(cmd.Context(), o)
			if res != nil {
				if werr := writeCompact(cmd.OutOrStdout(), t, res); werr != nil && err == nil {
					err = werr
				}
			}
			if err != nil {
				return writeErr(args[0], err)
			}
			e, err := t.Snapshot(cmd.Context(), 0)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "compacted %s: %d replacement(s), %d conflict(s); version %d: %d segments, %d rows live\n",
				t, len(res.Replaced), res.Conflicts, e.Version, len(e.Segments), e.Rows())
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&segGran, "segment-granularity", "day", "the time chunk: minute, hour or day (UTC)")
	fl.Int64Var(&target, "target-rows", table.DefaultTargetRows, "the most rows of an output")
	fl.BoolVar(&rollup, "rollup", false, "roll the table up at --granularity: every segment not rolled up at it is rewritten")
	fl.StringVar(&gran, "granularity", "none", "with --rollup: the rollup granularity (none, second, minute, hour, day)")
	fl.StringVar(&shard, "shard", "", "I/N: take only the chunks of shard I of N (0 <= I < N)")
	fl.BoolVar(&dryRun, "dry-run", false, "print the plan of the newest version (splits, then each chunk's groups) and change nothing")
	addSingleWriterFlag(cmd, &singleWriter)
	return cmd
}

// parseShard parses "I/N" with 0 <= I < N.
func parseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("want I/N")
	}
	if i, err = strconv.Atoi(a); err == nil {
		n, err = strconv.Atoi(b)
	}
	if err != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("want I/N with 0 <= I < N")
	}
	return i, n, nil
}

// writeCompact prints one line per replacement, and what compaction left as it is.
func writeCompact(w io.Writer, t *table.Table, res *table.CompactResult) error {
	for _, r := range res.Replaced {
		var out int64
		for _, s := range r.Added {
			out += s.Rows
		}
		format := "replaced %d segment(s), %d rows, of %s/%s by %d segment(s), %d rows: version %d\n"
		if r.Split {
			format = "split %d segment, %d rows, of %s/%s by chunk into %d segment(s), %d rows: version %d\n"
		}
		if _, err := fmt.Fprintf(w, format,
			len(r.Removed), r.RowsIn, fmtMillis(r.Chunk.Start), fmtMillis(r.Chunk.End), len(r.Added), out, r.Version); err != nil {
			return err
		}
	}
	if len(res.Replaced) == 0 {
		_, err := fmt.Fprintf(w, "nothing to compact in %s\n", t)
		return err
	}
	return nil
}

// fmtMillis formats ms since the epoch as the log writes times.
func fmtMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// writePlan prints plan p of table t: the splits, then each chunk's groups, a line a group.
func writePlan(w io.Writer, t *table.Table, p *table.Plan) error {
	var b strings.Builder
	fmt.Fprintf(&b, "plan of %s, version %d:\n", t, p.Version)
	for _, s := range p.Crossing {
		fmt.Fprintf(&b, "split %s (%d rows, %s) by chunk\n", s.Name, s.Rows, s.Interval)
	}
	if len(p.Crossing) > 0 && len(p.Chunks) > 0 {
		b.WriteString("then, with the pieces of the splits planned again:\n")
	}
	for _, c := range p.Chunks {
		fmt.Fprintf(&b, "chunk %s/%s: %d segment(s)\n", fmtMillis(c.Interval.Start), fmtMillis(c.Interval.End), len(c.Segments))
		for _, g := range c.Groups {
			var rows int64
			names := make([]string, len(g))
			for i, pc := range g {
				rows += pc.Len()
				names[i] = pc.Name
				if !pc.Whole() {
					names[i] += fmt.Sprintf("[%d:%d]", pc.Lo, pc.Hi)
				}
			}
			fmt.Fprintf(&b, "  merge %d rows: %s\n", rows, strings.Join(names, " "))
		}
	}
	if len(p.Crossing) == 0 && len(p.Chunks) == 0 {
		fmt.Fprintf(&b, "nothing to compact in %s\n", t)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
