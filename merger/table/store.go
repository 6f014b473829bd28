package table

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/lockedio"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
)

// store is what a table needs from where it lives. Names are relative to the table, with
// slashes: "_log/00000000000000000002.json", "segments/x.seg".
type store interface {
	// String names the table's location: a directory, or s3://bucket/prefix/.
	String() string
	// init prepares the location for a new table: on disk, its directories, durable.
	init(ctx context.Context) error
	// read returns the file name whole; a missing one is an error wrapping fs.ErrNotExist.
	read(ctx context.Context, name string) ([]byte, error)
	// createExclusive creates name holding data only if no file has that name; a taken name
	// is an error wrapping fs.ErrExist, with nothing changed. On nil the file is durable. An
	// error wrapping errUncertain says the file may have been created.
	createExclusive(ctx context.Context, name string, data []byte) error
	// list returns the names of the files directly in dir, sorted; none when dir is absent.
	list(ctx context.Context, dir string) ([]string, error)
	// listInfo is list with each file's modification time.
	listInfo(ctx context.Context, dir string) ([]fileInfo, error)
	// remove removes the file name; a missing one is no error.
	remove(ctx context.Context, name string) error
	// putSegment stores the size bytes of src as name: whole or not at all (a temp file
	// renamed, an upload completed), durable on nil. name is new (a unique name).
	putSegment(ctx context.Context, name string, src io.Reader, size int64) error
	// publishSegment stores what write writes as name, as putSegment does: whole or not at
	// all, durable on nil, nothing left on an error.
	publishSegment(ctx context.Context, name string, write func(w io.Writer) error) error
	// location returns where readers of the CLI find name: a local path or an s3:// URL.
	location(name string) string
	// openSegment opens the segment name.
	openSegment(ctx context.Context, name string) (*columns.Segment, func() error, error)
}

// fileInfo is a file of a listing: its base name and when it was last written.
type fileInfo struct {
	name string
	mod  time.Time
}

// errUncertain marks a failed create whose file may nevertheless exist (an answer lost, a
// directory sync failed after the rename).
var errUncertain = errors.New("the outcome is unknown: the file may exist")

// tmpPrefix starts the names of the temp files a local table writes, in _log/ and
// segments/: ".tmp-<16 hex>-<final base name>". IsTempName recognises them.
const tmpPrefix = ".tmp-"

// IsTempName reports whether base is the name of a temp file a table's writer leaves only
// when it crashes or fails to remove it: garbage for vacuum.
func IsTempName(base string) bool {
	rest, ok := strings.CutPrefix(base, tmpPrefix)
	if !ok || len(rest) < 18 || rest[16] != '-' {
		return false
	}
	_, err := hex.DecodeString(rest[:16])
	return err == nil
}

// randomHex returns 16 random hex digits.
func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// RenameNoReplacer is the capability of an afero.Fs a local table commits with: a rename
// that fails, with an error wrapping fs.ErrExist and nothing changed, when newname exists
// (Linux renameat2 with RENAME_NOREPLACE). internal/crashfs has it; for afero.OsFs this
// package uses renameat2, or link(2) then unlink where the file system lacks it, and for an
// afero.MemMapFs (seen by this process only) a rename under a lock after a check.
type RenameNoReplacer interface {
	RenameNoReplace(oldname, newname string) error
}

// memRenameMu serializes the check-then-rename of every MemMapFs.
var memRenameMu sync.Mutex

// renamerOf returns fsys's rename without replace.
func renamerOf(fsys afero.Fs, calls *sys.Calls) (func(oldname, newname string) error, error) {
	switch f := fsys.(type) {
	case RenameNoReplacer:
		return f.RenameNoReplace, nil
	case *afero.OsFs:
		return func(oldname, newname string) error { return osRenameNoReplace(calls, oldname, newname) }, nil
	case *afero.MemMapFs:
		return func(oldname, newname string) error {
			memRenameMu.Lock()
			defer memRenameMu.Unlock()
			if _, err := f.Stat(newname); err == nil {
				return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrExist}
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return f.Rename(oldname, newname)
		}, nil
	}
	return nil, fmt.Errorf("%w: file system %s has no rename that refuses to replace (RenameNoReplacer)", ErrUnsupported, fsys.Name())
}

