package merger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

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
		err := parallel.Run(len(inputs), opts.Parallelism, func(i int) error {
			if err := inputs[i].VerifyChecksumsContext(ctx); err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("merger: %w", ctx.Err())
				}
				return fmt.Errorf("merger: %s: %w", names[i], err)
			}
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	return mergeSources(ctx, srcs, names, out, dst, opts, start)
}

// mergeSources runs the phases of a merge: while there are more sources than MaxFanIn,
// consecutive groups of them merge into intermediate segments; the last phase writes dst.
func mergeSources(ctx context.Context, srcs []source.Source, names []string, out columns.Schema, dst string, opts Options, start time.Time) (res Result, err error) {
	dir := filepath.Dir(dst)
	if !opts.Replace {
		if _, err := os.Lstat(dst); err == nil {
			return res, fmt.Errorf("merger: %s exists (set Options.Replace to replace it): %w", dst, fs.ErrExist)
		}
	}
	med := opts.Medium
	var syncer interface{ Syncs() int64 }
	var trickler interface{ Trickles() int64 }
	if med == nil {
		tm, err := tmpfile.New(tmpfile.Options{Dir: dir, Durability: opts.Durability, BufferBudget: defaultBufferBudget})
		if err != nil {
			return res, fmt.Errorf("merger: staging medium: %w", err)
		}
		med = tm
		syncer, trickler = tm, tm
		defer func() {
			if cerr := tm.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("merger: staging medium: %w", cerr)
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
	// unnamed files, or (off Linux) named ones to remove.
	type level struct {
		src  source.Source
		name string
		seg  *columns.Segment
		path string
	}
	cur := make([]level, len(srcs))
	for i := range srcs {
		cur[i] = level{src: srcs[i], name: names[i]}
	}
	release := func(ls []level) error {
		var errs []error
		for _, l := range ls {
			if l.seg != nil {
				errs = append(errs, l.seg.Close())
			}
			if l.path != "" {
				if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
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
			file, path, err := createIntermediate(dir)
			if err != nil {
				_ = release(next)
				return res, err
			}
			discard := func() {
				_ = file.Close()
				if path != "" {
					_ = os.Remove(path)
				}
				_ = release(next)
			}
			gs := make([]source.Source, len(group))
			gn := make([]string, len(group))
			for k, l := range group {
				gs[k], gn[k] = l.src, l.name
			}
			gopts := opts
			gopts.Progress = phaseProgress(opts.Progress, rowsBefore, phaseRows)
			st, err := runCore(ctx, gs, gn, out, name, med, columns.PublishOptions{
				// Never synced (unnamed, of no use after a crash), but paced like the output.
				Durability: medium.Durability{Sync: medium.SyncNone, TrickleBytes: opts.Durability.TrickleBytes}, File: file,
			}, &gopts, phase, phases)
			rowsBefore += st.rowsIn
			if err != nil {
				discard()
				return res, err
			}
			add(st)
			seg, err := columns.OpenFile(file, name) // closes file, whatever happens
			if err != nil {
				if path != "" {
					_ = os.Remove(path)
				}
				_ = release(next)
				return res, fmt.Errorf("merger: open %s: %w", name, err)
			}
			next = append(next, level{src: source.OfSegment(seg), name: name, seg: seg, path: path})
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
	st, err := runCore(ctx, ls, ln, out, dst, med, columns.PublishOptions{Durability: opts.Durability, Replace: opts.Replace}, &opts, phases, phases)
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
// merge writes a few dozen parts at once, and 8 MiB of buffers keeps its writes large (over
// 100 KiB each) while the heap stays small.
const defaultBufferBudget = 8 << 20

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
