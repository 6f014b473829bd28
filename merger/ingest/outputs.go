package ingest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/location"
)

// How a Run puts its outputs in place
//
// Every output segment is first published (synced per Options.Durability) into a staging
// directory, named by TempPattern, in the output's directory. Only when the whole ingest has
// succeeded are the outputs moved into place, one rename each, and the output directory
// synced; on any failure before that, the staging directory is removed and the files in the
// output directory are as they were. With Replace, an output that exists is first hard-linked
// into the staging directory, so that a failure while the outputs are moved puts it back; the
// staging directory, and with it the old outputs, is removed once every output is in place.
// Without Replace an output is linked into place (link(2) refuses an existing name), so an
// output created by someone else meanwhile is never overwritten.
//
// With RowsPerSegment the outputs are a series, SEG-0000.seg, SEG-0001.seg, ...: a glob such as
// SEG-*.seg sees them all. Without Replace, any member of the series that exists is an error,
// whichever its number. With Replace the new series replaces the old one whole: members of the
// old series numbered past the new count are removed in the same step (Result.Removed lists
// them), so that no glob mixes the old series with the new one.

// ExistingOutputs returns the files a Run with these settings would replace: out itself, or
// with rowsPerSegment > 0 every existing member of the series SegmentName(out, k), whatever
// its number k, in directory order. Without Replace, Run refuses to start when there is one.
func ExistingOutputs(out string, rowsPerSegment int) ([]string, error) {
	if rowsPerSegment <= 0 {
		if _, err := os.Lstat(out); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil
			}
			return nil, fmt.Errorf("ingest: %w", err)
		}
		return []string{out}, nil
	}
	dir := filepath.Dir(out)
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("ingest: %w", err)
	}
	var paths []string
	for _, e := range ents {
		if _, ok := seriesIndex(filepath.Base(out), e.Name()); ok {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	return paths, nil
}

// seriesIndex returns k when name is the base name of SegmentName(out, k), out a base name.
func seriesIndex(out, name string) (int, bool) {
	ext := filepath.Ext(out)
	stem := strings.TrimSuffix(out, ext) + "-"
	if len(name) < len(stem)+4+len(ext) || !strings.HasPrefix(name, stem) || !strings.HasSuffix(name, ext) {
		return 0, false
	}
	digits := name[len(stem) : len(name)-len(ext)]
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	k, err := strconv.Atoi(digits)
	if err != nil || SegmentName(out, k) != name {
		return 0, false
	}
	return k, true
}

// checkPaths refuses inputs that are one of the outputs (what Run writes or replaces), and,
// without Replace, outputs that exist. existing are the outputs that exist now.
func checkPaths(inputs []Input, existing []string, replace bool) error {
	for _, p := range existing {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			return fmt.Errorf("%w: output %s is a directory", ErrInvalid, p)
		}
	}
	for _, p := range existing {
		out, err := os.Stat(p)
		if err != nil {
			continue // a dangling symlink or a file gone meanwhile: no input can be it
		}
		for _, in := range inputs {
			if in.Path == "" {
				continue
			}
			fi, err := os.Stat(in.Path)
			if err == nil && os.SameFile(fi, out) {
				return fmt.Errorf("%w: input %s is the output %s (the same file): ingesting would overwrite it",
					ErrInvalid, in.Path, p)
			}
		}
	}
	if !replace && len(existing) > 0 {
		return fmt.Errorf("ingest: %s: %w", existing[0], fs.ErrExist)
	}
	return nil
}

// stagedPath returns the path where output dst is published until the commit, creating the
// staging directory on first use.
func (r *runner) stagedPath(dst string) (string, error) {
	if r.stageDir == "" {
		dir := filepath.Dir(r.opts.Out)
		if r.remote {
			dir = r.opts.TmpDir
		}
		d, err := os.MkdirTemp(dir, TempPattern)
		if err != nil {
			return "", fmt.Errorf("ingest: staging the outputs: %w", err)
		}
		r.stageDir = d
	}
	return filepath.Join(r.stageDir, "new-"+filepath.Base(dst)), nil
}

// testHookMove, when set, is called before commit moves a file into or out of place; an error
// it returns fails that move.
var testHookMove func(path string) error

func hookMove(path string) error {
	if testHookMove != nil {
		return testHookMove(path)
	}
	return nil
}

