package merger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/lockedio"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/source"
)

// level is one source of a phase: an input of the merge, or an intermediate segment that a
// phase before wrote. It is open only while the merge of its group runs: acquire opens it,
// drop closes it (and removes an intermediate segment for good), so that a merge in phases
// holds at most MaxFanIn sources open at once. The caller's open segments and a Builder's rows
// stay open throughout (open is nil); drop gives back only their readers' buffers.
type level struct {
	name   string
	rows   int
	verify bool // an input whose unread parts' checksums its phase checks (Options.SkipChecksums)
	// open opens the source; nil when src stays open for the whole merge.
	open    func(ctx context.Context) (source.Source, func() error, error)
	src     source.Source // nil while closed
	closeFn func() error  // closes what open opened; nil while closed
	// discard removes an intermediate segment for good (its mapping, its file, its name),
	// once it is closed; nil for an input.
	discard func() error
}

// errReleased marks a level acquired after it was dropped: a bug of the phases' bookkeeping.
var errReleased = errors.New("merger: source acquired after its release")

// acquire opens l unless it is open.
func (l *level) acquire(ctx context.Context) error {
	if l.src != nil {
		return nil
	}
	if l.open == nil {
		return fmt.Errorf("%w: %s", errReleased, l.name)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("merger: %w", err)
	}
	src, closeFn, err := l.open(ctx)
	if err != nil {
		return err
	}
	l.src, l.closeFn = src, closeFn
	return nil
}

// close gives back what the merge took from l: its readers' buffers (source.Release) and,
// unless l stays open, the source itself. A closed l may be acquired again.
func (l *level) close() error {
	if l.src == nil {
		return nil
	}
	source.Release(l.src)
	if l.open == nil {
		return nil
	}
	var err error
	if l.closeFn != nil {
		if cerr := l.closeFn(); cerr != nil {
			err = fmt.Errorf("merger: close %s: %w", l.name, cerr)
		}
	}
	l.src, l.closeFn = nil, nil
	return err
}

// drop closes l and removes an intermediate segment for good. A second drop does nothing.
func (l *level) drop() error {
	err := l.close()
	if l.discard != nil {
		err = multierr.Join(err, l.discard())
		l.discard = nil
	}
	return err
}

// dropLevels drops every level of ls, returning the first error (the others joined behind
// it), and leaves them zero.
func dropLevels(ls []level) error {
	var errs []error
	for i := range ls {
		errs = append(errs, ls[i].drop())
		ls[i] = level{}
	}
	return multierr.Join(errs...)
}

// acquireLevels opens every level of ls; on failure the ones it opened stay open, for the
// caller's drop.
func acquireLevels(ctx context.Context, ls []level) error {
	for i := range ls {
		if err := ls[i].acquire(ctx); err != nil {
			return err
		}
	}
	return nil
}

// sourcesOf returns the sources of ls (open) and their names.
func sourcesOf(ls []level) ([]source.Source, []string) {
	srcs := make([]source.Source, len(ls))
	names := make([]string, len(ls))
	for i, l := range ls {
		srcs[i], names[i] = l.src, l.name
	}
	return srcs, names
}

// verifierOf returns the checksum pass (Options.SkipChecksums) over the open inputs of ls that
// ask for it, or nil when none does.
func verifierOf(ls []level, par int) *inputVerifier {
	var segs []*columns.Segment
	var names []string
	for _, l := range ls {
		if seg := source.Base(l.src); l.verify && seg != nil {
			segs, names = append(segs, seg), append(names, l.name)
		}
	}
	if len(segs) == 0 {
		return nil
	}
	return &inputVerifier{inputs: segs, names: names, par: par}
}

// writeIntermediate merges one group of sources into an intermediate segment in dir and
// returns it as a level, closed: on the OS's file system an unnamed file, mapped and its
// descriptor closed (see mapIntermediate), so that the segments a phase writes for the next
// one hold no descriptor while they wait; on Options.Fs a named file opened again when read.
// The segment is never synced (of no use after a crash) but paced like the output. On failure
// nothing of it is left.
func writeIntermediate(ctx context.Context, srcs []source.Source, names []string, out columns.Schema, name, dir string, med medium.Medium,
	opts *Options, phase, phases int) (level, phaseStats, error) {
	pub := columns.PublishOptions{Durability: medium.Durability{Sync: medium.SyncNone, TrickleBytes: opts.Durability.TrickleBytes}}
	if opts.Fs != nil {
		return writeIntermediateFs(ctx, srcs, names, out, name, dir, med, pub, opts, phase, phases)
	}
	file, path, err := createIntermediate(dir)
	if err != nil {
		return level{}, phaseStats{}, err
	}
	pub.File = file
	st, err := runCore(ctx, srcs, names, out, target{path: name}, med, pub, opts, phase, phases)
	if err != nil {
		_ = file.Close()
		if path != "" {
			_ = os.Remove(path)
		}
		return level{}, st, err
	}
	l, err := mapIntermediate(file, name, path)
	if err != nil {
		return level{}, st, err
	}
	l.rows = int(st.rowsOut)
	return l, st, nil
}

