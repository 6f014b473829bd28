package columns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// TempPattern is the name pattern of the temp file Finish writes in the destination's
// directory before renaming it into place: "*" stands for a random string, as in
// os.CreateTemp. A crash can leave such files behind; SweepTemp removes them.
const TempPattern = ".writeout-*.tmp"

// PublishOptions configure Finish. The zero value publishes on the OS file system, syncs the
// output once (medium.SyncOutput) and refuses to replace an existing file.
type PublishOptions struct {
	// Fs is the file system of the destination; nil means the OS.
	Fs afero.Fs
	// Durability says what is synced: with SyncOutput (the default) and SyncAll the file is
	// fdatasynced before the rename and the directory fsynced after it; with SyncNone nothing
	// is. TrickleBytes paces writeback while the file is written (sync_file_range on Linux,
	// with the OS file system). A stage whose Bytes has a Sync method is synced before it is
	// read back under SyncAll; the file-backed media of this module sync their stages
	// themselves, per their own options.
	Durability medium.Durability
	// Replace allows replacing an existing destination file.
	Replace bool
	// Perm is the published file's permission; 0 means 0644.
	Perm os.FileMode
}

// Finish finishes the segment and publishes it at dst:
//
//  1. a temp file named by TempPattern is created in dst's directory;
//  2. the header, each part (copied out of its stage with WriteTo, through a check of the
//     CRC-32C and size computed when the part was staged: a mismatch fails with ErrCorrupt),
//     the footer and the trailer are written to it;
//  3. per Durability, it is fdatasynced (pacing writeback on the way with TrickleBytes);
//  4. it is renamed to dst, and the directory is fsynced per Durability.
//
// On any failure the temp file is removed, dst is left as it was (if a failure comes after the
// rename, at the directory sync, the new file is removed again: with Replace the old one is
// gone by then), and the error is returned; a failed sync wraps medium.ErrSync and is never
// retried. An existing dst is an error wrapping fs.ErrExist unless Replace (checked before the
// work and again just before the rename; a file created in between by someone else is
// replaced). The stages are released whatever happens, and the writer cannot be used again.
func (w *Writer) Finish(dst string, opts PublishOptions) (Info, error) {
	return w.FinishContext(context.Background(), dst, opts)
}

// FinishContext is Finish, stopped when ctx is done: the copy checks ctx before every write to
// the temp file and before the sync and the rename; a cancelled publish cleans up as a failed
// one does and returns an error wrapping ctx.Err(). Once the rename has happened the publish
// completes.
func (w *Writer) FinishContext(ctx context.Context, dst string, opts PublishOptions) (Info, error) {
	f, err := w.seal()
	if err != nil {
		return Info{}, multierr.Join(err, w.release())
	}
	info, err := w.publish(ctx, dst, f, opts)
	if err := multierr.Join(err, w.release()); err != nil {
		return Info{}, err
	}
	return info, nil
}

