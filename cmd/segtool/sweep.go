package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/afero"
	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/merger/ingest"
	"github.com/writeout/writeout/merger/location"
	"github.com/writeout/writeout/tmpfile"
)

// legacyIngestPattern named ingest's run directories before package merger/ingest.
const legacyIngestPattern = "writeout-segtool-*.tmp"

// mmapfilePattern names the mmapfile medium's named temp files (where it has no O_TMPFILE).
const mmapfilePattern = "writeout-mmapfile-*.tmp"

// A sweeper removes one family of leftovers from a directory: the entries whose name matches
// and that it can prove writeout made.
type sweeper struct {
	what  string
	match func(name string) bool
	// sweep removes what it can prove is a leftover and returns the paths removed; an entry
	// that matches but stays is reported as kept, with why.
	sweep func(dir string) ([]string, error)
	why   string
}

// sweepers lists every temp-name pattern writeout uses. See the sweep command's help.
func sweepers() []sweeper {
	return []sweeper{
		{
			what:  "tmpfile media (" + tmpfile.Prefix + "*" + tmpfile.Suffix + "): empty files",
			match: tmpfile.IsTempName,
			sweep: func(dir string) ([]string, error) { return tmpfile.Sweep(afero.NewOsFs(), dir) },
			why:   "not an empty regular file",
		},
		{
			what:  "mmapfile media (" + mmapfilePattern + "): empty files",
			match: func(name string) bool { return matchDigits(mmapfilePattern, name) },
			sweep: func(dir string) ([]string, error) { return removeEmptyFiles(dir, mmapfilePattern) },
			why:   "not an empty regular file",
		},
		{
			what:  "segments being published and intermediate segments of merges (" + columns.TempPattern + "): empty files and files that begin like a segment",
			match: columns.IsTempName,
			sweep: func(dir string) ([]string, error) { return columns.SweepTemp(afero.NewOsFs(), dir) },
			why:   "neither an empty regular file nor one that begins like a segment",
		},
		{
			what: "ingest's runs (directories " + ingest.TempPattern + ", and " + legacyIngestPattern +
				" of older versions): directories that hold only runs (run-NNNNNN.seg, complete segments) and the temp files above",
			match: func(name string) bool {
				return matchDigits(ingest.TempPattern, name) || matchDigits(legacyIngestPattern, name)
			},
			sweep: func(dir string) ([]string, error) {
				a, err1 := removeRunDirs(dir, ingest.TempPattern)
				b, err2 := removeRunDirs(dir, legacyIngestPattern)
				return append(a, b...), errors.Join(err1, err2)
			},
			why: "not a directory that holds only runs and temp files of writeout",
		},
	}
}

// matchDigits reports whether name is pattern with its "*" replaced by decimal digits (what
// os.CreateTemp and os.MkdirTemp put there).
func matchDigits(pattern, name string) bool {
	prefix, suffix, _ := strings.Cut(pattern, "*")
	mid, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	mid, ok = strings.CutSuffix(mid, suffix)
	return ok && mid != "" && strings.Trim(mid, "0123456789") == ""
}