// mapIntermediate turns the intermediate segment just written to file into a level. Where
// files map (Linux), file is mapped read-only and closed: the mapping alone keeps the unnamed
// file alive, the segment is read with ReadAt over the mapping when its phase comes (the
// mapping's pages released behind the merge as an input's are), and discard unmaps it, which
// frees the file. Elsewhere the segment is opened on file at once (columns.OpenFile) and keeps
// its descriptor until discarded. Either way file is the level's or closed, whatever happens,
// and on failure path (when not "") is removed.
func mapIntermediate(file *os.File, name, path string) (level, error) {
	removePath := func() error {
		if path == "" {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("merger: remove %s: %w", path, err)
		}
		return nil
	}
	fi, err := file.Stat()
	var data []byte
	if err == nil {
		data, err = sysCalls.Mmap(int(file.Fd()), 0, int(fi.Size()), sys.ProtRead, sys.MapShared)
	}
	if errors.Is(err, sys.ErrUnsupported) {
		seg, err := columns.OpenFile(file, name) // closes file, whatever happens
		if err != nil {
			return level{}, multierr.Join(fmt.Errorf("merger: open %s: %w", name, err), removePath())
		}
		src := source.OfSegment(seg)
		return level{name: name,
			open:    func(context.Context) (source.Source, func() error, error) { return src, nil, nil },
			discard: func() error { return multierr.Join(seg.Close(), removePath()) },
		}, nil
	}
	if err != nil {
		return level{}, multierr.Join(fmt.Errorf("merger: map %s: %w", name, err), file.Close(), removePath())
	}
	unmap := func() error {
		if err := sysCalls.Munmap(data); err != nil {
			return fmt.Errorf("merger: unmap %s: %w", name, err)
		}
		return nil
	}
	if err := file.Close(); err != nil {
		return level{}, multierr.Join(fmt.Errorf("merger: close %s: %w", name, err), unmap(), removePath())
	}
	return level{name: name,
		open: func(context.Context) (source.Source, func() error, error) {
			seg, err := columns.NewSegmentWith(bytes.NewReader(data), int64(len(data)), columns.OpenOptions{Name: name})
			if err != nil {
				return nil, nil, fmt.Errorf("merger: open %s: %w", name, err)
			}
			release := func() error {
				if err := sysCalls.Madvise(data, sys.MadvDontneed); err != nil {
					return fmt.Errorf("merger: release the pages of %s: %w", name, err)
				}
				return nil
			}
			return source.OfSegmentPages(seg, release), seg.Close, nil
		},
		discard: func() error { return multierr.Join(unmap(), removePath()) },
	}, nil
}

// writeIntermediateFs is writeIntermediate on Options.Fs, where a file cannot be unnamed: the
// segment is published (never synced) under a fresh name of IntermediatePattern in dir,
// reserved first by creating it empty, then read back through the Fs when its phase comes.
func writeIntermediateFs(ctx context.Context, srcs []source.Source, names []string, out columns.Schema, name, dir string, med medium.Medium,
	pub columns.PublishOptions, opts *Options, phase, phases int) (l level, st phaseStats, err error) {
	fsys := opts.Fs
	f, err := afero.TempFile(fsys, dir, IntermediatePattern)
	if err != nil {
		return level{}, st, fmt.Errorf("merger: %s: %w", name, err)
	}
	path := f.Name()
	removePath := func() error {
		if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("merger: remove %s: %w", path, err)
		}
		return nil
	}
	defer func() {
		if err != nil {
			err = multierr.Join(err, removePath())
		}
	}()
	if err := f.Close(); err != nil {
		return level{}, st, fmt.Errorf("merger: %s: close %s: %w", name, path, err)
	}
	pub.Fs, pub.Replace = fsys, true // over the reserved empty file
	st, err = runCore(ctx, srcs, names, out, target{path: path}, med, pub, opts, phase, phases)
	if err != nil {
		return level{}, st, err
	}
	return level{name: name, rows: int(st.rowsOut),
		open: func(context.Context) (source.Source, func() error, error) {
			rf, err := fsys.Open(path)
			if err != nil {
				return nil, nil, fmt.Errorf("merger: open %s: %w", name, err)
			}
			fi, err := rf.Stat()
			var seg *columns.Segment
			if err == nil {
				seg, err = columns.NewSegment(&lockedio.ReaderAt{R: rf}, fi.Size())
			}
			if err != nil {
				return nil, nil, multierr.Join(fmt.Errorf("merger: open %s (%s): %w", name, path, err), rf.Close())
			}
			return source.OfSegment(seg), func() error { return multierr.Join(seg.Close(), rf.Close()) }, nil
		},
		discard: removePath,
	}, st, nil
}
