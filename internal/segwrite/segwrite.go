// Package segwrite describes the column-at-a-time segment writer that package columns implements
// and keeps out of its public API: users make segments from rows with merger.Builder, or by
// merging, and those two (with this module's tests) are the writer's only callers.
//
// columns registers its constructor here when it is initialised (Register). columns imports
// this package to do so, so this package cannot name columns' types: the interfaces are generic
// in the four it needs, the schema, the compression, the finished segment's Info and its
// PublishOptions. Package internal/colwrite instantiates them with columns' types and is what
// callers import.
package segwrite

import (
	"context"
	"io"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
)

// Options configure a writer; C is columns.Compression. The zero value is the default.
type Options[C any] struct {
	// Medium stages the parts. The writer takes a child of it (NewChild) and closes the child
	// when it finishes or aborts; the medium itself stays the caller's. Nil means a heap medium
	// owned by the writer.
	Medium medium.Medium
	// Compression of chunked parts; each chunk is stored compressed only when that is smaller.
	// The zero value is s2 (see the benchmarks in columns/*_timing_test.go for why).
	Compression C
	// ChunkRows is the number of rows per chunk of values and ids: 1 to 65536, default 4096.
	ChunkRows int
	// StoreIDs keeps the ids of every dictionary dimension stored. Without it, the zstd
	// compression leaves out the ids of a single-value dimension with a bitmap index and at most
	// columns' derivedMaxCard values, which readers derive from its bitmaps (a version 6 segment,
	// which readers of earlier versions refuse); set it for such readers.
	StoreIDs bool
}

// Writer builds one segment: parts are staged in a medium, then Finish publishes them as one
// file (or FinishTo streams them to any io.Writer). I is columns.Info, P columns.PublishOptions.
//
// It is fed a column at a time, through the writers Time, Dim, Raw, Long, Double and Sketch
// return: memory stays bounded; see DimWriter for the order dictionary dimensions take.
// Distinct column writers may be used from different goroutines at the same time; one column
// writer is used by one goroutine at a time.
//
// Rows must come in non-decreasing time order, each time truncated to the schema's granularity.
// The segment's interval is Granularity.Interval of the first and last times (the zero
// Interval without rows). Every column must end with the same number of rows. Finish or Abort
// must be called; after either, every call fails.
type Writer[I, P any] interface {
	// Time returns the writer of the __time column.
	Time() (NumWriter[int64], error)
	// Dim returns the writer of a dictionary dimension.
	Dim(name string) (DimWriter, error)
	// Raw returns the writer of a raw dimension.
	Raw(name string) (RawWriter, error)
	// Long returns the writer of a long metric.
	Long(name string) (NumWriter[int64], error)
	// Double returns the writer of a double metric.
	Double(name string) (NumWriter[float64], error)
	// Sketch returns the writer of a sketch metric.
	Sketch(name string) (SketchWriter, error)

	// Finish writes the segment to a new file dst, published as opts asks, and returns its
	// Info. On any failure before naming the output file is removed (an unnamed one just
	// closed), dst is left as it was, and the error is returned; a failed sync wraps
	// medium.ErrSync and is never retried. Once the file is named dst it stays: a failure after
	// that (closing it, or the directory's fsync) returns an error (wrapping medium.ErrSync for
	// the fsync) with dst holding the complete new file, its data synced per Durability; only
	// its name may not survive a crash. Removing it then would lose both outputs under Replace.
	// A caller that must know the name is durable may fsync the directory itself, or treat the
	// output as unpublished and remove it. The stages are released whatever happens, and the
	// writer cannot be used again.
	Finish(dst string, opts P) (I, error)
	// FinishContext is Finish, stopped when ctx is done: the copy checks ctx before every write
	// to the output file and before the sync and the naming; a cancelled publish cleans up as a
	// failed one does and returns an error wrapping ctx.Err(). Once the file is named dst the
	// publish completes.
	FinishContext(ctx context.Context, dst string, opts P) (I, error)
	// FinishTo finishes the segment and writes it to out, checking every part's CRC on the way.
	// The stages are released whatever happens.
	FinishTo(out io.Writer) (I, error)
	// Abort discards the segment: the stages are released and nothing is published. It
	// returns nil after Finish (the stages are gone already); a second Abort returns nil.
	Abort() error
}

