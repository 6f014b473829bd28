package ingest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/location"
)

// TempPattern names the temp directory (in Options.TmpDir) that holds an ingestion's runs while
// it lasts; a killed process can leave one behind, which `segtool sweep` removes.
const TempPattern = "writeout-ingest-*.tmp"

// DefaultOptions returns the Options whose zero fields mean the defaults, with the defaults
// filled in: for help text that shows them.
func DefaultOptions() Options {
	return Options{
		MaxRowsInMemory: defaultMaxRowsInMemory,
		MemoryLimit:     defaultMemoryLimit,
		MaxFanIn:        defaultMaxFanIn,
		MaxRecordBytes:  defaultMaxRecordBytes,
	}
}

// defaultMaxRowsInMemory is Options.MaxRowsInMemory's default.
const defaultMaxRowsInMemory = 500_000

// defaultMaxFanIn is Options.MaxFanIn's default: the most runs merged at once, so that
// ingesting holds about that many files open whatever the number of runs (far below the usual
// limit of 1,024 open files).
const defaultMaxFanIn = 64

// defaultMemoryLimit is Options.MemoryLimit's default.
const defaultMemoryLimit = 64 << 20

// StagingBudget returns the buffer budget (tmpfile.Options.BufferBudget) of the staging medium
// Run opens when Options.Medium is nil, for a MemoryLimit of memoryLimit (0: the default;
// negative: none): a quarter of it, between 4 MiB and 64 MiB (tmpfile's own default). A
// caller that opens a tmpfile medium for Run can give it the same.
func StagingBudget(memoryLimit int64) int64 {
	switch {
	case memoryLimit == 0:
		memoryLimit = defaultMemoryLimit
	case memoryLimit < 0:
		return 64 << 20
	}
	return min(max(memoryLimit/4, 4<<20), 64<<20)
}

// Input is one input of Run.
type Input struct {
	// Name names the input in messages (FILE:LINE: ...); its extension gives the format when
	// neither Format nor the spec's input.format does. Empty means Path.
	Name string
	// Format is one of FormatNames; empty means the spec's input.format, else the input's
	// content (a Parquet file, known by its magic bytes, whatever its name says), else its
	// Name's extension. A file whose content says another format than Format or input.format
	// is an error (wrapping ErrInput).
	Format Format
	// Reader is the input's bytes. When nil, the file at Path is opened when the input's turn
	// comes (through gzip when its name ends in .gz), and closed once it is read. A Parquet
	// input must be an io.ReaderAt with a size (a file, a *bytes.Reader).
	Reader io.Reader
	// Path is the file the input reads: Run refuses to start when it is one of the outputs
	// (the same file, through any name, symbolic or hard link).
	Path string
	// Rows, when set, is the input: rows already made (a generator's), instead of parsed from
	// Reader or Path (Format is then not used). They are ingested as a file's rows are: read
	// ahead, rolled up, spilled as runs under MemoryLimit and merged.
	//
	// Rows fills row with the next row and returns nil; after the last row it returns io.EOF.
	// A *RowError is a row to skip, as a file's reader reports one that does not parse (see
	// Options.MaxParseErrors); any other error ends the input and fails the Run. row has an
	// entry in Dims for each dimension of the spec's schema and one in Metrics for each metric,
	// in schema order (the shape merger.Builder.Add takes); Rows overwrites them, and may reuse
	// their slices from one call to the next. The strings it stores must not change
	// afterwards. Metrics hold what the readers of files give: Long for count and the long
	// aggregators, Double for the double ones, for a hyperUnique metric over a dimension
	// nothing (the Builder sketches the dimension's values). Rows is called from one goroutine
	// at a time, not Run's: rows are read ahead while the rows before are added.
	Rows func(row *columns.Row) error
	// open, when set and Reader is nil, opens the input instead of Path (tests).
	open func() (io.ReadCloser, error)
}