// commit moves every staged output into place and, with Replace and RowsPerSegment, the old
// series' members past the new count out of it (into the staging directory, removed after).
// On failure it undoes what it did, so the output directory holds what it held before; when
// even that fails, the old outputs are still in the staging directory, and the error says so
// (r.keepStage then tells the cleanup not to remove it).
func (r *runner) commit(existing []string) (err error) {
	if r.remote {
		return r.upload()
	}
	var undo []func() error
	defer func() {
		if err == nil {
			return
		}
		var uerrs []error
		for i := len(undo) - 1; i >= 0; i-- {
			if uerr := undo[i](); uerr != nil {
				uerrs = append(uerrs, uerr)
			}
		}
		if len(uerrs) > 0 {
			r.keepStage = true
			err = errors.Join(err, fmt.Errorf("ingest: putting the old outputs back failed; they are in %s: %w",
				r.stageDir, errors.Join(uerrs...)))
		}
	}()
	backup := func(p string) string { return filepath.Join(r.stageDir, "old-"+filepath.Base(p)) }
	for i, s := range r.res.Segments {
		staged, dst := r.staged[i], s.Path
		if err := hookMove(dst); err != nil {
			return fmt.Errorf("ingest: %s: %w", dst, err)
		}
		if !r.opts.Replace {
			if err := linkNoReplace(staged, dst); err != nil {
				return fmt.Errorf("ingest: %s: %w", dst, err)
			}
			undo = append(undo, func() error { return os.Remove(dst) })
			continue
		}
		old, moved, err := keepOld(dst, backup(dst))
		if err != nil {
			return fmt.Errorf("ingest: %s: keeping the old output until the new ones are in place: %w", dst, err)
		}
		placed := false
		undo = append(undo, func() error {
			switch {
			case old && (placed || moved):
				return os.Rename(backup(dst), dst)
			case placed:
				return os.Remove(dst)
			}
			return nil // dst still holds the old output, or never existed
		})
		if err := os.Rename(staged, dst); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		placed = true
	}
	if r.opts.Replace && r.opts.RowsPerSegment > 0 {
		for _, p := range existing {
			k, _ := seriesIndex(filepath.Base(r.opts.Out), filepath.Base(p))
			if k < len(r.res.Segments) {
				continue
			}
			if err := hookMove(p); err != nil {
				return fmt.Errorf("ingest: %s: %w", p, err)
			}
			if err := os.Rename(p, backup(p)); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // gone meanwhile
				}
				return fmt.Errorf("ingest: removing %s, of the replaced series: %w", p, err)
			}
			undo = append(undo, func() error { return os.Rename(backup(p), p) })
			r.res.Removed = append(r.res.Removed, p)
		}
	}
	if r.opts.Durability.Sync != medium.SyncNone {
		if err := syncDir(filepath.Dir(r.opts.Out)); err != nil {
			r.res.Removed = nil
			return fmt.Errorf("ingest: sync %s: %w: %w", filepath.Dir(r.opts.Out), medium.ErrSync, err)
		}
	}
	return nil
}

// linkNoReplace puts src at dst unless dst exists (an error wrapping fs.ErrExist): by link(2),
// which refuses an existing name; where the file system has no hard links, by a check then a
// rename.
func linkNoReplace(src, dst string) error {
	err := os.Link(src, dst)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	if _, serr := os.Lstat(dst); serr == nil {
		return fs.ErrExist
	} else if !errors.Is(serr, fs.ErrNotExist) {
		return serr
	}
	return os.Rename(src, dst)
}

// keepOld hard-links an existing p to backup and reports whether p existed; where the file
// system has no hard links, it renames p to backup (moved: p is then absent until the new
// output takes its place).
func keepOld(p, backup string) (old, moved bool, err error) {
	lerr := os.Link(p, backup)
	switch {
	case lerr == nil:
		return true, false, nil
	case errors.Is(lerr, fs.ErrNotExist):
		return false, false, nil
	}
	if rerr := os.Rename(p, backup); rerr != nil {
		if errors.Is(rerr, fs.ErrNotExist) {
			return false, false, nil
		}
		return false, false, errors.Join(lerr, rerr)
	}
	return true, true, nil
}

// syncDir fsyncs a directory.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// output returns the sink of the output at dst, an s3:// URL (merger/location).
func output(dst string, opts Options) (merger.Output, error) {
	loc, err := location.Parse(dst)
	if err != nil {
		return nil, fmt.Errorf("%w: output: %w", ErrInvalid, err)
	}
	return loc.Output(location.OutputOptions{Replace: opts.Replace, S3: opts.S3})
}

// checkObject fails, before any work, when the first object Run would upload exists and may
// not be replaced.
func checkObject(ctx context.Context, opts Options) error {
	dst := opts.Out
	if opts.RowsPerSegment > 0 {
		dst = SegmentName(opts.Out, 0)
	}
	out, err := output(dst, opts)
	if err != nil {
		return err
	}
	if err := out.Check(ctx); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	return nil
}

// upload publishes each staged output to its object, in order, each through one multipart
// upload (location.PublishFile), as merger.MergeTo publishes a merge's.
func (r *runner) upload() error {
	for i, s := range r.res.Segments {
		out, err := output(s.Path, r.opts)
		if err != nil {
			return err
		}
		if err := location.PublishFile(r.ctx, out, r.staged[i]); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
	}
	return nil
}
