package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/afero"
	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/ingest"
	"github.com/writeout/writeout/tmpfile"
)

// legacyIngestPattern named ingest's run directories before package merger/ingest.
const legacyIngestPattern = "writeout-segtool-*.tmp"

// A sweeper removes one family of leftovers from a directory.
type sweeper struct {
	what  string
	sweep func(dir string) error
}

// sweepers lists every temp-name pattern writeout uses. See the sweep command's help.
func sweepers() []sweeper {
	s := []sweeper{
		{"tmpfile media (" + tmpfile.Prefix + "*" + tmpfile.Suffix + ")", func(dir string) error {
			return tmpfile.Sweep(afero.NewOsFs(), dir)
		}},
		{"mmapfile media (writeout-mmapfile-*.tmp)", func(dir string) error {
			return removeGlob(dir, "writeout-mmapfile-*.tmp")
		}},
		{"segments being published and intermediate segments of merges (" + columns.TempPattern + ")", func(dir string) error {
			_, err := columns.SweepTemp(afero.NewOsFs(), dir)
			return err
		}},
		{"ingest's intermediate segments (directories " + ingest.TempPattern + ", and " + legacyIngestPattern + " of older versions)", func(dir string) error {
			return errors.Join(removeDirGlob(dir, ingest.TempPattern), removeDirGlob(dir, legacyIngestPattern))
		}},
	}
	return s
}

// removeGlob removes the regular files of dir that match pattern, attempting every removal.
func removeGlob(dir, pattern string) error {
	names, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		if fi, err := os.Lstat(n); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if err := os.Remove(n); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeDirGlob removes the directories of dir that match pattern, with their contents.
func removeDirGlob(dir, pattern string) error {
	names, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		if fi, err := os.Lstat(n); err != nil || !fi.IsDir() {
			continue
		}
		if err := os.RemoveAll(n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func newSweepCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "sweep DIR",
		Short: "Remove the leftovers of interrupted runs from a directory",
		Long: `sweep removes from DIR the temp files that writeout names with a fixed pattern and that a
killed or crashed process can leave behind:

` + sweepPatternsHelp() + `
Files that do not match a pattern are never touched; finished segments are never removed. Run
sweep when no segtool or writeout program is writing into DIR: a live merge's temp output
matches the pattern too. It prints the name of each file removed and a count.`,
		Example: `  segtool sweep data`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			before, err := listFiles(dir)
			if err != nil {
				return err
			}
			var errs []error
			for _, s := range sweepers() {
				if err := s.sweep(dir); err != nil {
					errs = append(errs, fmt.Errorf("sweep %s: %s: %w", dir, s.what, err))
				}
			}
			after, err := listFiles(dir)
			if err != nil {
				errs = append(errs, err)
			}
			out := cmd.OutOrStdout()
			n := 0
			for _, name := range before {
				if !contains(after, name) {
					fmt.Fprintf(out, "removed %s\n", filepath.Join(dir, name))
					n++
				}
			}
			fmt.Fprintf(out, "%d leftover file(s) removed from %s\n", n, dir)
			return errors.Join(errs...)
		},
	}
}

func sweepPatternsHelp() string {
	s := ""
	for _, sw := range sweepers() {
		s += "  " + sw.what + "\n"
	}
	return s
}

func listFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

func contains(sorted []string, s string) bool {
	i := sort.SearchStrings(sorted, s)
	return i < len(sorted) && sorted[i] == s
}
