package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func extraSweepers() []sweeper { return nil }

func stub(use, short string) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Example: "  segtool " + use,
		RunE: func(*cobra.Command, []string) error { return errors.New(use + ": not implemented yet") }}
}

func newDemoCmd() *cobra.Command    { return stub("demo", "demo") }
func newGenCmd() *cobra.Command     { return stub("gen", "gen") }
func newIngestCmd() *cobra.Command  { return stub("ingest", "ingest") }
func newMergeCmd() *cobra.Command   { return stub("merge", "merge") }
func newInspectCmd() *cobra.Command { return stub("inspect", "inspect") }
func newVerifyCmd() *cobra.Command  { return stub("verify", "verify") }
func newDumpCmd() *cobra.Command    { return stub("dump", "dump") }
func newQueryCmd() *cobra.Command   { return stub("query", "query") }
