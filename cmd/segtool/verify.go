package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/multierr"
)

func newVerifyCmd() *cobra.Command {
	s3 := &s3Flags{}
	var version int
	cmd := &cobra.Command{
		Use:   "verify SEG...",
		Short: "Check every checksum and invariant of segments",
		Long: `verify opens each segment and checks the CRC-32C of every part and every structural
invariant: chunk bounds and encodings, times in order and within the interval, dictionaries
sorted, ids below the cardinality, every bitmap exactly the rows holding its value, sketches
decodable.

A good segment prints "SEG: ok" with its rows and parts on standard output. A bad one prints
one line on standard error naming the file, the column and the part, and the exit status is 1
(all segments are checked either way). A table (a directory holding _log/, or an s3://
location ending in /) stands for the segments of its newest version, or of --version N.

` + s3Help,
		Example: `  segtool verify merged.seg
  segtool verify data/*.seg
  segtool verify events/
  segtool verify --s3-region us-east-1 s3://seg/merged.seg`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			args, err := expandTables(cmd.Context(), args, version, s3)
			if err != nil {
				return err
			}
			if err := parseLocations(args); err != nil {
				return err
			}
			failed := 0
			for _, p := range args {
				info, err := verifyInput(cmd.Context(), p, s3)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "segtool: verify %s: %s\n", p, oneLine(err.Error()))
					failed++
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d rows, %d parts, %s)\n", p, info.Rows, len(info.Parts), humanBytes(info.Size))
			}
			if failed > 0 {
				return reportedError{failed: failed, total: len(args)}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&version, "version", 0, "the version of the tables among the arguments (default: the newest)")
	addS3Flags(cmd, s3)
	return cmd
}

func verifyFile(path string) (columns.Info, error) {
	return verifyInput(context.Background(), path, &s3Flags{})
}

// verifyInput verifies a segment file or an s3:// object.
func verifyInput(ctx context.Context, path string, s3 *s3Flags) (_ columns.Info, err error) {
	seg, closeSeg, err := openInput(ctx, path, s3)
	if err != nil {
		return columns.Info{}, err
	}
	defer func() { err = multierr.Join(err, closeSeg()) }()
	if err := seg.Verify(); err != nil {
		return columns.Info{}, err
	}
	return seg.Info(), nil
}