// osRenameNoReplace renames with renameat2(RENAME_NOREPLACE) or, where the kernel or the file
// system lacks it, links newname to oldname (which fails if newname exists) and removes
// oldname. A failed removal then leaves a second name of the file, a temp name vacuum finds:
// the rename itself is done, so it is not an error.
func osRenameNoReplace(calls *sys.Calls, oldname, newname string) error {
	err := calls.Renameat2(oldname, newname, sys.RenameNoreplace)
	if err == nil || !errors.Is(err, sys.ErrUnsupported) {
		return err
	}
	if err := calls.Link(oldname, newname); err != nil {
		return err
	}
	_ = os.Remove(oldname)
	return nil
}

// localStore is a table in a directory of an afero.Fs.
type localStore struct {
	fs     afero.Fs
	root   string
	rename func(oldname, newname string) error
}

func newLocalStore(fsys afero.Fs, root string, calls *sys.Calls) (*localStore, error) {
	r, err := renamerOf(fsys, calls)
	if err != nil {
		return nil, fmt.Errorf("table: %s: %w", root, err)
	}
	return &localStore{fs: fsys, root: root, rename: r}, nil
}

func (s *localStore) String() string { return s.root }

func (s *localStore) path(name string) string { return filepath.Join(s.root, filepath.FromSlash(name)) }

func (s *localStore) location(name string) string { return s.path(name) }

// init makes the table's directory and its _log/ and segments/ and syncs each directory
// made and the one holding it, so that they survive a crash.
func (s *localStore) init(context.Context) error {
	var made []string
	for _, d := range []string{s.root, s.path(logDir), s.path(segmentsDir)} {
		var missing []string
		for p := d; ; p = filepath.Dir(p) {
			if _, err := s.fs.Stat(p); err == nil {
				break
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("table: %s: %w", p, err)
			}
			missing = append(missing, p)
			if filepath.Dir(p) == p {
				break
			}
		}
		if err := s.fs.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("table: %s: %w", d, err)
		}
		made = append(made, missing...)
	}
	toSync := map[string]bool{}
	for _, d := range made {
		toSync[d], toSync[filepath.Dir(d)] = true, true
	}
	dirs := make([]string, 0, len(toSync))
	for d := range toSync {
		dirs = append(dirs, d)
	}
	// Deepest first: a directory's entries before its own entry in its parent.
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	for _, d := range dirs {
		if err := s.syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

func (s *localStore) syncDir(dir string) error {
	d, err := s.fs.Open(dir)
	if err != nil {
		return fmt.Errorf("table: sync directory %s: %w", dir, err)
	}
	err = d.Sync()
	if err != nil {
		err = fmt.Errorf("table: sync directory %s: %w", dir, err)
	}
	return multierr.Join(err, d.Close())
}

func (s *localStore) read(_ context.Context, name string) ([]byte, error) {
	f, err := s.fs.Open(s.path(name))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxEntryBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxEntryBytes {
		return nil, fmt.Errorf("%w: %s: over %d bytes", ErrCorrupt, s.path(name), maxEntryBytes)
	}
	return b, nil
}

// publish writes a temp file beside name with write, syncs and closes it, renames it to name
// without replacing (a taken name: fs.ErrExist, the temp file removed), and syncs the
// directory.
func (s *localStore) publish(ctx context.Context, name string, write func(w io.Writer) error) (err error) {
	final := s.path(name)
	dir := filepath.Dir(final)
	tmp := filepath.Join(dir, tmpPrefix+randomHex()+"-"+filepath.Base(final))
	f, err := s.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("table: create %s: %w", tmp, err)
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			if rerr := s.fs.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = multierr.Join(err, fmt.Errorf("table: remove %s: %w", tmp, rerr))
			}
		}
	}()
	err = write(f)
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("table: sync %s: %w", tmp, err)
		}
	} else {
		err = fmt.Errorf("table: write %s: %w", tmp, err)
	}
	if cerr := f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("table: close %s: %w", tmp, cerr)
	}
	if err != nil {
		return err
	}
	if err := s.rename(tmp, final); err != nil {
		return fmt.Errorf("table: rename %s to %s: %w", tmp, final, err)
	}
	renamed = true
	if err := s.syncDir(dir); err != nil {
		return fmt.Errorf("%w: %s is in place but may not survive a crash: %w", errUncertain, final, err)
	}
	return nil
}

