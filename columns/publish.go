package columns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/internal/testhook"
	"github.com/writeout/writeout/medium"
)

// TempPattern is the name pattern of the named temp files a publication may write in the
// destination's directory before naming it dst: "*" stands for random decimal digits, as in
// os.CreateTemp. On Linux with the OS file system the output is written as an unnamed file
// instead (see Finish), and a crash leaves nothing; elsewhere a crash can leave such files
// behind, and SweepTemp removes them.
const TempPattern = ".writeout-*.tmp"

// PublishOptions configure Finish. The zero value publishes on the OS file system, syncs the
// output once (medium.SyncOutput) and refuses to replace an existing file.
type PublishOptions struct {
	// Fs is the file system of the destination; nil means the OS.
	Fs afero.Fs
	// Durability says what is synced: with SyncOutput (the default) and SyncAll the file is
	// fdatasynced before it is named dst and the directory fsynced after; with SyncNone nothing
	// is. SyncAll also reads the synced file back from the device and checks every checksum
	// before naming it (see Finish). TrickleBytes paces writeback while the file is written, an
	// OS file only (sys.Pacer: sync_file_range, or where that is missing an fdatasync every
	// interval, counted in Info.Syncs, not Info.Trickles). Stages are never synced: they are
	// unnamed scratch, of no use after a crash.
	Durability medium.Durability
	// Replace allows replacing an existing destination file.
	Replace bool
	// Perm is the published file's permission; 0 means 0644.
	Perm os.FileMode
	// File, when set, receives the segment in place of a file named dst: Finish truncates it,
	// writes the segment from offset 0, fdatasyncs it per Durability (there is no directory to
	// sync: the file's name, if any, is the caller's) and leaves it open. dst then only names
	// the segment in errors and in Info.Path; Fs, Replace and Perm are not used. On failure the
	// file holds a partial segment and is the caller's to discard. Merge writes its intermediate
	// segments into unnamed files this way and reopens them with OpenFile.
	File *os.File
}

// Finish implements segwrite.Writer.
func (w *writer) Finish(dst string, opts PublishOptions) (Info, error) {
	return w.FinishContext(context.Background(), dst, opts)
}

// FinishContext implements segwrite.Writer.
func (w *writer) FinishContext(ctx context.Context, dst string, opts PublishOptions) (Info, error) {
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

func (w *writer) publish(ctx context.Context, dst string, f *footer, opts PublishOptions) (Info, error) {
	c := content{
		emit:     func(out io.Writer) (int64, error) { return w.emit(out, f) },
		readBack: readBack,
	}
	info, err := publishContent(ctx, dst, c, opts, w.calls)
	if err != nil {
		return Info{}, err
	}
	res := f.info(info.Size)
	res.Path, res.Syncs, res.Trickles = info.Path, info.Syncs, info.Trickles
	return res, nil
}

// content is what a publication writes: emit writes the file front to back and returns the
// bytes written; readBack checks, under SyncAll, the size bytes written and synced to file (osf:
// the same file when it is an OS file), as the device holds them.
type content struct {
	emit     func(out io.Writer) (int64, error)
	readBack func(ctx context.Context, file afero.File, osf *os.File, size int64, calls *sys.Calls) error
}

// publishContent publishes c at dst as Finish describes, or into opts.File. The Info it returns
// has Path, Size, Syncs and Trickles set.
func publishContent(ctx context.Context, dst string, c content, opts PublishOptions, calls *sys.Calls) (info Info, err error) {
	if err := opts.Durability.Validate(); err != nil {
		return Info{}, fmt.Errorf("columns: publish %s: %w", dst, err)
	}
	if opts.File != nil {
		return publishInto(ctx, dst, c, opts, calls)
	}
	fsys := opts.Fs
	if fsys == nil {
		fsys = afero.NewOsFs()
	}
	perm := opts.Perm
	if perm == 0 {
		perm = 0o644
	}
	wrap := func(what string, err error) error { return fmt.Errorf("columns: publish %s: %s: %w", dst, what, err) }
	if !opts.Replace {
		if err := notExist(fsys, dst); err != nil {
			return Info{}, destError(dst, err)
		}
	}
	dir := filepath.Dir(dst)
	out, err := createOutput(fsys, dir, calls)
	if err != nil {
		return Info{}, wrap("create temp file", err)
	}
	named := false // dst is the new file: kept whatever fails after
	defer func() {
		if err != nil && !named {
			err = multierr.Join(err, out.discard(dst))
		}
	}()
	testhook.OutputCreated(dst)
	if err := out.chmod(perm); err != nil {
		return info, wrap(out.desc(), err)
	}
	n, err := writeFile(ctx, dst, c, out.file, out.osf, out.desc(), opts.Durability, calls, &info)
	if err != nil {
		return info, err
	}
	if err := out.finish(); err != nil {
		return info, wrap(out.desc(), err)
	}
	if err := ctx.Err(); err != nil {
		return info, wrap("name "+dst, err)
	}
	testhook.BeforePublish(dst)
	if err := out.place(dst, opts.Replace); err != nil {
		return info, destError(dst, err)
	}
	named = true
	if err := out.close(); err != nil {
		return info, wrap("close "+dst, err)
	}
	if opts.Durability.SyncsOutput() {
		info.Syncs++
		if err := syncDir(fsys, dir, calls); err != nil {
			return info, fmt.Errorf("columns: publish %s: fsync directory %s: %w: %w (%s is in place, complete, its data synced; its name may not survive a crash)", dst, dir, medium.ErrSync, err, dst)
		}
	}
	info.Path, info.Size = dst, n
	return info, nil
}

// publishInto writes c into opts.File (see PublishOptions.File).
func publishInto(ctx context.Context, name string, c content, opts PublishOptions, calls *sys.Calls) (Info, error) {
	file := opts.File
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return Info{}, fmt.Errorf("columns: publish %s: %w", name, err)
	}
	if err := file.Truncate(0); err != nil {
		return Info{}, fmt.Errorf("columns: publish %s: %w", name, err)
	}
	var info Info
	n, err := writeFile(ctx, name, c, file, file, name, opts.Durability, calls, &info)
	if err != nil {
		return Info{}, err
	}
	info.Path, info.Size = name, n
	return info, nil
}

