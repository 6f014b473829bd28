package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/location"
)

type mergeFlags struct {
	out          string
	medium       string
	tmpDir       string
	durability   string
	trickle      string
	rollup       bool
	granularity  string
	maxFanIn     int
	dimensions   string
	parallelism  int
	replace      bool
	quiet        bool
	progress     string
	verifyInputs bool
	memoryLimit  string
	compression  string
	storeIDs     bool
	s3           *s3Flags
}

func newMergeCmd() *cobra.Command {
	f := mergeFlags{s3: &s3Flags{}}
	cmd := &cobra.Command{
		Use:   "merge --out SEG.seg [flags] SEG...",
		Short: "Merge segments into one, through a write-out medium",
		Long: `merge reads the input segments and writes one segment sorted by time and dimensions: the
dictionaries merge first, rows merge k-way, bitmaps are rebuilt one value at a time. Each column
part is staged in the --medium, then copied into a temp file next to --out (checking its CRC on
the way), synced per --durability and renamed into place.

Media: heap (Go heap), offheap (anonymous mappings outside the Go heap), tmpfile (one temp file
in --tmp-dir, the default), mmapfile (a shared file mapping in --tmp-dir; Linux only).
Durability: none (no syncs, and no pacing unless --trickle is given), output (fdatasync the
output, fsync its directory; the default), all (as output, and the synced output is read back
from the disk and its checksums checked before it is named). --trickle SIZE (default 8MiB with
output and all; e.g. 512KiB; 0 is off)
paces writeback of every file the merge writes (the staging file, intermediate segments,
the output): each SIZE written is submitted to the disk (sync_file_range) and the one before it
waited for, so dirty pages stay bounded and the final sync is short; where the call is missing,
the file is fdatasynced every SIZE instead.

--compression is the codec of the output's chunks (values and ids): s2 (the default, the
fastest to read), zstd (smaller, with the size-oriented encodings of format versions 4 to 6:
ids by frequency rank or, for ids sorted within time buckets, as differences; no ids at all
for a dimension of at most 1024 values with a bitmap index, whose readers derive them from the
bitmaps, unless --store-ids; numbers as entropy-coded byte planes) or none. A chunk is kept
compressed only when that makes it smaller; readers need no flag, and 'segtool inspect' shows
each part's codec. Readers of format version 5 and before refuse version 6: --store-ids writes
for them.

With --rollup, rows with the same time truncated to --granularity and the same dimensions
combine through each metric's aggregator; --granularity alone truncates times. Without either
flag, the output rolls up when every input is rolled up, at the inputs' granularity when they
share one (--rollup=false turns that off). --max-fan-in N
merges at most N inputs at once, in phases through intermediate segments next to --out; a
phase opens only the inputs it merges, so about N files are open at once. Without it, a merge
of more inputs than the open-file limit allows (ulimit -n, less the files open and 16 kept for
the merge) merges as many at a time as fit, in phases, instead of failing; the output is the
same either way.
Before merging, the CRC-32C of every input part is checked (one read of the inputs): a
damaged input fails the merge, naming the file, column and part, and no output is written.
--verify-inputs also checks every structural invariant of every input first (decoding it all);
an s3:// input is then fetched once, whole, to a temp file in --tmp-dir that the check and the
merge both read, and removed after.

On a terminal, standard error shows a progress bar (rows, rate, ETA); the summary goes to
standard output (none with --quiet). Ctrl-C stops the merge within a second, removes its temp
files and leaves no output.

` + s3Help + ` An s3:// --out is uploaded
in parts of 5 MiB (doubling every 2,000) of a multipart upload, the parts staged in the
--medium (in --tmp-dir, default the system's temp directory) and checked on the way out: the
object appears only when the
upload completes; a failed or interrupted merge aborts the upload and leaves nothing. The
progress bar also counts the bytes fetched and uploaded.`,
		Example: `  segtool merge --out all.seg day1.seg day2.seg day3.seg
  segtool merge --out hourly.seg --rollup --granularity hour --medium offheap data/*.seg
  segtool merge --out small.seg --compression zstd day1.seg day2.seg day3.seg
  segtool merge --out big.seg --max-fan-in 8 --tmp-dir scratch --durability all parts/*.seg
  segtool merge --out s3://seg/all.seg s3://seg/day1.seg s3://seg/day2.seg`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlag(cmd, "out"); err != nil {
				return err
			}
			return runMerge(cmd, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "output segment file (required)")
	fl.StringVar(&f.medium, "medium", "tmpfile", "staging medium: heap, offheap, tmpfile or mmapfile")
	fl.StringVar(&f.tmpDir, "tmp-dir", "", "directory of the tmpfile and mmapfile media (default: the output's directory)")
	fl.StringVar(&f.durability, "durability", "output", "none, output or all")
	// 8MiB: on a 1M-row wide merge (200 MiB written) peak Dirty+Writeback went from 360-382 MiB
	// without trickle to 19-39 MiB, at no measurable cost in wall time (1-16 MiB all did as well).
	fl.StringVar(&f.trickle, "trickle", "8MiB", "pace writeback every SIZE bytes written (0: off; off by default with --durability none)")
	fl.BoolVar(&f.rollup, "rollup", false, "combine rows with equal truncated time and dimensions")
	fl.StringVar(&f.granularity, "granularity", "none", "time granularity: none, second, minute, hour or day")
	fl.IntVar(&f.maxFanIn, "max-fan-in", 0, "inputs merged (and open) per phase (0: as many as --memory-limit and the open-file limit allow)")
	fl.StringVar(&f.dimensions, "dimensions", "", "output dimensions, comma-separated (default: the union of the inputs')")
	fl.IntVar(&f.parallelism, "parallelism", 0, "goroutines writing columns (0: one per CPU)")
	fl.BoolVar(&f.replace, "replace", false, "replace an existing output")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress bar, no summary")
	addProgressFlag(cmd, &f.progress, false)
	fl.BoolVar(&f.verifyInputs, "verify-inputs", false, "verify every input (checksums and invariants) before merging")
	fl.StringVar(&f.memoryLimit, "memory-limit", "256MiB", "the merge's memory budget, at least 16MiB: bounds what it keeps of its rows in memory, and the inputs merged at once (more merge in phases); also the Go runtime's soft memory limit unless GOMEMLIMIT is set")
	addCompressionFlag(cmd, &f.compression)
	fl.BoolVar(&f.storeIDs, "store-ids", false, "with --compression zstd, store every dimension's ids (format version 5 at most), for readers of earlier versions")
	addS3UploadFlags(cmd, f.s3)
	return cmd
}

// mergeSettings are the options of mergeFiles.
type mergeSettings struct {
	medium      medium.Medium // nil: mediumName in tmpDir
	mediumName  string
	tmpDir      string
	durability  medium.Durability
	replace     bool
	rollup      bool
	granularity columns.Granularity
	// inherit: roll up when every input does, at their common granularity (if any).
	inherit     bool
	maxFanIn    int
	memoryLimit int64
	dimensions  []string
	parallelism int
	compression columns.Compression // of the output's chunks; the zero value is s2
	storeIDs    bool                // merger.Options.StoreIDs
	progress    func(merger.Progress)
	// skipChecksums: the inputs were just verified (--verify-inputs).
	skipChecksums bool
	// local maps s3:// inputs to the local files that hold their bytes (fetchInputs).
	local map[string]string
	// s3 reaches the s3:// inputs and output; nil: none may be s3://.
	s3 *s3Flags
}

// mergeResult is what mergeFiles reports.
type mergeResult struct {
	merger.Result
	rowsIn, rowsOut int64
	bytes           int64
	interval        columns.Interval
	rollup          bool // as merged (see mergeSettings.inherit)
	granularity     columns.Granularity
}

// mergeFiles merges the segment files inputs into dst; inputs and dst may be s3:// objects.
// The merge opens each input only while it reads it (merger.MergeInputs).
func mergeFiles(ctx context.Context, inputs []string, dst string, s mergeSettings) (res mergeResult, err error) {
	s3 := s.s3
	if s3 == nil {
		s3 = &s3Flags{}
	}
	ins := make([]merger.Input, len(inputs))
	for i, p := range inputs {
		ins[i] = mergeInput{path: p, open: orLocal(s.local, p), s3: s3}
	}
	var up *objstore.Upload
	if objstore.IsURL(dst) {
		if up, err = newUpload(dst, s.replace, s3); err != nil {
			return res, err
		}
	} else {
		// The output's directory is made now, and unmade if the merge fails (an input that
		// does not open included).
		undo, uerr := makeOutputDir(filepath.Dir(dst), s.durability)
		if uerr != nil {
			return res, uerr
		}
		defer func() {
			if err != nil {
				undo()
			}
		}()
	}
	med := s.medium
	if med == nil && s.mediumName != "" {
		dir := s.tmpDir
		if dir == "" && up == nil {
			dir = filepath.Dir(dst)
		}
		if dir == "" {
			dir = os.TempDir()
		}
		if med, err = openMedium(s.mediumName, dir, s.durability); err != nil {
			return res, err
		}
		defer func() { err = errors.Join(err, med.Close()) }()
	}
	opts := merger.Options{
		Medium:        med,
		Durability:    s.durability,
		Replace:       s.replace,
		Rollup:        s.rollup,
		Granularity:   s.granularity,
		InheritRollup: s.inherit,
		Dimensions:    s.dimensions,
		InputNames:    inputs,
		MaxFanIn:      s.maxFanIn,
		MemoryLimit:   s.memoryLimit,
		Parallelism:   s.parallelism,
		Compression:   s.compression,
		StoreIDs:      s.storeIDs,
		Progress:      s.progress,

		SkipChecksums: s.skipChecksums,
	}
	var r merger.Result
	if up != nil {
		r, err = merger.MergeInputsTo(ctx, ins, up, opts)
	} else {
		r, err = merger.MergeInputs(ctx, ins, dst, opts)
	}
	if err != nil {
		return res, fmt.Errorf("merge into %s: %w", dst, err)
	}
	return mergeResult{Result: r, rowsIn: r.RowsIn, rowsOut: r.RowsOut, bytes: r.Bytes, interval: r.Info.Interval,
		rollup: r.Rollup, granularity: r.Granularity}, nil
}

// mergeInput is an input of mergeFiles, opened by the merge when it reads it: a segment file,
// or with an s3:// path an object.
type mergeInput struct {
	path string // its name
	open string // where it is read: path, or a local copy of an s3:// path
	s3   *s3Flags
}

func (m mergeInput) Name() string { return m.path }

func (m mergeInput) Open(ctx context.Context) (*columns.Segment, func() error, error) {
	return openInput(ctx, m.open, m.s3)
}

// orLocal returns the local copy of path in local, or path.
func orLocal(local map[string]string, path string) string {
	if p, ok := local[path]; ok {
		return p
	}
	return path
}

// fetchInputs copies each s3:// input among inputs, whole, to a temp file in dir (default:
// the system's), for --verify-inputs: the check and the merge then read the copy, and every
// byte is fetched once (verifying the object and then merging it fetched it twice). cleanup
// removes the copies; it is to be called whatever the error.
func fetchInputs(ctx context.Context, inputs []string, dir string, s3 *s3Flags) (local map[string]string, cleanup func() error, err error) {
	local = map[string]string{}
	cleanup = func() error {
		var err error
		for _, p := range local {
			if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
		return err
	}
	if dir == "" {
		dir = os.TempDir()
	}
	for _, in := range inputs {
		if !objstore.IsURL(in) || local[in] != "" {
			continue
		}
		p, err := fetchObject(ctx, in, dir, s3)
		if err != nil {
			return local, cleanup, fmt.Errorf("verify %s: %w", in, err)
		}
		local[in] = p
	}
	return local, cleanup, nil
}

// fetchObject copies the object at url to a new temp file in dir and returns its path.
func fetchObject(ctx context.Context, url, dir string, s3 *s3Flags) (path string, err error) {
	bucket, key, err := objstore.ParseURL(url)
	if err != nil {
		return "", usageError{err}
	}
	c, err := s3.clientFor()
	if err != nil {
		return "", err
	}
	r, err := c.NewReader(ctx, bucket, key, objstore.ReaderOptions{CacheDir: dir, Progress: func(n int64) {
		s3.fetched.Add(n)
		s3.moved()
	}})
	if err != nil {
		return "", err
	}
	defer func() {
		g, _ := r.Stats()
		s3.gets.Add(g)
		err = errors.Join(err, r.Close())
	}()
	f, err := os.CreateTemp(dir, ".writeout-input-*.seg")
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, io.NewSectionReader(r, 0, r.Size()))
	if err = errors.Join(err, f.Close()); err != nil {
		return "", errors.Join(err, os.Remove(f.Name()))
	}
	return f.Name(), nil
}

// openSegment opens a segment file (mapped where the platform allows). The close function
// closes the segment.
func openSegment(path string) (*columns.Segment, func() error, error) {
	sg, err := columns.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return sg, sg.Close, nil
}

func runMerge(cmd *cobra.Command, f mergeFlags, inputs []string) (err error) {
	gran, err := columns.ParseGranularity(f.granularity)
	if err != nil {
		return usageError{err}
	}
	dur, err := parseDurability(f.durability)
	if err != nil {
		return err
	}
	if dur.TrickleBytes, err = parseSize(f.trickle); err != nil {
		return usagef("--trickle: %v", err)
	}
	if dur.Sync == medium.SyncNone && !cmd.Flags().Changed("trickle") {
		dur.TrickleBytes = 0 // none is no syncs and no pacing, unless --trickle asks for it
	}
	limit, err := parseSize(f.memoryLimit)
	if err != nil {
		return usagef("--memory-limit: %v", err)
	}
	if limit < 16<<20 {
		return usagef("--memory-limit %s: want at least 16MiB", f.memoryLimit)
	}
	if f.maxFanIn < 0 || f.maxFanIn == 1 {
		return usagef("--max-fan-in must be 0 (no limit) or at least 2")
	}
	comp, err := parseCompression(f.compression)
	if err != nil {
		return err
	}
	if f.medium == "mmapfile" && !mmapfileAvailable() {
		return usagef("--medium mmapfile needs Linux")
	}
	if err := checkProgress(f.progress); err != nil {
		return err
	}
	if _, err := openMediumCheck(f.medium); err != nil {
		return err
	}
	// Malformed locations (s3:/b/k, S3://b/k, gs://b/k) are usage errors before any work,
	// never local paths: --out s3:/b/k made a local directory "s3:".
	if _, err := location.Parse(f.out); err != nil {
		return usageError{fmt.Errorf("--out: %w", err)}
	}
	if err := parseLocations(inputs); err != nil {
		return err
	}
	if objstore.IsURL(f.out) {
		up, err := newUpload(f.out, f.replace, f.s3)
		if err != nil {
			return err
		}
		if err := up.Check(cmd.Context()); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s: output exists (use --replace to overwrite it)", f.out)
			}
			return err
		}
	} else if err := checkOutput(f.out, f.replace); err != nil {
		return err
	}
	for _, in := range inputs {
		if in == f.out || !objstore.IsURL(in) && (abs(in) == abs(f.out) || sameFile(in, f.out)) {
			return usagef("%s is both an input and the output", in)
		}
	}
	setMemoryLimit(limit)
	removeTmp, err := makeTmpDir(f.tmpDir)
	if err != nil {
		return err
	}
	defer removeTmp()
	var local map[string]string // --verify-inputs: s3:// inputs fetched to local files
	if f.verifyInputs {
		var cleanup func() error
		local, cleanup, err = fetchInputs(cmd.Context(), inputs, f.tmpDir, f.s3)
		defer func() { err = errors.Join(err, cleanup()) }()
		if err != nil {
			return err
		}
		for _, in := range inputs {
			if _, err := verifyInput(cmd.Context(), orLocal(local, in), f.s3); err != nil {
				return fmt.Errorf("verify %s: %w", in, err)
			}
		}
	}

	s := mergeSettings{mediumName: f.medium, tmpDir: f.tmpDir, durability: dur, replace: f.replace, rollup: f.rollup,
		granularity: gran, inherit: !cmd.Flags().Changed("rollup") && !cmd.Flags().Changed("granularity"), maxFanIn: f.maxFanIn, memoryLimit: limit, dimensions: splitList(f.dimensions), parallelism: f.parallelism,
		compression: comp, storeIDs: f.storeIDs, skipChecksums: f.verifyInputs, s3: f.s3, local: local}
	var bar *phaseBar
	if wantProgress(f.progress, f.quiet, cmd.ErrOrStderr(), nil) {
		bar = newPhaseBar(cmd.ErrOrStderr(), f.s3.transfer)
		s.progress = bar.update
		f.s3.onBytes = bar.refresh
	}
	start := time.Now()
	res, err := mergeFiles(cmd.Context(), inputs, f.out, s)
	if bar != nil {
		bar.finish(err == nil)
	}
	if err != nil {
		if cmd.Context().Err() != nil {
			if errors.Is(err, objstore.ErrPending) {
				// No object, but the upload could not be aborted: say how to remove it.
				return fmt.Errorf("merge into %s: interrupted; temp files removed, no output written; %w", f.out, err)
			}
			return fmt.Errorf("merge into %s: interrupted; temp files removed, no output written", f.out)
		}
		if errors.Is(err, fs.ErrExist) {
			// Another process published the output after this one checked: it stays as it is.
			return fmt.Errorf("%s: output exists (use --replace to overwrite it); it appeared during the merge, which wrote nothing", f.out)
		}
		return err
	}
	if !f.quiet {
		el := time.Since(start)
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "merged %d segment(s), %d rows, into %s: %d rows, %s, %s\n",
			len(inputs), res.rowsIn, f.out, res.rowsOut, humanBytes(res.bytes), res.interval)
		phases := fmt.Sprintf("%d phase(s)", res.Phases)
		if res.Phases > 1 {
			phases += fmt.Sprintf(" of up to %d inputs", res.FanIn)
			if f.maxFanIn == 0 {
				phases += " (fan-in picked to fit --memory-limit and the open-file limit)"
			}
		}
		fmt.Fprintf(out, "medium %s, durability %s, rollup %v (granularity %s), %s, %d sync(s)\n",
			f.medium, f.durability, res.rollup, res.granularity, phases, res.Syncs)
		if dur.TrickleBytes > 0 {
			fmt.Fprintf(out, "trickle every %s: %d sync_file_range call(s)\n", humanBytes(dur.TrickleBytes), res.Trickles)
		}
		if t := f.s3.transfer(); t != "" {
			fmt.Fprintf(out, "s3: %s (%d GETs)\n", t, f.s3.gets.Load())
		}
		fmt.Fprintf(out, "time %s (%s): dictionaries %s, rows %s, bitmaps %s, publish %s\n",
			humanDuration(el), rate(res.rowsIn, el), humanDuration(res.Dictionaries), humanDuration(res.Rows),
			humanDuration(res.Bitmaps), humanDuration(res.Publish))
	}
	return nil
}

