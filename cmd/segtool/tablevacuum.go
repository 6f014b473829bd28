package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/merger/table"
)

const tableVacuumHelp = `vacuum removes what no retained version of the table needs: the segments that no retained
version lists, the log entries of versions not retained, and files that no version lists
(segments copied by an append or written by a compaction that never committed, temp files
a crash left; on S3, pending multipart uploads of segments) once they are --pending-age old.

The newest version is always retained, with every segment it lists: the table stays
readable and writable throughout. An older version is retained while the version after it
is younger than --retain (its time in the log): a reader that opened it has that long to
finish. --retain 0 keeps only the newest version.

--pending-age (default 1h) protects writers running meanwhile: a segment an append has
copied but not yet committed is listed by no version, and removing it would make the append
commit a segment that is gone. --pending-age 0 removes such files at once: use it only
when no writer runs.`

// newTableVacuumCmd returns "table vacuum".
func newTableVacuumCmd(s3 *s3Flags) *cobra.Command {
	var retain, pending time.Duration
	cmd := &cobra.Command{
		Use:   "vacuum TABLE [--retain D] [--pending-age D]",
		Short: "Remove the segments, log entries and temp files no retained version needs",
		Long:  tableVacuumHelp,
		Example: `  segtool table vacuum --retain 24h events/
  segtool table vacuum --retain 0 --pending-age 0 events/`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if retain < 0 || pending < 0 {
				return usagef("table vacuum: --retain %s, --pending-age %s: want durations of at least 0", retain, pending)
			}
			o := table.VacuumOptions{Retain: retain, PendingAge: pending}
			if pending == 0 {
				o.PendingAge = -1 // at once
			}
			t, err := openTable(cmd.Context(), args[0], s3)
			if err != nil {
				return err
			}
			res, err := t.Vacuum(cmd.Context(), o)
			if res != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "vacuumed %s: removed %d segment(s), %d log entries, %d unlisted or temp file(s); retained version(s) %s (newest %d)\n",
					t, len(res.Segments), len(res.Entries), len(res.Temp), versionList(res.Retained), res.Newest)
				if len(res.Uploads) > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "aborted %d pending upload(s) or marker(s)\n", len(res.Uploads))
				}
			}
			return tableErr(err)
		},
	}
	cmd.Flags().DurationVar(&retain, "retain", 0, "how long a replaced version stays readable (0: only the newest)")
	cmd.Flags().DurationVar(&pending, "pending-age", table.DefaultPendingAge, "how old a file no version lists must be to go (0: at once, only with no writer running)")
	return cmd
}

// versionList writes versions as "3-5" when consecutive, else "3,5,7".
func versionList(vs []int) string {
	if len(vs) > 1 && vs[len(vs)-1]-vs[0] == len(vs)-1 {
		return fmt.Sprintf("%d-%d", vs[0], vs[len(vs)-1])
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}
