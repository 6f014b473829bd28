package merger

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/internal/invalid"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/schema"
)

// ErrSchemaConflict marks inputs whose schemas cannot be merged: a metric whose type or
// aggregator differs between inputs, a dimension raw in one input and dictionary-encoded in
// another, a name that is a dimension in one input and a metric in another. The message names
// the column and both inputs. Queries (package merger/query) apply the same rules and wrap the
// same value, exported there as well.
var ErrSchemaConflict = schema.ErrConflict

// ErrUnsorted marks an input whose rows are not in non-decreasing time order.
var ErrUnsorted = errors.New("merger: input rows out of time order")

// ErrInvalid marks a bad argument or option.
// It wraps medium.ErrInvalid.
var ErrInvalid = invalid.Sentinel("merger: invalid argument")

// Options configure Merge. The zero value is the default: a tmpfile medium in the output's
// directory, output synced once (medium.SyncOutput), no rollup, the union of the inputs'
// dimensions first seen first, every input in one phase, GOMAXPROCS workers, no progress.
type Options struct {
	// Medium stages the output's column parts (and those of intermediate segments). Nil means a
	// tmpfile medium in dst's directory, created for the merge and closed at its end, with a
	// second one beside it for the id logs' runs (its own file: see the package doc). A medium
	// given here stays the caller's: Merge only takes children of it, for both.
	Medium medium.Medium
	// Durability of the published output (see medium.SyncMode: with SyncAll the output is also
	// read back from the disk and checked before it is named). Intermediate segments and stages
	// are never synced, but its TrickleBytes paces every file the merge writes: the output, the
	// intermediate segments and the default tmpfile medium's file (a medium given in Medium is
	// paced per its own options: give it the same Durability). Zero is no pacing;
	// medium.DefaultTrickleBytes is the recommended interval.
	Durability medium.Durability
	// Replace allows replacing an existing output file.
	Replace bool
	// Fs is the file system of dst's directory; nil (or an *afero.OsFs) means the OS, and the
	// merge then works as described in the package documentation. Given another afero.Fs,
	// every file the merge touches goes through it: the check that dst does not exist, the
	// publication of the output (columns.PublishOptions.Fs: a named temp file of
	// columns.TempPattern, renamed to dst), the default tmpfile medium (tmpfile.Options.Fs: a
	// file of tmpfile's name pattern, removed right after it is created), and the intermediate
	// segments. Those cannot be unnamed files there: each is published, never synced, under a
	// name of IntermediatePattern in dst's directory, read back through the Fs, and removed
	// once the next phase has read it and on every failure. The inputs are the caller's open
	// segments, read as they are. A merge killed, or a machine crashed, mid-way may leave in
	// the directory files of IntermediatePattern and columns.TempPattern (empty, or a segment;
	// recognised by columns.IsTempFile, removed by columns.SweepTemp) and an empty file of
	// tmpfile's pattern (removed by tmpfile.Sweep). It is for tests (a crash-simulating file
	// system) and for file systems afero offers.
	Fs afero.Fs

	// Rollup combines rows whose truncated time and dimensions are equal, through each
	// metric's aggregator (count and the sums add, min and max keep the extreme, hyperUnique
	// sketches merge).
	Rollup bool
	// Granularity truncates every row's time (as Druid's query granularity does, with or
	// without rollup); with Rollup, rows in one bucket with equal dimensions combine.
	Granularity columns.Granularity
	// InheritRollup takes Rollup from the inputs, in place of the field's value: true when
	// every input is rolled up, and Granularity then too, the inputs' when they share one,
	// else columns.GranularityNone. Result.Rollup and Result.Granularity say what merged.
	InheritRollup bool

	// Dimensions is the output's dimension order. Nil means the union of the inputs'
	// dimensions, in the order first seen (input 0's order, then dimensions only later inputs
	// have). A list given here must name dimensions of the inputs; dimensions it leaves out
	// are dropped from the output (with Rollup, rows then combine across them).
	Dimensions []string
	// InputNames name the inputs in error messages; missing names are the path of a segment
	// opened from a file (Segment.Name), else "input N".
	InputNames []string

	// MaxFanIn is the largest number of inputs merged in one phase; more inputs merge in
	// phases through intermediate segments written in dst's directory (unnamed files, see
	// IntermediatePattern) and released as soon as the next phase has read them. 0 means as
	// many as MemoryLimit holds (about 110 KiB an input's column: 83 inputs of 7 columns
	// under the default), and for MergeInputs no more than fit the process's limit on open
	// files either (see the package documentation). 1 is invalid.
	MaxFanIn int
	// MemoryLimit is the merge's memory budget, in bytes: what grows with its rows (the id
	// logs of the bitmap indexes, the bitmaps step's sort, the keys of large pre-aggregated
	// groups) is kept out of memory past bounds sized to shares of it, and the inputs merged
	// at once are as many as their share holds (with MaxFanIn 0). The merged dictionaries,
	// the row maps of multi-value dimensions (4 bytes an input row), the staging medium's
	// buffers (its own budget) and the Go runtime's overhead are not counted; the inputs'
	// pages are mapped, and the kernel takes them back as it needs. 0 means 256 MiB, under
	// which every bound has its largest value; it must be at least 16 MiB. See budget.go.
	MemoryLimit int64
	// Parallelism is the number of goroutines that write columns, merge dictionaries and
	// rebuild bitmaps at once; 0 means GOMAXPROCS.
	Parallelism int
	// Progress, when set, is called from the merging goroutine every ProgressRows rows and at
	// the end of each phase's row merge, then (step StepBitmaps) about every 100 ms while the
	// bitmap indexes are rebuilt and once when they are done. It must return quickly.
	Progress func(Progress)
	// ProgressRows is the batch of Progress calls; 0 means 65536 rows.
	ProgressRows int

	// SkipChecksums skips the pass that checks the CRC-32C of the input parts the merge did not
	// read, before it publishes the output. Damage in a part the merge reads is found either
	// way: the readers check each part the first time the merge touches it (see
	// columns.Segment), through the mapping the merge then reads, so a damaged input always
	// fails the merge rather than become a valid-looking output. The pass covers the rest (the
	// bitmap indexes of single-value dimensions, say, which a merge rebuilds from the ids), so
	// that a merge fails on any damage in its inputs, as a copy would; it reads only those
	// parts and can be cancelled. The parts the merge never reads (the bitmap indexes it does
	// not rebuild from, every part of a column the output drops) are checked on a goroutine of
	// their own beside the row merge; the rest after it, before the output is published,
	// counting in Result.Publish. The default (false) runs it; skip it for inputs just verified.
	SkipChecksums bool

	// verifyInputs, when set, is the pass above: runCore starts its early part before the
	// rows and runs it before the final publish.
	verifyInputs *inputVerifier

	// scratch, when set, is the medium of what a merge keeps per row (the id logs' runs): with
	// the default staging medium, a file of its own beside it. Nil means children of Medium.
	scratch medium.Medium

	// Compression and ChunkRows are passed to colwrite.Options.
	Compression columns.Compression
	ChunkRows   int
	// StoreIDs keeps every dictionary dimension's ids stored under CompressionZstd, which
	// otherwise leaves out those its readers can derive from the bitmaps (format version 6):
	// for readers of format version 5 and before. colwrite.Options.StoreIDs.
	StoreIDs bool
}

