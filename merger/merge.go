package merger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/parallel"
	"github.com/writeout/writeout/merger/internal/source"
	"github.com/writeout/writeout/tmpfile"
)

// Merge merges inputs into one segment published at dst; see the package documentation for
// what it does and Options for how. The inputs stay open and the caller's.
//
// On any failure, cancellation included, nothing new is left in dst's directory: no output,
// no temp file, no intermediate segment. A cancelled ctx stops the merge within a few
// milliseconds (the publication's final fdatasync, once begun, is waited for) and the error
// wraps ctx.Err().
func Merge(ctx context.Context, inputs []*columns.Segment, dst string, opts Options) (res Result, err error) {
	return merge(ctx, inputs, target{path: dst}, opts)
}

// Output is a destination of MergeTo other than a local file: an object in object storage
// (columns/objstore.Upload), for example. Its methods are called from the merging goroutine.
type Output interface {
	// Name names the output in errors and in Result.Info.Path.
	Name() string
	// Check is called before the merge does any work, and fails if the output cannot be
	// published: it exists and may not be replaced (an error wrapping fs.ErrExist), say.
	Check(ctx context.Context) error
	// Publish calls write once, with a writer that receives the whole segment front to back
	// (its parts checked against their CRC-32C on the way out), and makes the output visible,
	// whole, only if write and everything after it succeed. On any failure, ctx done included,
	// it leaves no output and no trace of one, and returns an error (wrapping write's error,
	// or ctx.Err()).
	Publish(ctx context.Context, write func(w io.Writer) error) error
}

// MergeTo is Merge publishing to out instead of a file: the output's parts are staged in
// the medium as for Merge, then streamed, each checked against its CRC-32C, into
// out.Publish. It is the same merge as Merge's, with another sink. out.Check runs before any
// work. Without Options.Medium the stages (a tmpfile medium) and any intermediate segments
// (Options.MaxFanIn) are in os.TempDir(); Options.Fs, Durability and Replace concern local
// files and are not used for the output (out says whether it replaces).
//
// On any failure, cancellation included, out leaves nothing (see Output.Publish), and no
// local file of the merge remains.
func MergeTo(ctx context.Context, inputs []*columns.Segment, out Output, opts Options) (Result, error) {
	if out == nil {
		return Result{}, fmt.Errorf("%w: nil output", ErrInvalid)
	}
	return merge(ctx, inputs, target{out: out}, opts)
}

// target is where a merge publishes: the file path, or out.
type target struct {
	path string
	out  Output
}

func (t target) name() string {
	if t.out != nil {
		return t.out.Name()
	}
	return t.path
}

// dir is the directory of the merge's local files: path's, or for an Output os.TempDir().
func (t target) dir() string {
	if t.out != nil {
		return os.TempDir()
	}
	return filepath.Dir(t.path)
}

func merge(ctx context.Context, inputs []*columns.Segment, dst target, opts Options) (res Result, err error) {
	start := time.Now()
	if err := opts.ensureDefaults(); err != nil {
		return res, err
	}
	if len(inputs) == 0 {
		return res, fmt.Errorf("%w: no inputs", ErrInvalid)
	}
	srcs := make([]source.Source, len(inputs))
	schemas := make([]columns.Schema, len(inputs))
	names := make([]string, len(inputs))
	for i, in := range inputs {
		if in == nil {
			return res, fmt.Errorf("%w: input %d is nil", ErrInvalid, i)
		}
		srcs[i] = source.OfSegment(in)
		schemas[i] = in.Schema()
		names[i] = opts.inputNameOf(i, in)
	}
	out, err := outputSchema(schemas, func(i int) string { return names[i] }, opts.Dimensions, opts.Rollup, opts.Granularity)
	if err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("merger: %w", err)
	}
	if !opts.SkipChecksums {
		opts.verifyInputs = verifier(inputs, names, opts.Parallelism)
	}
	// The merge is over (its readers done) whether it failed or not: their chunk buffers go
	// back to columns' pools for the next merge.
	defer source.Release(srcs...)
	return mergeSources(ctx, srcs, names, out, dst, opts, start)
}

