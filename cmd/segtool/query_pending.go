package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// Until merger has queries.
func newQueryCmd() *cobra.Command {
	return &cobra.Command{Use: "query", Short: "query", Example: "  segtool query",
		RunE: func(*cobra.Command, []string) error { return errors.New("query: not implemented yet") }}
}

func demoQueryAnswer(path string) (string, error) { return "-", nil }