// IntermediatePattern is the name pattern of the intermediate segments of a merge in phases
// where they cannot be unnamed files, as in os.CreateTemp ("*" is random digits). On Linux
// they are unnamed files (O_TMPFILE) in dst's directory, which a killed merge cannot leave
// behind; where the file system has no O_TMPFILE they are created under this pattern and
// unlinked at once (kept named until removed on Windows); on an Options.Fs other than the OS's
// they keep the name until the merge removes them. What a killed merge left under it
// (an empty file, or a segment) is recognised by columns.IsTempFile and removed by
// columns.SweepTemp and segtool sweep.
const IntermediatePattern = ".writeout-merge-*.tmp"

// Progress reports how far a merge is.
type Progress struct {
	Phase, Phases int    // 1-based phase of the merge, and how many there are
	Step          string // StepRows, then StepBitmaps
	RowsDone      int64  // input rows merged so far in this phase
	RowsTotal     int64  // input rows of this phase
	// In step StepBitmaps: the bitmaps (one per merged dimension value) rebuilt so far, and
	// how many there are, of the segment being written. A phase before the last writes one
	// intermediate segment per group of MaxFanIn inputs, each in turn: its steps go rows,
	// bitmaps, rows, bitmaps..., RowsDone counting on over the phase.
	BitmapsDone, BitmapsTotal int64
}