// verifier returns the pass of Options.SkipChecksums over inputs (named names in errors): the
// CRC-32C of every part the read path has not checked.
func verifier(inputs []*columns.Segment, names []string, par int) func(context.Context) error {
	return func(ctx context.Context) error {
		return parallel.Run(len(inputs), par, func(i int) error {
			if err := inputs[i].VerifyChecksumsContext(ctx); err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("merger: %w", ctx.Err())
				}
				return fmt.Errorf("merger: %s: %w", names[i], err)
			}
			return nil
		})
	}
}

// mergeSources runs the phases of a merge: while there are more sources than MaxFanIn,
// consecutive groups of them merge into intermediate segments; the last phase writes dst.
func mergeSources(ctx context.Context, srcs []source.Source, names []string, out columns.Schema, dst target, opts Options, start time.Time) (res Result, err error) {
	dir := dst.dir()
	switch {
	case dst.out != nil:
		if err := dst.out.Check(ctx); err != nil {
			return res, fmt.Errorf("merger: %s: %w", dst.name(), err)
		}
	case !opts.Replace:
		if _, err := lstat(opts.Fs, dst.path); err == nil {
			return res, fmt.Errorf("merger: %s exists (set Options.Replace to replace it): %w", dst.path, fs.ErrExist)
		}
	}
	med := opts.Medium
	var syncer interface{ Syncs() int64 }
	var trickler interface{ Trickles() int64 }
	if med == nil {
		tm, err := tmpfile.New(tmpfile.Options{Fs: opts.Fs, Dir: dir, Durability: opts.Durability, BufferBudget: defaultBufferBudget})
		if err != nil {
			return res, fmt.Errorf("merger: staging medium: %w", err)
		}
		med = tm
		defer func() {
			if cerr := tm.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("merger: staging medium: %w", cerr)
			}
			// Counted once closed: its pacer's goroutine is done then.
			if err == nil {
				res.Syncs += int(tm.Syncs())
				res.Trickles += int(tm.Trickles())
			}
		}()
	} else {
		syncer, _ = med.(interface{ Syncs() int64 })
		trickler, _ = med.(interface{ Trickles() int64 })
	}
	var syncs0, trickles0 int64
	if syncer != nil {
		syncs0 = syncer.Syncs()
	}
	if trickler != nil {
		trickles0 = trickler.Trickles()
	}
	for _, s := range srcs {
		res.RowsIn += int64(s.Rows())
	}

	phases := 1
	if opts.MaxFanIn > 0 {
		for n := len(srcs); n > opts.MaxFanIn; n = (n + opts.MaxFanIn - 1) / opts.MaxFanIn {
			phases++
		}
	}
	res.Phases = phases

	// Intermediate segments of the phase being read, to release once read (and on failure):
	// unnamed files, or named ones to remove (off Linux, or on Options.Fs).
	cur := make([]level, len(srcs))
	for i := range srcs {
		cur[i] = level{src: srcs[i], name: names[i]}
	}
	release := func(ls []level) error {
		var errs []error
		for _, l := range ls {
			errs = append(errs, l.release(opts.Fs))
		}
		return multierr.Join(errs...)
	}
	defer func() {
		if rerr := release(cur); rerr != nil && err == nil {
			err = fmt.Errorf("merger: removing intermediate segments: %w", rerr)
		}
	}()
	add := func(st phaseStats) {
		res.Dictionaries += st.dictionaries
		res.Rows += st.rows
		res.Bitmaps += st.bitmaps
		res.Publish += st.publish
		res.BytesWritten += st.info.Size
		res.Syncs += st.info.Syncs
		res.Trickles += st.info.Trickles
	}
	for phase := 1; phase < phases; phase++ {
		var next []level
		var phaseRows, rowsBefore int64
		for _, l := range cur {
			phaseRows += int64(l.src.Rows())
		}
		for g := 0; g < len(cur); g += opts.MaxFanIn {
			group := cur[g:min(g+opts.MaxFanIn, len(cur))]
			if len(group) == 1 {
				next = append(next, group[0])
				cur[g] = level{} // handed on: not released with this phase
				continue
			}
			name := fmt.Sprintf("intermediate segment %d of phase %d", len(next), phase)
			gs := make([]source.Source, len(group))
			gn := make([]string, len(group))
			for k, l := range group {
				gs[k], gn[k] = l.src, l.name
			}
			gopts := opts
			gopts.Progress = phaseProgress(opts.Progress, rowsBefore, phaseRows)
			l, st, err := writeIntermediate(ctx, gs, gn, out, name, dir, med, &gopts, phase, phases)
			rowsBefore += st.rowsIn
			if err != nil {
				_ = release(next)
				return res, err
			}
			add(st)
			next = append(next, l)
		}
		if err := release(cur); err != nil {
			_ = release(next)
			cur = nil
			return res, fmt.Errorf("merger: removing intermediate segments: %w", err)
		}
		cur = next
	}
	ls := make([]source.Source, len(cur))
	ln := make([]string, len(cur))
	for k, l := range cur {
		ls[k], ln[k] = l.src, l.name
	}
	pub := columns.PublishOptions{Fs: opts.Fs, Durability: opts.Durability, Replace: opts.Replace}
	st, err := runCore(ctx, ls, ln, out, dst, med, pub, &opts, phases, phases)
	if err != nil {
		return res, err
	}
	add(st)
	res.RowsOut = st.rowsOut
	res.Bytes = st.info.Size
	res.Info = st.info
	if syncer != nil {
		res.Syncs += int(syncer.Syncs() - syncs0)
	}
	if trickler != nil {
		res.Trickles += int(trickler.Trickles() - trickles0)
	}
	res.Total = time.Since(start)
	return res, nil
}