// writeFile writes c to file (osf: the same file when it is an OS file, for sync_file_range
// and fdatasync; desc: its name in errors), then fdatasyncs it per d. It counts syncs and
// trickles in info and returns the bytes written.
func writeFile(ctx context.Context, dst string, c content, file afero.File, osf *os.File, desc string, d medium.Durability, calls *sys.Calls, info *Info) (int64, error) {
	syncErr := func(what string, err error) error {
		return fmt.Errorf("columns: publish %s: %s: %w: %w", dst, what, medium.ErrSync, err)
	}
	tw := &trickleWriter{ctx: ctx, f: file}
	if osf != nil && d.TrickleBytes > 0 {
		// In the background: the writer is not charged for submitting ranges (see sys.Pacer).
		tw.pacer = &sys.Pacer{Calls: calls, File: osf, Every: d.TrickleBytes, Background: true}
	}
	bw := bufio.NewWriterSize(tw, 256<<10)
	n, err := c.emit(bw)
	if err == nil {
		err = bw.Flush()
	}
	// Every pacing call is made before the fdatasync below, and none after a failure.
	if perr := tw.pacer.Close(); perr != nil && err == nil {
		tw.syncErr, err = perr, perr
	}
	trickles, syncs := tw.pacer.Counts()
	info.Trickles += trickles
	info.Syncs += syncs
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		if tw.syncErr != nil && errors.Is(err, tw.syncErr) {
			what := "sync_file_range"
			if tw.pacer.Fallback() {
				what = "fdatasync (pacing)"
			}
			return n, syncErr(what, err)
		}
		var ce contentError
		if errors.As(err, &ce) {
			return n, ce.err // the content's own error, which says what failed
		}
		return n, fmt.Errorf("columns: publish %s: write %s: %w", dst, desc, err)
	}
	if d.SyncsOutput() {
		info.Syncs++
		var err error
		if osf != nil {
			err = calls.Fdatasync(osf)
		} else {
			err = file.Sync()
		}
		if err != nil {
			return n, syncErr("fdatasync "+desc, err)
		}
	}
	if d.Sync == medium.SyncAll {
		if err := c.readBack(ctx, file, osf, n, calls); err != nil {
			return n, fmt.Errorf("columns: publish %s: read back %s: %w", dst, desc, err)
		}
	}
	return n, nil
}

// readBack reads the size bytes just written and synced to file back and checks them: the
// trailer, the footer's checksum and every part's CRC-32C (VerifyChecksumsContext). On an OS file the
// range's cached pages, clean after the fdatasync, are dropped first (posix_fadvise
// DONTNEED), so that the reads come from the device: what is checked is what the disk holds,
// not the page cache's copy. Where the pages cannot be dropped (off Linux, an afero.Fs) the
// check reads them back through the file as they are.
func readBack(ctx context.Context, file afero.File, osf *os.File, size int64, calls *sys.Calls) error {
	if osf != nil {
		if err := calls.DropCache(osf, 0, size); err != nil && !errors.Is(err, sys.ErrUnsupported) {
			return fmt.Errorf("drop cached pages: %w", err)
		}
	}
	seg, err := NewSegment(file, size)
	if err != nil {
		return err
	}
	return multierr.Join(seg.VerifyChecksumsContext(ctx), seg.Close())
}

// output is the file a publication writes, from its creation to its naming as dst.
type output struct {
	fsys   afero.Fs
	calls  *sys.Calls
	dir    string
	osFs   bool // fsys is the OS file system: the atomic naming calls apply
	file   afero.File
	osf    *os.File // file, when it is an OS file
	open   bool
	name   string // the file's temp name; "" while it is unnamed or once it is dst
	placed bool   // the file is named dst
}