// DimWriter writes a dictionary dimension in three phases, each closing the one before:
//
//  1. the dictionary: AddNull first if the dimension has nulls (null gets id 0), then AddValue
//     for every distinct value in strictly increasing byte order (ids follow);
//  2. the rows: AppendID (single value) or AppendIDs (either kind) for each row in order,
//     AppendNull for a null row; the null bitmap is built from them;
//  3. the bitmap index (unless the dimension has NoBitmapIndex): WriteBitmap for every id in
//     order, each the set of rows holding that id. Only one bitmap is held at a time.
//
// The writer checks what it cheaply can: ids below the cardinality, the null id alone in a row,
// each bitmap within the rows, the null id's bitmap equal to the null rows, the bitmaps' total
// cardinality equal to the number of distinct (row, id) pairs, and (in builds with the
// invariants tag) that the bitmaps hold exactly the rows' ids.
type DimWriter interface {
	// AddNull gives the null value id 0. It must come before any AddValue.
	AddNull() error
	// AddValue adds the next dictionary value, which must sort strictly after the previous
	// one, and returns its id.
	AddValue(v string) (uint32, error)
	// Cardinality returns the number of ids so far, null included.
	Cardinality() int

	// AppendID appends a row of a single-value dimension holding id (0 is null when the
	// dimension has a null).
	AppendID(id uint32) error
	// AppendSingleIDs appends rows of a single-value dimension, one id each (as AppendID does
	// each): a merge hands its batches over this way.
	AppendSingleIDs(ids []uint32) error
	// AppendIDs appends a row holding ids, in the row's order (duplicates kept). An empty row
	// is null and is stored as the null id alone. A single-value dimension takes at most one
	// id.
	AppendIDs(ids []uint32) error

	// WriteBitmap writes the bitmap of id: the rows holding it. Ids come in order from 0, each
	// once; nil is an empty bitmap. The first call closes the rows. The writer does not keep or
	// change bm; call bm.RunOptimize first for the smallest file.
	WriteBitmap(id uint32, bm *roaring.Bitmap) error
	// WriteBitmapRows is WriteBitmap for a bitmap given as its rows, strictly increasing. It
	// writes the bytes bm.RunOptimize and WriteTo would give without building a
	// roaring.Bitmap, which is the fast path for a merge writing many small bitmaps. rows is
	// not kept.
	WriteBitmapRows(id uint32, rows []uint32) error
	// WriteBitmapPieces is WriteBitmapRows for a bitmap whose rows come in pieces, for a value
	// with more rows than its caller keeps in memory at once. each(fn) must call fn with the
	// bitmap's rows in consecutive pieces (strictly increasing within and across pieces; a
	// piece may be empty), stop at fn's first error and return it. The writer calls each up to
	// three times, and every call must give the same rows: a later call giving another count,
	// last row or sum of rows is an error. The bytes written are WriteBitmapRows(id, all
	// rows)'s, and the writer's memory does not grow with the rows (beyond one small entry per
	// 65,536-row container of the bitmap). An error of each's own is returned wrapped. fn does
	// not keep a piece once it returns.
	WriteBitmapPieces(id uint32, each func(fn func(rows []uint32) error) error) error
	// WriteBitmapWords is WriteBitmapRows for a bitmap given as a bitset: row r is in it when
	// bit r%64 of words[r/64] is set. words may end before the last row. It is the fast path
	// for a value holding many rows; words is not kept.
	WriteBitmapWords(id uint32, words []uint64) error
	// NewBitmapRun returns a run of bitmaps starting at id first. It closes the rows, as the
	// first WriteBitmap does; call it from the goroutine that uses the writer, before handing
	// the run to another.
	NewBitmapRun(first uint32) (BitmapRun, error)
	// WriteBitmapRun adds the bitmaps of r, which must come from this writer's NewBitmapRun
	// and start at the next id, as WriteBitmapRows would have added them one by one. r is not
	// kept.
	WriteBitmapRun(r BitmapRun) error
}