func (s *localStore) createExclusive(ctx context.Context, name string, data []byte) error {
	return s.publish(ctx, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

func (s *localStore) putSegment(ctx context.Context, name string, src io.Reader, size int64) error {
	return s.publish(ctx, name, func(w io.Writer) error {
		n, err := io.Copy(w, &ctxReader{ctx: ctx, r: io.LimitReader(src, size)})
		if err == nil && n != size {
			err = fmt.Errorf("copied %d bytes of %d: %w", n, size, io.ErrUnexpectedEOF)
		}
		return err
	})
}

func (s *localStore) publishSegment(ctx context.Context, name string, write func(w io.Writer) error) error {
	return s.publish(ctx, name, func(w io.Writer) error { return write(&ctxWriter{ctx: ctx, w: w}) })
}

func (s *localStore) list(_ context.Context, dir string) ([]string, error) {
	infos, err := afero.ReadDir(s.fs, s.path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("table: list %s: %w", s.path(dir), err)
	}
	names := make([]string, 0, len(infos))
	for _, fi := range infos {
		if !fi.IsDir() {
			names = append(names, fi.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

func (s *localStore) listInfo(_ context.Context, dir string) ([]fileInfo, error) {
	infos, err := afero.ReadDir(s.fs, s.path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("table: list %s: %w", s.path(dir), err)
	}
	out := make([]fileInfo, 0, len(infos))
	for _, fi := range infos {
		if !fi.IsDir() {
			out = append(out, fileInfo{name: fi.Name(), mod: fi.ModTime()})
		}
	}
	slices.SortFunc(out, func(a, b fileInfo) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

func (s *localStore) remove(_ context.Context, name string) error {
	if err := s.fs.Remove(s.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("table: remove %s: %w", s.path(name), err)
	}
	return nil
}

func (s *localStore) openSegment(_ context.Context, name string) (*columns.Segment, func() error, error) {
	p := s.path(name)
	if _, ok := s.fs.(*afero.OsFs); ok {
		// The OS's file: mapped where the platform allows, so that reads are views, not a
		// system call each (the structural checks read every bitmap's table entry).
		seg, err := columns.Open(p)
		if err != nil {
			return nil, nil, fmt.Errorf("table: open %s: %w", p, err)
		}
		return seg, seg.Close, nil
	}
	f, err := s.fs.Open(p)
	if err != nil {
		return nil, nil, fmt.Errorf("table: open %s: %w", p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, multierr.Join(fmt.Errorf("table: open %s: %w", p, err), f.Close())
	}
	seg, err := columns.NewSegmentWith(&lockedio.ReaderAt{R: f}, fi.Size(), columns.OpenOptions{Name: p})
	if err != nil {
		return nil, nil, multierr.Join(fmt.Errorf("table: open %s: %w", p, err), f.Close())
	}
	return seg, func() error { return multierr.Join(seg.Close(), f.Close()) }, nil
}

// ctxReader fails reads once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// ctxWriter fails writes once ctx is done.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c *ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// s3Store is a table under a prefix of a bucket.
type s3Store struct {
	c              *objstore.Client
	bucket, prefix string // prefix is "" or ends with "/"

	singleWriter bool // Options.SingleWriter

	probeOnce sync.Once
	probeErr  error
	// checked is set by the probe when the service ignores If-None-Match and singleWriter
	// allows that: createExclusive then checks for the entry and puts it plainly. Read only
	// after checkExclusive returned (sync.Once orders the write before).
	checked bool
}

// exclusiveChecker is a store whose create-exclusive is only as good as the service behind
// it: checkExclusive fails, wrapping ErrUnsupported, where it is not.
type exclusiveChecker interface {
	checkExclusive(ctx context.Context) error
}

// checkExclusive probes, once, that the service honours If-None-Match: * on PutObject: it
// puts _log/.probe-<16 hex> twice, and the second put must be refused; then removes it. A
// service that ignores the header (older S3-compatible servers) would let two writers both
// commit a version, the second replacing the first: ErrUnsupported, unless singleWriter
// (then createExclusive checks, then puts).
func (s *s3Store) checkExclusive(ctx context.Context) error {
	s.probeOnce.Do(func() {
		key := s.key(logDir + "/.probe-" + randomHex())
		if err := s.c.PutIfAbsent(ctx, s.bucket, key, []byte("probe 1")); err != nil {
			s.probeErr = fmt.Errorf("table: %s: probe conditional writes: %w", s, err)
			return
		}
		err := s.c.PutIfAbsent(ctx, s.bucket, key, []byte("probe 2"))
		switch {
		case err == nil && s.singleWriter:
			s.checked = true
		case err == nil:
			s.probeErr = fmt.Errorf("%w: %s: the service replaced %s despite If-None-Match: *: it does not honour conditional writes, so two writers could both commit one version (Options.SingleWriter lets one writer at a time go on)",
				ErrUnsupported, s, objstore.URL(s.bucket, key))
		case !errors.Is(err, fs.ErrExist):
			s.probeErr = fmt.Errorf("table: %s: probe conditional writes: %w", s, err)
		}
		s.probeErr = multierr.Join(s.probeErr, s.c.Remove(ctx, s.bucket, key))
	})
	return s.probeErr
}

// uploadSweeper is a store whose writers may leave pending uploads (a killed multipart upload
// of a segment) and upload markers: sweepUploads aborts those under segments/ that old says
// are old (their start; an upload whose start the service does not give is old only when
// everything is), and removes the markers of uploads no longer pending. It returns the keys.
type uploadSweeper interface {
	sweepUploads(ctx context.Context, old func(time.Time) bool, all bool) ([]string, error)
}

func (s *s3Store) sweepUploads(ctx context.Context, old func(time.Time) bool, all bool) ([]string, error) {
	prefix := s.key(segmentsDir + "/")
	ups, err := s.c.PendingUploads(ctx, s.bucket, prefix)
	if err != nil {
		return nil, fmt.Errorf("table: %s: vacuum: %w", s, err)
	}
	stale := ups[:0]
	var keys []string
	for _, u := range ups {
		if all || !u.Initiated.IsZero() && old(u.Initiated) {
			stale = append(stale, u)
			keys = append(keys, u.Key)
		}
	}
	if err := s.c.AbortUploads(ctx, s.bucket, stale); err != nil {
		return nil, fmt.Errorf("table: %s: vacuum: %w", s, err)
	}
	markers, err := s.c.StaleMarkers(ctx, s.bucket, prefix, 0)
	if err == nil {
		err = s.c.RemoveMarkers(ctx, s.bucket, markers)
	}
	if err != nil {
		return keys, fmt.Errorf("table: %s: vacuum: %w", s, err)
	}
	return append(keys, markers...), nil
}

func (s *s3Store) String() string { return "s3://" + s.bucket + "/" + s.prefix }

func (s *s3Store) key(name string) string { return s.prefix + name }

func (s *s3Store) location(name string) string { return objstore.URL(s.bucket, s.key(name)) }

func (s *s3Store) init(context.Context) error { return nil }

func (s *s3Store) read(ctx context.Context, name string) ([]byte, error) {
	b, err := s.c.ReadObject(ctx, s.bucket, s.key(name), maxEntryBytes)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return b, err
}

func (s *s3Store) createExclusive(ctx context.Context, name string, data []byte) error {
	if s.checked {
		return s.createChecked(ctx, name, data)
	}
	err := s.c.PutIfAbsent(ctx, s.bucket, s.key(name), data)
	if err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("%w: %w", errUncertain, err)
	}
	return err
}

// createChecked is createExclusive on a service that ignores If-None-Match, for a single
// writer (Options.SingleWriter): a HEAD of name, then, if it is absent, a plain PutObject.
// Another writer's put between the two would be replaced.
func (s *s3Store) createChecked(ctx context.Context, name string, data []byte) error {
	key := s.key(name)
	ok, err := s.c.Exists(ctx, s.bucket, key)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("table: %s exists: %w", objstore.URL(s.bucket, key), fs.ErrExist)
	}
	err = s.c.Put(ctx, s.bucket, key, data)
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("%w: %w", errUncertain, err)
	}
	return err
}

func (s *s3Store) putSegment(ctx context.Context, name string, src io.Reader, size int64) error {
	up, err := s.c.NewUpload(s.bucket, s.key(name), objstore.UploadOptions{})
	if err != nil {
		return err
	}
	return up.Publish(ctx, func(w io.Writer) error {
		n, err := io.Copy(w, io.LimitReader(src, size))
		if err == nil && n != size {
			err = fmt.Errorf("copied %d bytes of %d: %w", n, size, io.ErrUnexpectedEOF)
		}
		return err
	})
}

func (s *s3Store) publishSegment(ctx context.Context, name string, write func(w io.Writer) error) error {
	up, err := s.c.NewUpload(s.bucket, s.key(name), objstore.UploadOptions{})
	if err != nil {
		return err
	}
	return up.Publish(ctx, write)
}

func (s *s3Store) list(ctx context.Context, dir string) ([]string, error) {
	p := s.key(dir) + "/"
	objs, err := s.c.List(ctx, s.bucket, p)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		if rest := strings.TrimPrefix(o.Key, p); rest != "" && !strings.Contains(rest, "/") {
			names = append(names, rest)
		}
	}
	slices.Sort(names)
	return names, nil
}

func (s *s3Store) listInfo(ctx context.Context, dir string) ([]fileInfo, error) {
	p := s.key(dir) + "/"
	objs, err := s.c.List(ctx, s.bucket, p)
	if err != nil {
		return nil, err
	}
	out := make([]fileInfo, 0, len(objs))
	for _, o := range objs {
		if rest := strings.TrimPrefix(o.Key, p); rest != "" && !strings.Contains(rest, "/") {
			out = append(out, fileInfo{name: rest, mod: o.ModTime})
		}
	}
	slices.SortFunc(out, func(a, b fileInfo) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

func (s *s3Store) remove(ctx context.Context, name string) error {
	return s.c.Remove(ctx, s.bucket, s.key(name))
}

func (s *s3Store) openSegment(ctx context.Context, name string) (*columns.Segment, func() error, error) {
	seg, err := s.c.OpenSegment(ctx, s.bucket, s.key(name), objstore.ReaderOptions{})
	if err != nil {
		return nil, nil, err
	}
	return seg.Segment, seg.Close, nil
}

// parseLocation returns the store of a table location: s3://bucket/prefix/ (the trailing
// slash optional; s3://bucket/ a table at the bucket's root) or a local directory.
func parseLocation(loc string, o *Options) (store, error) {
	if loc == "" {
		return nil, fmt.Errorf("%w: empty location", ErrInvalid)
	}
	scheme, rest, ok := strings.Cut(loc, "://")
	if ok && scheme == "s3" {
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" || strings.Contains(prefix, "//") || strings.HasPrefix(prefix, "/") ||
			slices.Contains(strings.Split(strings.TrimSuffix(prefix, "/"), "/"), "..") {
			return nil, fmt.Errorf("%w: %q: want s3://bucket/prefix/", ErrInvalid, loc)
		}
		if prefix != "" && !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		if o.S3 == nil {
			return nil, fmt.Errorf("%w: %s: no S3 client (Options.S3)", ErrInvalid, loc)
		}
		return &s3Store{c: o.S3, bucket: bucket, prefix: prefix, singleWriter: o.SingleWriter}, nil
	}
	if ok || len(loc) >= 3 && strings.EqualFold(loc[:3], "s3:") {
		return nil, fmt.Errorf("%w: %q: want a local directory or s3://bucket/prefix/", ErrInvalid, loc)
	}
	return newLocalStore(o.Fs, filepath.Clean(loc), o.calls)
}

// IsLocation reports whether s names a table rather than a segment: an s3:// URL ending in
// "/", or a local directory that holds a _log/ directory (read through fsys; nil: the OS).
func IsLocation(fsys afero.Fs, s string) bool {
	if strings.HasPrefix(s, "s3://") {
		return strings.HasSuffix(s, "/")
	}
	if fsys == nil {
		fsys = afero.NewOsFs()
	}
	fi, err := fsys.Stat(filepath.Join(s, logDir))
	return err == nil && fi.IsDir()
}