// Options configure Run. The zero value of each field is its default.
type Options struct {
	// Out is the output segment's location: a path, or s3://bucket/key for an object uploaded
	// through S3 (merger/location). With RowsPerSegment, the segments are named by
	// SegmentName(Out, k) instead: day.seg gives day-0000.seg, day-0001.seg, ...
	//
	// The segments of an s3:// Out are written in TmpDir, then each is uploaded once the whole
	// ingest has succeeded, as one multipart upload: an object appears whole or not at all,
	// but a failure part way through a series leaves the objects uploaded before it. Without
	// Replace an existing object (with RowsPerSegment, an existing member numbered below the
	// new count) is an error; with it, members past the new count are left as they are.
	Out string
	// S3 is the client of an s3:// Out.
	S3 *objstore.Client
	// RowsPerSegment, when positive, ends a segment after that many input rows (rows added,
	// before rollup) and starts the next; there is one segment at least, even when empty.
	RowsPerSegment int
	// MaxParseErrors is the number of rows that do not parse that are skipped (each reported
	// to OnSkip); the next one fails the run with its *RowError.
	MaxParseErrors int
	// OnSkip, when set, is called with each row skipped.
	OnSkip func(*RowError)
	// OnWarning, when set, is called with each warning of the readers (see
	// readerOptions.OnWarning), from Run's goroutine, before the row it came with is added;
	// Result.warnings lists them too.
	OnWarning func(Warning)
	// MaxRowsInMemory bounds the rows the Builder holds (after rollup): when it holds that many,
	// they are persisted as a run. 0 means 500,000. A run is persisted in the
	// background while a second Builder takes the next rows (as Druid's persists are): up to
	// twice this many rows are in memory at once.
	MaxRowsInMemory int
	// MemoryLimit bounds the memory ingestion holds, in bytes, by estimates. While reading,
	// the rows in memory (merger.Builder.MemBytes) of the Builder taking rows and the one
	// being persisted in the background each get half: past its half, a Builder's rows are
	// persisted as a run. Merging runs at the end, the rows still in the Builder and the runs
	// merged at once share it: each run open in a merge is counted by what the merge holds
	// for it (the map of its dictionaries' ids, 4 bytes an id; a chunk of each column; its
	// read blocks), and as many are merged at once as fit (MaxFanIn at most, 2 at least),
	// in phases when there are more. The work of persisting and merging (sorting, encoding,
	// the medium's buffers, the rows read ahead) comes on top: at its peak, a process
	// ingesting has about MemoryLimit and 50 MiB more live on its Go heap, besides what the
	// merge of the runs keeps for each output row (bench/RESULTS.md, issue 34). 0 means
	// 64 MiB; a negative value means no limit (MaxRowsInMemory and MaxFanIn alone).
	MemoryLimit int64
	// Medium stages the parts of runs and outputs. Nil means a tmpfile medium in TmpDir with
	// buffers of StagingBudget(MemoryLimit) at most, opened for the run and closed at its
	// end; a medium given here stays the caller's.
	Medium medium.Medium
	// Durability of the published outputs; runs are never synced.
	Durability medium.Durability
	// Compression of the outputs' chunks (merger.Options.Compression); the zero value is
	// columns' default, s2. Runs, read back once by the ingestion itself, keep the default.
	Compression columns.Compression
	// Replace allows replacing existing output files. Outputs are replaced only when the whole
	// ingest succeeds: until then they are staged in a temp directory (TempPattern) in Out's
	// directory, and on failure the old ones stay as they were. With RowsPerSegment the new
	// series replaces the old one whole: existing members numbered past the new count are
	// removed too (Result.Removed). Without Replace, an existing output (with RowsPerSegment,
	// any member of the series) is an error wrapping fs.ErrExist before any input is read.
	Replace bool
	// MaxFanIn is the most runs merged at once (each is an open file while merged): a segment
	// of more runs is merged in phases, groups of MaxFanIn consecutive runs becoming one run
	// each, until MaxFanIn or fewer are left. 0 means 64; 1 is invalid.
	MaxFanIn int
	// TmpDir holds the runs' directory (TempPattern) and the default medium's file; empty means
	// Out's directory (for an s3:// Out, os.TempDir()).
	TmpDir string
	// MaxRecordBytes, when positive, bounds the bytes of one CSV record or NDJSON line in
	// place of the spec's input.maxRecordBytes.
	MaxRecordBytes int64
	// Progress, when set, is called with how far the Run is: every 65536 input rows and after
	// each input (Step StepRead), and while a segment is written, as merger.Options.Progress
	// is called (Step StepWrite), one call at a time, from Run's goroutine or the one writing
	// the segment. It must return quickly.
	Progress func(Progress)
	// progress, when set, is called every progressRows input rows, after each run and after
	// each segment, from Run's goroutine. It must return quickly.
	progress func(progressReport)
	// progressRows is the interval of progress calls; 0 means 65536 rows.
	progressRows int
}