// openMediumCheck validates a medium name without opening it.
func openMediumCheck(name string) (string, error) {
	for _, n := range mediumNames {
		if n == name {
			return name, nil
		}
	}
	_, err := openMedium(name, "", medium.Durability{})
	return "", err
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// phaseBar shows a merge's progress (merger.Progress) on a progressBar: a stage per phase,
// each left on a line of its own. Its description ends with transfer's text (the bytes fetched
// and uploaded), redrawn by refresh as they move.
type phaseBar struct {
	pb       *progressBar
	transfer func() string // nil: none

	mu      sync.Mutex // update runs in the merge, refresh in the transfers
	started bool
	phase   int
	desc    string
	step    string // the description's merge part
}

func newPhaseBar(w io.Writer, transfer func() string) *phaseBar {
	return &phaseBar{pb: newProgressBar(w), transfer: transfer}
}

// refresh redraws the description with the bytes moved so far.
func (p *phaseBar) refresh() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		p.describe()
	}
}

// describe sets the bar's description. p.mu is held.
func (p *phaseBar) describe() {
	d := p.step
	if p.transfer != nil {
		if t := p.transfer(); t != "" {
			d += ", " + t
		}
	}
	// Once the rows are done the bar is cleared; the bytes still move (the upload): the
	// description goes on a status line of its own, overwritten in place.
	p.pb.describe(d)
}

func (p *phaseBar) update(pr merger.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started || pr.Phase != p.phase {
		p.phase = pr.Phase
		p.desc = "merging"
		if pr.Phases > 1 {
			p.desc = fmt.Sprintf("phase %d/%d", pr.Phase, pr.Phases)
		}
		p.pb.stage(p.desc, pr.RowsTotal, unitRows, p.started)
		p.started = true
	}
	// The bar counts rows; while bitmap indexes are rebuilt (after a segment's rows), its
	// description counts them.
	if pr.Step == merger.StepBitmaps && pr.BitmapsTotal > 0 {
		p.step = fmt.Sprintf("%s, bitmaps %d%%", p.desc, pr.BitmapsDone*100/pr.BitmapsTotal)
	} else {
		p.step = p.desc
	}
	p.describe()
	p.pb.set(pr.RowsDone)
}

func (p *phaseBar) finish(ok bool) { p.pb.finish(ok) }