// createOutput creates the output file in dir: unnamed where it can, else named by
// TempPattern.
func createOutput(fsys afero.Fs, dir string, calls *sys.Calls) (*output, error) {
	o := &output{fsys: fsys, calls: calls, dir: dir}
	_, o.osFs = fsys.(*afero.OsFs)
	if o.osFs && sys.CanLinkUnnamed() {
		f, err := calls.OpenTmpfile(dir)
		switch {
		case err == nil:
			o.file, o.osf, o.open = f, f, true
			return o, nil
		case !errors.Is(err, sys.ErrUnsupported):
			return nil, err
		}
	}
	f, err := afero.TempFile(fsys, dir, TempPattern)
	if err != nil {
		return nil, err
	}
	o.file, o.name, o.open = f, f.Name(), true
	o.osf, _ = f.(*os.File)
	return o, nil
}

// desc names the file in errors.
func (o *output) desc() string {
	if o.name == "" {
		return filepath.Join(o.dir, "(unnamed temp file)")
	}
	return o.name
}

// chmod gives the output file its permission.
func (o *output) chmod(perm os.FileMode) error {
	if o.name == "" {
		return o.osf.Chmod(perm)
	}
	return o.fsys.Chmod(o.name, perm)
}

// finish ends the writing: a named file is closed before it is renamed; an unnamed one stays
// open, to be linked through its descriptor.
func (o *output) finish() error {
	if o.name == "" {
		return nil
	}
	return o.close()
}

func (o *output) close() error {
	if !o.open {
		return nil
	}
	o.open = false
	return o.file.Close()
}

// place names the file dst; see Finish for how.
func (o *output) place(dst string, replace bool) error {
	if o.name == "" {
		if !replace {
			if err := o.calls.Linkat(o.osf, dst); err != nil {
				return existError(err)
			}
			o.placed = true
			return nil
		}
		name, err := o.linkTemp()
		if err != nil {
			return err
		}
		o.name = name
	}
	switch {
	case replace:
		if err := o.fsys.Rename(o.name, dst); err != nil {
			return err
		}
	case o.osFs:
		err := o.calls.Renameat2(o.name, dst, sys.RenameNoreplace)
		if err == nil {
			break
		}
		if !errors.Is(err, sys.ErrUnsupported) {
			return existError(err)
		}
		err = o.calls.Link(o.name, dst)
		if err == nil {
			o.placed = true
			if err := o.fsys.Remove(o.name); err != nil {
				return fmt.Errorf("remove %s: %w", o.name, err)
			}
			o.name = ""
			return nil
		}
		if !sys.LinkUnsupported(err) {
			return existError(err)
		}
		// No hard links either (some FUSE and FAT file systems): check, then rename.
		if err := notExist(o.fsys, dst); err != nil {
			return err
		}
		if err := o.fsys.Rename(o.name, dst); err != nil {
			return err
		}
	default:
		if err := notExist(o.fsys, dst); err != nil {
			return err
		}
		if err := o.fsys.Rename(o.name, dst); err != nil {
			return err
		}
	}
	o.name, o.placed = "", true
	return nil
}

// linkTemp links the unnamed file to a fresh name of TempPattern in its directory.
func (o *output) linkTemp() (string, error) {
	prefix, suffix, _ := strings.Cut(TempPattern, "*")
	for range 100 {
		name := filepath.Join(o.dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		err := o.calls.Linkat(o.osf, name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("linkat: no free temp name in %s", o.dir)
}

// discard removes what a failed publication made: the file, under its temp name or as dst.
func (o *output) discard(dst string) error {
	var errs []error
	if o.open {
		o.open = false
		errs = append(errs, o.file.Close())
	}
	names := []string{o.name}
	if o.placed {
		names = append(names, dst)
	}
	for _, name := range names {
		if name == "" {
			continue
		}
		if err := o.fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("columns: publish %s: remove %s: %w", dst, name, err))
		}
	}
	return multierr.Join(errs...)
}

// errOutputExists is the error of a publication without Replace whose dst exists, found by
// the check or by the call that names the file.
var errOutputExists = fmt.Errorf("output exists (set Replace to replace it): %w", fs.ErrExist)

// existError is errOutputExists when err, from a call that would not replace dst, wraps
// fs.ErrExist; other errors are returned as they are.
func existError(err error) error {
	if errors.Is(err, fs.ErrExist) {
		return errOutputExists
	}
	return err
}

// destError wraps an error of the check of dst or of its naming.
func destError(dst string, err error) error {
	if errors.Is(err, errOutputExists) {
		return fmt.Errorf("columns: publish %s: %w", dst, err)
	}
	return fmt.Errorf("columns: publish %s: name the output: %w", dst, err)
}

func notExist(fsys afero.Fs, name string) error {
	_, err := fsys.Stat(name)
	switch {
	case err == nil:
		return errOutputExists
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

// trickleWriter writes to the file and paces its writeback (OS files only, sys.Pacer).
type trickleWriter struct {
	ctx     context.Context
	f       afero.File
	pacer   *sys.Pacer // nil: no pacing
	off     int64      // bytes written
	syncErr error
}

func (t *trickleWriter) Write(p []byte) (int, error) {
	if err := t.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := t.f.Write(p)
	t.off += int64(n)
	if err != nil || t.pacer == nil {
		return n, err
	}
	if err := t.pacer.Advance(t.off); err != nil {
		t.syncErr = err
		return n, err
	}
	return n, nil
}