// Progress says how far a Run is (Options.Progress).
type Progress struct {
	// Step is StepRead while the inputs are read, StepWrite while a segment is written (the
	// rows in memory, or the runs and those rows merged into it).
	Step string
	// Bytes counts the input bytes read: the size of each input read whole (a file's size, as
	// os.Stat gives it, or a stream's bytes), and the bytes of the input being read so far,
	// at most its size. Files are counted as read from the disk, before any decompression,
	// so that at the end Bytes is the sum of the inputs' sizes. Inputs of Rows count none.
	Bytes int64
	// Rows counts the input rows read so far, those skipped included.
	Rows int64
	// In step StepWrite: the rows of the write done, and its rows in all
	// (merger.Progress.RowsDone and RowsTotal).
	WriteDone, WriteTotal int64
}

// The steps of a Run that Progress reports.
const (
	StepRead  = "read"
	StepWrite = "write"
)

// progressReport says how far a Run is (tests watch it).
type progressReport struct {
	Input     string // the input being read
	InputRows int64  // rows read and added so far
	Skipped   int    // rows skipped so far
	Runs      int    // runs persisted so far (the last may still be being persisted)
	Segments  int    // output segments written so far
}

// Result describes a finished Run.
type Result struct {
	Segments  []Segment // the outputs, in order
	InputRows int64     // rows added (skipped rows excluded)
	Skipped   int       // rows that did not parse, skipped
	runs      int       // runs persisted and merged, over every segment
	// Removed lists the files of a replaced series (Replace with RowsPerSegment) numbered past
	// the new count, removed so that no glob of the series mixes old and new segments.
	Removed  []string
	warnings []Warning // the readers' warnings, in order
}

// Segment describes one output segment.
type Segment struct {
	Path      string
	InputRows int64 // the input rows it holds, before rollup
	Rows      int64 // its rows
	Bytes     int64 // its file's size
	Interval  columns.Interval
	runs      int // the runs merged into it (with the rows still in the Builder); 0 when its rows went straight from the Builder
}

// Runs returns the runs persisted (and merged) over every segment: 0 when the rows of each
// went straight from memory to its output.
func (r Result) Runs() int { return r.runs }

// SegmentName returns the name of output segment k of a split: SEG.seg gives SEG-0000.seg.
func SegmentName(out string, k int) string {
	ext := filepath.Ext(out)
	return fmt.Sprintf("%s-%04d%s", strings.TrimSuffix(out, ext), k, ext)
}

func (o *Options) ensureDefaults() (location.Location, error) {
	if o.Out == "" {
		return location.Location{}, fmt.Errorf("%w: no output path", ErrInvalid)
	}
	out, err := location.Parse(o.Out)
	switch {
	case err != nil:
		return out, fmt.Errorf("%w: output: %w", ErrInvalid, err)
	case out.IsS3() && o.S3 == nil:
		return out, fmt.Errorf("%w: output %s: no S3 client (Options.S3)", ErrInvalid, o.Out)
	case o.RowsPerSegment < 0:
		return out, fmt.Errorf("%w: RowsPerSegment %d", ErrInvalid, o.RowsPerSegment)
	case o.MaxParseErrors < 0:
		return out, fmt.Errorf("%w: MaxParseErrors %d", ErrInvalid, o.MaxParseErrors)
	case o.MaxRowsInMemory < 0:
		return out, fmt.Errorf("%w: MaxRowsInMemory %d", ErrInvalid, o.MaxRowsInMemory)
	case o.MaxRecordBytes < 0:
		return out, fmt.Errorf("%w: MaxRecordBytes %d", ErrInvalid, o.MaxRecordBytes)
	case o.MaxFanIn < 0 || o.MaxFanIn == 1:
		return out, fmt.Errorf("%w: MaxFanIn %d (want 0 for the default, or at least 2)", ErrInvalid, o.MaxFanIn)
	}
	if err := o.Durability.Validate(); err != nil {
		return out, fmt.Errorf("ingest: %w", err)
	}
	if o.Compression > columns.CompressionS2 {
		return out, fmt.Errorf("%w: Compression %v (want %s)", ErrInvalid, o.Compression, columns.CompressionNames)
	}
	if o.MaxRowsInMemory == 0 {
		o.MaxRowsInMemory = defaultMaxRowsInMemory
	}
	if o.MemoryLimit == 0 {
		o.MemoryLimit = defaultMemoryLimit
	}
	if o.MaxFanIn == 0 {
		o.MaxFanIn = defaultMaxFanIn
	}
	if o.TmpDir == "" && out.IsS3() {
		o.TmpDir = os.TempDir()
	} else if o.TmpDir == "" {
		o.TmpDir = filepath.Dir(o.Out)
	}
	if o.progressRows <= 0 {
		o.progressRows = 1 << 16
	}
	return out, nil
}