// entries returns the paths of dir's entries whose name pattern matches.
func entries(dir, pattern string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range ents {
		if matchDigits(pattern, e.Name()) {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	return paths, nil
}

// removeEmptyFiles removes the empty regular files of dir whose name matches pattern,
// attempting every removal.
func removeEmptyFiles(dir, pattern string) ([]string, error) {
	paths, err := entries(dir, pattern)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, p := range paths {
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// removeRunDirs removes the directories of dir whose name matches pattern and that hold
// nothing but ingest's runs and the temp files of their publication: each entry is removed
// only once every entry is known to be one (see runDirEntries), and the directory last, with
// rmdir, which fails rather than remove anything that appeared meanwhile.
func removeRunDirs(dir, pattern string) ([]string, error) {
	paths, err := entries(dir, pattern)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, d := range paths {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			continue
		}
		files, ok, err := runDirEntries(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue
		}
		var rmErr error
		for _, f := range files {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				rmErr = err
				break
			}
		}
		if rmErr == nil {
			rmErr = os.Remove(d)
		}
		if rmErr != nil {
			errs = append(errs, rmErr)
			continue
		}
		removed = append(removed, d)
	}
	return removed, errors.Join(errs...)
}

// runDirEntries returns the paths of the entries of an ingest run directory, and whether every
// one is provably writeout's: a run (run-NNNNNN.seg, a complete segment: runs are named once
// complete) or a temp file of a publication (columns.IsTempFile).
func runDirEntries(d string) ([]string, bool, error) {
	ents, err := os.ReadDir(d)
	if err != nil {
		return nil, false, err
	}
	var files []string
	for _, e := range ents {
		p := filepath.Join(d, e.Name())
		var ours bool
		if isRunName(e.Name()) {
			ours = isSegmentFile(p)
		} else if ours, err = columns.IsTempFile(afero.NewOsFs(), p); err != nil {
			return nil, false, err
		}
		if !ours {
			return nil, false, nil
		}
		files = append(files, p)
	}
	return files, true, nil
}

// isRunName reports whether name is run-NNNNNN.seg, the name of one of ingest's runs.
func isRunName(name string) bool {
	mid, ok := strings.CutPrefix(name, "run-")
	if !ok {
		return false
	}
	mid, ok = strings.CutSuffix(mid, ".seg")
	return ok && len(mid) >= 6 && strings.Trim(mid, "0123456789") == ""
}

// isSegmentFile reports whether path is a regular file that opens as a segment (header,
// trailer, footer and its CRC, part index), read with pread, not mapped.
func isSegmentFile(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	ok := false
	if st, err := f.Stat(); err == nil && os.SameFile(fi, st) {
		if seg, err := columns.NewSegment(f, st.Size()); err == nil {
			ok = seg.Close() == nil
		}
	}
	return f.Close() == nil && ok
}

func newSweepCmd() *cobra.Command {
	s3 := &s3Flags{}
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "sweep DIR | s3://BUCKET/PREFIX",
		Short: "Remove the leftovers of interrupted runs from a directory",
		Long: `sweep removes from DIR the temp files that writeout names with a fixed pattern and that a
killed or crashed process can leave behind, and only those it can prove writeout made: an entry
must have one of these name patterns ("*" stands for digits) and hold what is said after it:

` + sweepPatternsHelp() + `
Files are regular files (not links, directories or FIFOs). Anything else is never touched, and
an entry that has a pattern but not the content is kept and named on standard error. Finished
segments are never removed. On Linux, merges and publications write unnamed files
(O_TMPFILE) where the file system allows, which leave nothing to sweep. Run sweep when no
segtool or writeout program is writing into DIR: a live merge's temp output matches too. It
prints the name of each entry removed (quoted, as Go quotes strings) and a count.

With s3://BUCKET/PREFIX, sweep aborts the multipart uploads under PREFIX that were started more
than --older-than ago and neither completed nor aborted: what a merge, ingest or export killed
outright (no chance to abort) leaves behind, never an object. Younger ones are kept and named on
standard error (a live upload of another worker looks the same). MinIO lists the pending
uploads of an exact key only; there, a pending upload of segtool has a marker object beside
its key (KEY.writeout-upload-HASH, --s3-upload-markers), which sweep lists under PREFIX to
find the upload; it removes a marker with its upload, and one older than --older-than whose
upload is gone. The credentials need s3:ListBucket, s3:ListBucketMultipartUploads,
s3:AbortMultipartUpload and, for markers, s3:DeleteObject.

` + s3Help,
		Example: `  segtool sweep data
  segtool sweep s3://seg/compacted/
  segtool sweep --older-than 0s s3://seg/compacted/2000-01-01.seg`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if rest, ok := strings.CutPrefix(args[0], "s3://"); ok {
				return sweepS3(cmd, rest, olderThan, s3)
			}
			if _, err := location.Parse(args[0]); err != nil {
				return usageError{err}
			}
			dir := args[0]
			if _, err := os.ReadDir(dir); err != nil {
				return err
			}
			out, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			var errs []error
			n := 0
			for _, s := range sweepers() {
				removed, err := s.sweep(dir)
				if err != nil {
					errs = append(errs, fmt.Errorf("sweep %q: %s: %w", dir, s.what, err))
				}
				sort.Strings(removed)
				for _, p := range removed {
					fmt.Fprintf(out, "removed %q\n", p)
					n++
				}
			}
			left, err := listFiles(dir)
			if err != nil {
				errs = append(errs, err)
			}
			for _, name := range left {
				for _, s := range sweepers() {
					if s.match(name) {
						fmt.Fprintf(stderr, "segtool: sweep: kept %q: %s\n", filepath.Join(dir, name), s.why)
						break
					}
				}
			}
			fmt.Fprintf(out, "%d leftover file(s) removed from %s\n", n, quoteIfNeeded(dir))
			return errors.Join(errs...)
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", time.Hour, "with s3://, abort only uploads started longer ago than this")
	addS3Flags(cmd, s3)
	return cmd
}

// sweepS3 aborts the pending multipart uploads of bucket/prefix ("BUCKET/PREFIX") started more
// than olderThan ago.
func sweepS3(cmd *cobra.Command, bucketPrefix string, olderThan time.Duration, s3 *s3Flags) error {
	bucket, prefix, _ := strings.Cut(bucketPrefix, "/")
	if bucket == "" {
		return usagef("s3://%s: want s3://BUCKET/PREFIX", bucketPrefix)
	}
	if olderThan < 0 {
		return usagef("--older-than %s: want 0 or more", olderThan)
	}
	c, err := s3.clientFor()
	if err != nil {
		return err
	}
	ups, err := c.PendingUploads(cmd.Context(), bucket, prefix)
	if err != nil {
		return err
	}
	now := time.Now()
	var old = ups[:0:0]
	for _, u := range ups {
		if !u.Initiated.IsZero() && now.Sub(u.Initiated) < olderThan {
			fmt.Fprintf(cmd.ErrOrStderr(), "segtool: sweep: kept upload %s of %s: started %s ago (--older-than %s)\n",
				u.UploadID, objstore.URL(bucket, u.Key), now.Sub(u.Initiated).Round(time.Second), olderThan)
			continue
		}
		old = append(old, u)
	}
	var errs []error
	n := 0
	for i, u := range old {
		if err := c.AbortUploads(cmd.Context(), bucket, old[i:i+1]); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(cmd.OutOrStdout(), "aborted upload %s of %s\n", u.UploadID, objstore.URL(bucket, u.Key))
		n++
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%d pending upload(s) aborted under s3://%s\n", n, bucketPrefix)
	stale, err := c.StaleMarkers(cmd.Context(), bucket, prefix, olderThan)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, m := range stale {
		if err := c.RemoveMarkers(cmd.Context(), bucket, []string{m}); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(cmd.OutOrStdout(), "removed marker %s (its upload is no longer pending)\n", objstore.URL(bucket, m))
	}
	return errors.Join(errs...)
}

// quoteIfNeeded returns s as it is when it is printable text without quotes or backslashes,
// else quoted as Go quotes strings (a newline in a name cannot pass for the end of a line).
func quoteIfNeeded(s string) string {
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		return q
	}
	return s
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
