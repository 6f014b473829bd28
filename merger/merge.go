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
	ls := make([]level, len(inputs))
	schemas := make([]columns.Schema, len(inputs))
	for i, in := range inputs {
		if in == nil {
			return res, fmt.Errorf("%w: input %d is nil", ErrInvalid, i)
		}
		ls[i] = level{name: opts.inputNameOf(i, in), rows: in.Rows(), verify: !opts.SkipChecksums, src: source.OfSegment(in)}
		schemas[i] = in.Schema()
	}
	// The merge is over (its readers done) whether it failed or not: their chunk buffers go
	// back to columns' pools for the next merge (mergeSources drops every level; the inputs
	// stay open, the caller's).
	defer func() { _ = dropLevels(ls) }()
	out, err := outputSchemaOf(ls, schemas, &opts)
	if err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("merger: %w", err)
	}
	return mergeSources(ctx, ls, out, dst, opts, start)
}

// outputSchemaOf returns the output schema of a merge of ls, whose schemas are schemas, after
// Options.InheritRollup has set opts' Rollup and Granularity from them.
func outputSchemaOf(ls []level, schemas []columns.Schema, opts *Options) (columns.Schema, error) {
	if opts.InheritRollup {
		opts.Rollup = true
		g := schemas[0].Granularity
		for _, sc := range schemas {
			opts.Rollup = opts.Rollup && sc.Rollup
			if sc.Granularity != g {
				g = columns.GranularityNone
			}
		}
		if opts.Rollup {
			opts.Granularity = g
		}
	}
	return outputSchema(schemas, func(i int) string { return ls[i].name }, opts.Dimensions, opts.Rollup, opts.Granularity)
}

// inputVerifier is the pass of Options.SkipChecksums over inputs (named names in errors): the
// CRC-32C of every part the read path has not checked. Its first part, the inputs' parts that
// the merge never reads (every bitmap index but those of the output's multi-value dimensions,
// which it rebuilds from them, and every part of a column the output drops), runs early,
// beside the rows (start): after the rows, the pass and the judging of the inputs' structural
// checks took 0.6 s of a 300 M-row hour rollup's 4.8, on one core of two for most of it.
type inputVerifier struct {
	inputs []*columns.Segment
	names  []string
	par    int

	cancel context.CancelFunc // the early part's, while it may run
	early  chan error         // its verdict
}

// start checks the parts of every input that a merge into out never reads, on a goroutine of
// its own (one: the rows beside it take the cores); stop or run waits for it.
func (v *inputVerifier) start(ctx context.Context, out columns.Schema) {
	if v.early != nil {
		return
	}
	cols := []string{columns.TimeColumn}
	var indexes []string // the bitmap indexes the merge reads
	for _, d := range out.Dimensions {
		cols = append(cols, d.Name)
		if d.MultiValue {
			indexes = append(indexes, d.Name)
		}
	}
	for _, m := range out.Metrics {
		cols = append(cols, m.Name)
	}
	ctx, v.cancel = context.WithCancel(ctx)
	v.early = make(chan error, 1)
	go func() {
		for i, seg := range v.inputs {
			if err := seg.VerifyUnreadChecksumsContext(ctx, cols, indexes); err != nil {
				v.early <- v.failed(ctx, i, err)
				return
			}
		}
		v.early <- nil
	}()
}

// stop ends the early check, if it runs, and waits for it (a merge that failed: its caller
// closes the inputs the check reads).
func (v *inputVerifier) stop() {
	if v.early != nil {
		v.cancel()
	}
	_ = v.wait() // the merge failed already: its error is the one returned
}

// run waits for the early check, then checks every part the read path has not checked.
func (v *inputVerifier) run(ctx context.Context) error {
	if err := v.wait(); err != nil {
		return err
	}
	return parallel.Run(len(v.inputs), v.par, func(i int) error {
		if err := v.inputs[i].VerifyChecksumsContext(ctx); err != nil {
			return v.failed(ctx, i, err)
		}
		return nil
	})
}

// wait waits for the early check, if one was started and not waited for, and returns its
// verdict.
func (v *inputVerifier) wait() error {
	if v.early == nil {
		return nil
	}
	err := <-v.early
	v.cancel()
	v.early = nil
	return err
}

// failed returns the error of input i's check.
func (v *inputVerifier) failed(ctx context.Context, i int, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("merger: %w", ctx.Err())
	}
	return fmt.Errorf("merger: %s: %w", v.names[i], err)
}