// BitmapRun encodes consecutive ids' bitmaps apart from their DimWriter, so that several
// goroutines can encode one dimension's bitmaps at once.
type BitmapRun interface {
	// AddRows encodes the bitmap of the run's next id, given as its rows, strictly increasing.
	// rows is not kept.
	AddRows(rows []uint32) error
}

// NumWriter appends the values of a numeric column: int64 for __time and long metrics, float64
// for double metrics.
type NumWriter[T int64 | float64] interface {
	// Append appends the next row's value (of a doubleSum metric: with an empty tail, an exact
	// value). For __time, values must not decrease and must be truncated to the schema's
	// granularity. A first/last metric takes AppendTimed instead.
	Append(v T) error
	// AppendTimed appends the next row's value of a first/last metric with the time stored
	// with it (the event time of the row it came from).
	AppendTimed(v T, t int64) error
	// AppendSum appends the next row's value of a doubleSum metric and its exactness tail: the
	// terms that, added to v, give the exact sum it was rounded from (agg.ExactSum.Tail). On
	// other columns the tail must be empty.
	AppendSum(v T, tail []float64) error
	// AppendValues appends the next rows' values, as Append does each (of a doubleSum metric:
	// each with an empty tail). The values are copied into the chunk in bulk: a merge hands
	// runs of rows over this way.
	AppendValues(vs []T) error
	// AppendNull appends a null row to a metric (not __time): the value stored is 0 (+0 for a
	// double, with the time 0 for a first/last metric and an empty tail for a doubleSum), and
	// the row goes to the metric's nulls part. A segment with a metric's null row is written
	// as format version 3.
	AppendNull() error
}

// RawWriter appends the values of a raw (not dictionary-encoded) dimension.
type RawWriter interface {
	// Append appends the next row's value.
	Append(v string) error
	// AppendBytes appends the next row's value, copied: v may be reused once it returns.
	AppendBytes(v []byte) error
	// AppendNull appends a null row.
	AppendNull() error
}

// SketchWriter appends the values of a sketch metric.
type SketchWriter interface {
	// Append appends the next row's sketch as it is represented; nil appends an empty sketch.
	// A caller that combined several rows' sketches puts the result in its canonical
	// representation first (agg.Sketch.Compact), so that the same rows store the same bytes
	// however they were combined.
	Append(sk agg.Sketch) error
	// AppendBytes appends the next row's sketch in its serialized form, as
	// columns.SketchCursor.Bytes returns it. The bytes are not checked here (Verify checks
	// them); they must come from a sketch's MarshalBinary.
	AppendBytes(b []byte) error
}

// Door is what columns registers: S is columns.Schema, C columns.Compression, I columns.Info,
// P columns.PublishOptions.
type Door[S, C, I, P any] struct {
	// New returns a writer for segments of the schema, which it validates.
	New func(schema S, opts Options[C]) (Writer[I, P], error)
	// Check returns the error New gives for these options, if any: one wrapping ErrInvalid that
	// names the bad option. The zero value is valid.
	Check func(opts Options[C]) error
}

var door any

// Register records columns' writer. columns calls it once, when it is initialised.
func Register[S, C, I, P any](d Door[S, C, I, P]) { door = d }

// Registered returns what columns registered. Every package that imports columns (and so can
// name these types) finds it registered, columns being initialised first; a Door of other types
// than the registered one is a programming error, and panics.
func Registered[S, C, I, P any]() Door[S, C, I, P] { return door.(Door[S, C, I, P]) }