func (w *Writer) publish(ctx context.Context, dst string, f *footer, opts PublishOptions) (info Info, err error) {
	if err := opts.Durability.Validate(); err != nil {
		return Info{}, fmt.Errorf("columns: publish %s: %w", dst, err)
	}
	fsys := opts.Fs
	if fsys == nil {
		fsys = afero.NewOsFs()
	}
	perm := opts.Perm
	if perm == 0 {
		perm = 0o644
	}
	calls := w.calls
	wrap := func(what string, err error) error { return fmt.Errorf("columns: publish %s: %s: %w", dst, what, err) }
	syncErr := func(what string, err error) error {
		return fmt.Errorf("columns: publish %s: %s: %w: %w", dst, what, medium.ErrSync, err)
	}
	if !opts.Replace {
		if err := notExist(fsys, dst); err != nil {
			return Info{}, wrap("destination", err)
		}
	}
	dir := filepath.Dir(dst)
	tmp, err := afero.TempFile(fsys, dir, TempPattern)
	if err != nil {
		return Info{}, wrap("create temp file", err)
	}
	tmpName := tmp.Name()
	open, renamed := true, false
	defer func() {
		if err == nil {
			return
		}
		var errs []error
		if open {
			errs = append(errs, tmp.Close())
		}
		name := tmpName
		if renamed {
			name = dst
		}
		if rerr := fsys.Remove(name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("columns: publish %s: remove %s: %w", dst, name, rerr))
		}
		err = multierr.Join(append([]error{err}, errs...)...)
	}()

	osf, _ := tmp.(*os.File)
	tw := &trickleWriter{ctx: ctx, f: tmp, osf: osf, every: opts.Durability.TrickleBytes, calls: calls}
	bw := bufio.NewWriterSize(tw, 256<<10)
	var syncStage func(medium.Bytes) error
	if opts.Durability.SyncsStages() {
		syncStage = func(b medium.Bytes) error {
			s, ok := b.(interface{ Sync() error })
			if !ok {
				return nil
			}
			info.Syncs++
			if err := s.Sync(); err != nil {
				return fmt.Errorf("%w: %w", medium.ErrSync, err)
			}
			return nil
		}
	}
	n, err := w.emit(bw, f, syncStage)
	if err == nil {
		err = bw.Flush()
	}
	info.Trickles += tw.ncalls
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		if tw.syncErr != nil && errors.Is(err, tw.syncErr) {
			return info, syncErr("sync_file_range", err)
		}
		return info, wrap("write "+tmpName, err)
	}
	if opts.Durability.SyncsOutput() {
		info.Syncs++
		var err error
		if osf != nil {
			err = calls.Fdatasync(osf)
		} else {
			err = tmp.Sync()
		}
		if err != nil {
			return info, syncErr("fdatasync "+tmpName, err)
		}
	}
	open = false
	if err := tmp.Close(); err != nil {
		return info, wrap("close "+tmpName, err)
	}
	if err := fsys.Chmod(tmpName, perm); err != nil {
		return info, wrap("chmod "+tmpName, err)
	}
	if !opts.Replace {
		if err := notExist(fsys, dst); err != nil {
			return info, wrap("destination", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return info, wrap("rename", err)
	}
	if err := fsys.Rename(tmpName, dst); err != nil {
		return info, wrap("rename", err)
	}
	renamed = true
	if opts.Durability.SyncsOutput() {
		info.Syncs++
		if err := syncDir(fsys, dir, calls); err != nil {
			return info, syncErr("fsync directory "+dir, err)
		}
	}
	out := f.info(n)
	out.Path, out.Syncs, out.Trickles = dst, info.Syncs, info.Trickles
	return out, nil
}

func notExist(fsys afero.Fs, name string) error {
	_, err := fsys.Stat(name)
	switch {
	case err == nil:
		return fmt.Errorf("%s exists (set Replace to replace it): %w", name, fs.ErrExist)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	}
	return err
}

// syncDir fsyncs a directory: through the sys layer for an OS directory, else its Sync.
func syncDir(fsys afero.Fs, dir string, calls *sys.Calls) error {
	d, err := fsys.Open(dir)
	if err != nil {
		return err
	}
	if osd, ok := d.(*os.File); ok {
		err = calls.Fsync(osd)
	} else {
		err = d.Sync()
	}
	return multierr.Join(err, d.Close())
}

// trickleWriter writes to the file and, every `every` bytes, submits the new range for
// writeback and waits for the range before it (sync_file_range, OS files only).
type trickleWriter struct {
	ctx     context.Context
	f       afero.File
	osf     *os.File
	every   int64
	calls   *sys.Calls
	off     int64 // bytes written
	mark    int64 // start of the next range to submit
	ncalls  int
	syncErr error
}

func (t *trickleWriter) Write(p []byte) (int, error) {
	if err := t.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := t.f.Write(p)
	t.off += int64(n)
	if err != nil || t.osf == nil || t.every <= 0 {
		return n, err
	}
	for t.off-t.mark >= t.every {
		t.ncalls++
		if err := t.calls.SyncFileRange(t.osf, t.mark, t.every, sys.SyncFileRangeWrite); err != nil {
			t.syncErr = err
			return n, err
		}
		if t.mark >= t.every {
			t.ncalls++
			if err := t.calls.SyncFileRange(t.osf, t.mark-t.every, t.every, sys.SyncFileRangeWaitBefore); err != nil {
				t.syncErr = err
				return n, err
			}
		}
		t.mark += t.every
	}
	return n, nil
}

// SweepTemp removes the temp files Finish leaves in dir when a process dies while publishing
// (names matching TempPattern). Run it only while no writer publishes into dir: it would remove
// that writer's temp file too. It returns the names removed.
func SweepTemp(fsys afero.Fs, dir string) ([]string, error) {
	if fsys == nil {
		fsys = afero.NewOsFs()
	}
	names, err := afero.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("columns: sweep %s: %w", dir, err)
	}
	prefix, suffix, _ := strings.Cut(TempPattern, "*")
	var removed []string
	var errs []error
	for _, fi := range names {
		name := fi.Name()
		if fi.IsDir() || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) || len(name) < len(prefix)+len(suffix) {
			continue
		}
		path := filepath.Join(dir, name)
		if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("columns: sweep: %w", err))
			continue
		}
		removed = append(removed, path)
	}
	return removed, multierr.Join(errs...)
}