// The steps of a phase that Progress reports.
const (
	StepRows    = "rows"    // rows merge and the columns are written
	StepBitmaps = "bitmaps" // the bitmap indexes are rebuilt
)

// Result describes a finished merge.
type Result struct {
	RowsIn  int64 // rows of the inputs
	RowsOut int64 // rows of the output
	Bytes   int64 // bytes of the output file
	// BytesWritten counts the bytes of every segment file written: the output and the
	// intermediate segments.
	BytesWritten int64
	Phases       int // 1, or more with MaxFanIn
	// FanIn is the most inputs a phase merged at once: MaxFanIn, or the one MergeInputs
	// picked for the descriptor limit; 0 when nothing bounded it.
	FanIn int
	// Rollup and Granularity are the output's (see Options.InheritRollup).
	Rollup      bool
	Granularity columns.Granularity
	// Schema is the output's schema, as its footer holds it.
	Schema columns.Schema
	// Syncs counts the fdatasync and fsync calls made publishing the output, and those that
	// paced writeback where sync_file_range is missing (Durability.TrickleBytes), the staging
	// medium's included (the default one, or a Medium with a Syncs() int64 method).
	Syncs int
	// Trickles counts the sync_file_range calls that paced writeback (Durability.TrickleBytes):
	// of the output, of the intermediate segments and of the staging medium's file (the default
	// one, or a Medium with a Trickles() int64 method).
	Trickles int
	// Time spent in each step, summed over every merge of every phase; Total is wall time.
	Dictionaries, Rows, Bitmaps, Publish, Total time.Duration
	// Info describes the published output.
	Info columns.Info
}

func (o *Options) ensureDefaults() error {
	if _, ok := o.Fs.(*afero.OsFs); ok {
		o.Fs = nil // the OS: unnamed files and the system calls of the OS path
	}
	if o.MaxFanIn < 0 || o.MaxFanIn == 1 {
		return fmt.Errorf("%w: MaxFanIn %d (want 0 for no limit, or at least 2)", ErrInvalid, o.MaxFanIn)
	}
	if o.MemoryLimit < 0 || o.MemoryLimit > 0 && o.MemoryLimit < minMemoryLimit {
		return fmt.Errorf("%w: MemoryLimit %d (want 0 for the default, or at least %d)", ErrInvalid, o.MemoryLimit, minMemoryLimit)
	}
	if o.Parallelism < 0 {
		return fmt.Errorf("%w: Parallelism %d", ErrInvalid, o.Parallelism)
	}
	if o.Parallelism == 0 {
		o.Parallelism = runtime.GOMAXPROCS(0)
	}
	if o.ProgressRows <= 0 {
		o.ProgressRows = 1 << 16
	}
	if err := o.Durability.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := colwrite.Check(colwrite.Options{Compression: o.Compression, ChunkRows: o.ChunkRows}); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if o.Granularity > columns.GranularityDay {
		return fmt.Errorf("%w: unknown granularity %d", ErrInvalid, o.Granularity)
	}
	return nil
}

// inputName names input i in errors: InputNames[i] when given, else "input i".
func (o *Options) inputName(i int) string {
	if i < len(o.InputNames) && o.InputNames[i] != "" {
		return o.InputNames[i]
	}
	return defaultInputPrefix + strconv.Itoa(i)
}

const defaultInputPrefix = "input "

// inputNameOf names input i, seg, in errors: InputNames[i] when given, else the path seg was
// opened from, else "input i".
func (o *Options) inputNameOf(i int, seg *columns.Segment) string {
	if i < len(o.InputNames) && o.InputNames[i] != "" {
		return o.InputNames[i]
	}
	if seg != nil && seg.Name() != "" {
		return seg.Name()
	}
	return o.inputName(i)
}
