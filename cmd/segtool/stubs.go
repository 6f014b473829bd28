//go:build !segtool_merger

// Stand-ins for the commands that need package merger, until it has Merge and queries.

package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
)

func stub(use, short string) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Example: "  segtool " + use,
		RunE: func(*cobra.Command, []string) error { return errors.New(use + ": not implemented yet") }}
}

func newDemoCmd() *cobra.Command  { return stub("demo", "demo") }
func newMergeCmd() *cobra.Command { return stub("merge", "merge") }
func newQueryCmd() *cobra.Command { return stub("query", "query") }

type mergeSettings struct {
	medium      medium.Medium
	durability  medium.Durability
	replace     bool
	rollup      bool
	granularity columns.Granularity
}

type mergeResult struct {
	rowsIn, rowsOut int64
	bytes           int64
	interval        columns.Interval
}

func mergeFiles(ctx context.Context, inputs []string, dst string, s mergeSettings) (mergeResult, error) {
	return mergeResult{}, errors.New("merging intermediate segments needs package merger, not there yet: use --rows-per-segment")
}