// phaseProgress adapts the Progress of one group's merge to the phase holding it: rows count
// from rowsBefore (the rows of the phase's earlier groups) up to the phase's rows.
func phaseProgress(progress func(Progress), rowsBefore, phaseRows int64) func(Progress) {
	if progress == nil {
		return nil
	}
	return func(p Progress) {
		p.RowsDone += rowsBefore
		p.RowsTotal = phaseRows
		progress(p)
	}
}

// defaultBufferBudget caps the Go heap memory of the default staging medium's buffers: a
// merge writes a few dozen parts at once, and a few MiB of buffers keep its writes large while
// the heap stays small. At 8 MiB the peers' 3,000,000-row merge peaked at 21 MiB of Go heap
// and 97 MiB of RSS; at 4 MiB, at 14 and 85, in the same time.
const defaultBufferBudget = 4 << 20

// level is one source of a phase: an input, or an intermediate segment to release once read
// (and on failure).
type level struct {
	src  source.Source
	name string
	seg  *columns.Segment // an intermediate segment, to close
	file afero.File       // the file seg reads, to close (on Options.Fs)
	path string           // the intermediate segment's name, to remove ("" when unnamed)
}

// release closes an intermediate segment and removes its file (on fsys, nil meaning the OS).
// An input is left alone.
func (l level) release(fsys afero.Fs) error {
	var errs []error
	if l.seg != nil {
		errs = append(errs, l.seg.Close())
	}
	if l.file != nil {
		errs = append(errs, l.file.Close())
	}
	if l.path != "" {
		if err := remove(fsys, l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return multierr.Join(errs...)
}

// writeIntermediate merges one group of sources into an intermediate segment in dir and opens
// it. The segment is never synced (of no use after a crash) but paced like the output. On
// failure nothing of it is left.
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
	seg, err := columns.OpenFile(file, name) // closes file, whatever happens
	if err != nil {
		if path != "" {
			_ = os.Remove(path)
		}
		return level{}, st, fmt.Errorf("merger: open %s: %w", name, err)
	}
	return level{src: source.OfSegment(seg), name: name, seg: seg, path: path}, st, nil
}

// writeIntermediateFs is writeIntermediate on Options.Fs, where a file cannot be unnamed: the
// segment is published (never synced) under a fresh name of IntermediatePattern in dir,
// reserved first by creating it empty, then read back through the Fs.
func writeIntermediateFs(ctx context.Context, srcs []source.Source, names []string, out columns.Schema, name, dir string, med medium.Medium,
	pub columns.PublishOptions, opts *Options, phase, phases int) (l level, st phaseStats, err error) {
	fsys := opts.Fs
	f, err := afero.TempFile(fsys, dir, IntermediatePattern)
	if err != nil {
		return level{}, st, fmt.Errorf("merger: %s: %w", name, err)
	}
	path := f.Name()
	defer func() {
		if err != nil {
			if rerr := fsys.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = multierr.Join(err, fmt.Errorf("merger: remove %s: %w", path, rerr))
			}
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
	rf, err := fsys.Open(path)
	if err != nil {
		return level{}, st, fmt.Errorf("merger: open %s: %w", name, err)
	}
	fi, err := rf.Stat()
	var seg *columns.Segment
	if err == nil {
		seg, err = columns.NewSegment(&lockedReaderAt{r: rf}, fi.Size())
	}
	if err != nil {
		return level{}, st, multierr.Join(fmt.Errorf("merger: open %s (%s): %w", name, path, err), rf.Close())
	}
	return level{src: source.OfSegment(seg), name: name, seg: seg, file: rf, path: path}, st, nil
}

// lockedReaderAt serializes ReadAt calls: the files of an afero.Fs need not allow concurrent
// ones (afero's MemMapFs moves a shared offset), and a merge reads its sources from several
// goroutines.
type lockedReaderAt struct {
	mu sync.Mutex
	r  io.ReaderAt
}

func (l *lockedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.ReadAt(p, off)
}

// lstat describes name without following a final symbolic link where fsys (nil: the OS) can.
func lstat(fsys afero.Fs, name string) (fs.FileInfo, error) {
	if fsys == nil {
		return os.Lstat(name)
	}
	if l, ok := fsys.(afero.Lstater); ok {
		fi, _, err := l.LstatIfPossible(name)
		return fi, err
	}
	return fsys.Stat(name)
}

// remove removes name from fsys (nil: the OS).
func remove(fsys afero.Fs, name string) error {
	if fsys == nil {
		return os.Remove(name)
	}
	return fsys.Remove(name)
}

// sysCalls are the system calls that create intermediate segments; tests replace them.
var sysCalls = &sys.Default

// createIntermediate creates the file of an intermediate segment in dir: unnamed (O_TMPFILE)
// where the file system allows, so that even a killed merge leaves nothing; else a file of
// IntermediatePattern, unlinked at once where an open file survives that (every system but
// Windows), its path returned only when it keeps its name. Either way the file is the
// caller's to close (and, with a path, to remove).
func createIntermediate(dir string) (f *os.File, path string, err error) {
	f, err = sysCalls.OpenTmpfile(dir)
	if err == nil {
		return f, "", nil
	}
	if !errors.Is(err, sys.ErrUnsupported) {
		return nil, "", fmt.Errorf("merger: intermediate segment: %w", err)
	}
	f, err = os.CreateTemp(dir, IntermediatePattern)
	if err != nil {
		return nil, "", fmt.Errorf("merger: intermediate segment: %w", err)
	}
	if runtime.GOOS == "windows" {
		return f, f.Name(), nil
	}
	if err := os.Remove(f.Name()); err != nil {
		return nil, "", multierr.Join(fmt.Errorf("merger: intermediate segment: %w", err), f.Close(), os.Remove(f.Name()))
	}
	return f, "", nil
}