// mergeSources runs the phases of a merge of ls: while there are more of them than MaxFanIn,
// consecutive groups of them merge into intermediate segments; the last phase writes dst. A
// group is opened when its merge begins and closed when it ends (see level), and an input's
// checksum pass (Options.SkipChecksums) runs in the phase that reads it, before that phase
// publishes its segment. Every level, ls's and the intermediate segments', is dropped on
// return, whatever happens.
func mergeSources(ctx context.Context, ls []level, out columns.Schema, dst target, opts Options, start time.Time) (res Result, err error) {
	cur := ls
	var next []level
	defer func() {
		if rerr := multierr.Join(dropLevels(cur), dropLevels(next)); rerr != nil && err == nil {
			err = rerr
		}
	}()
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
		// Two files: the output's parts in one, the per-row scratch (the id logs' runs) in the
		// other. A file takes one write at a time (its inode's lock), and punching its
		// discarded space (with the discard mount option, a TRIM the punch waits for) holds
		// that lock: in one file, the scratch's writes and punches stalled the parts' writers.
		newMedium := func(budget int64) (*tmpfile.Medium, error) {
			return tmpfile.New(tmpfile.Options{Fs: opts.Fs, Dir: dir, Durability: opts.Durability, BufferBudget: budget})
		}
		// Sets the result err: no err is declared in this block.
		closeMedium := func(what string, m *tmpfile.Medium) {
			if cerr := m.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("merger: %s medium: %w", what, cerr)
			}
			// Counted once closed: its pacer's goroutine is done then.
			if err == nil {
				res.Syncs += int(m.Syncs())
				res.Trickles += int(m.Trickles())
			}
		}
		tm, terr := newMedium(defaultBufferBudget)
		if terr != nil {
			return res, fmt.Errorf("merger: staging medium: %w", terr)
		}
		sm, serr := newMedium(scratchBufferBudget)
		if serr != nil {
			return res, multierr.Join(fmt.Errorf("merger: scratch medium: %w", serr), tm.Close())
		}
		med, opts.scratch = tm, sm
		defer func() {
			closeMedium("staging", tm)
			closeMedium("scratch", sm)
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
	for _, l := range cur {
		res.RowsIn += int64(l.rows)
	}

	fan := opts.MaxFanIn
	if fan == 0 {
		fan = memoryFanIn(opts.MemoryLimit, len(cur), 1+len(out.Dimensions)+len(out.Metrics))
	}
	phases := 1
	if fan > 0 {
		for n := len(cur); n > fan; n = (n + fan - 1) / fan {
			phases++
		}
	}
	res.Phases, res.FanIn = phases, fan
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
		var phaseRows, rowsBefore int64
		for _, l := range cur {
			phaseRows += int64(l.rows)
		}
		for g := 0; g < len(cur); g += fan {
			group := cur[g:min(g+fan, len(cur))]
			if len(group) == 1 {
				next = append(next, group[0])
				group[0] = level{} // handed on to the next phase
				continue
			}
			name := fmt.Sprintf("intermediate segment %d of phase %d", len(next), phase)
			gopts := opts
			gopts.Progress = phaseProgress(opts.Progress, rowsBefore, phaseRows)
			l, st, err := mergeGroup(ctx, group, out, name, dir, med, &gopts, phase, phases)
			rowsBefore += st.rowsIn
			if err != nil {
				return res, err
			}
			next = append(next, l)
			add(st)
			if err := dropLevels(group); err != nil {
				return res, err
			}
		}
		cur, next = next, nil
	}
	if err := acquireLevels(ctx, cur); err != nil {
		return res, err
	}
	srcs, names := sourcesOf(cur)
	fopts := opts
	fopts.verifyInputs = verifierOf(cur, opts.Parallelism)
	pub := columns.PublishOptions{Fs: opts.Fs, Durability: opts.Durability, Replace: opts.Replace}
	st, err := runCore(ctx, srcs, names, out, dst, med, pub, &fopts, phases, phases)
	if err != nil {
		return res, err
	}
	add(st)
	res.RowsOut = st.rowsOut
	res.Bytes = st.info.Size
	res.Info = st.info
	res.Rollup, res.Granularity = out.Rollup, out.Granularity
	res.Schema = out.Clone()
	if syncer != nil {
		res.Syncs += int(syncer.Syncs() - syncs0)
	}
	if trickler != nil {
		res.Trickles += int(trickler.Trickles() - trickles0)
	}
	res.Total = time.Since(start)
	return res, nil
}

// mergeGroup opens the levels of group, merges them into an intermediate segment (returned
// closed, see writeIntermediate) and runs the checksum pass of the group's inputs before the
// segment is handed on; the group stays open, for the caller to drop.
func mergeGroup(ctx context.Context, group []level, out columns.Schema, name, dir string, med medium.Medium,
	opts *Options, phase, phases int) (level, phaseStats, error) {
	if err := acquireLevels(ctx, group); err != nil {
		return level{}, phaseStats{}, err
	}
	srcs, names := sourcesOf(group)
	l, st, err := writeIntermediate(ctx, srcs, names, out, name, dir, med, opts, phase, phases)
	if err != nil {
		return level{}, st, err
	}
	if verify := verifierOf(group, opts.Parallelism); verify != nil {
		t0 := time.Now()
		if err := verify.run(ctx); err != nil {
			return level{}, st, multierr.Join(err, l.drop())
		}
		st.publish += time.Since(t0)
	}
	return l, st, nil
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
// and 97 MiB of RSS; at 4 MiB, at 14 and 85, in the same time. At 2 MiB (since the merge's
// other memory shrank) its peak RSS went from 67.6 to 62.9 MiB and the 30 M-row hour rollup's
// from 79.5 to 76.7 (contiguous) and 89.1 to 87.3 (overlapping), medians of 3, walls within
// noise. Back at 4 MiB once the rows phase had sped up (the merge's 2,355 pwrites of 32 KiB
// a run of 3 M rows then cost it): the 3 M overlapping merge 0.195 -> 0.1875 s, peak RSS
// 63.4 -> 66.7 MiB (medians of 6 pairs).
const defaultBufferBudget = 4 << 20

// scratchBufferBudget caps the buffers of the default scratch medium, the file of the id logs'
// runs (Options.scratch). A variable for tests.
var scratchBufferBudget int64 = 1 << 20

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
