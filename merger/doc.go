// Package merger merges segments into one, and builds segments from rows in memory. Package
// merger/query runs filtered aggregations on both, its subpackage filter reads filters.
//
// # Merge
//
// Merge streams N segments into one through a staging medium.Medium, the way Druid's
// IndexMergerV9 does:
//
//  0. Inputs: the CRC-32C of every part of every input is checked before the merge publishes
//     (unless Options.SkipChecksums): a merge rewrites what it reads under new checksums, so
//     damage must stop it here. A part it reads is checked as it first reads it; the times and
//     each dimension's ids, with their structural checks, and the numeric metrics' parts, from
//     the chunks the merge decodes (columns.Deferral), judged before it publishes; the parts
//     it never reads, beside the rows (the bitmap indexes it does not rebuild from, the
//     columns the output drops), and the rest it did not read, in a pass before it publishes.
//  1. Schemas: the output's dimensions are Options.Dimensions, or the union of the inputs'
//     (first seen first); its metrics the union of theirs. A dimension an input lacks reads as
//     null there, a long or double metric an input lacks as null (an empty sketch for
//     hyperUnique; nulls combine as columns/agg says: skipped, an all-null row null). A metric
//     whose aggregator or type differs between inputs, a dimension raw in one input and not in
//     another, or a name that is a dimension in one input and a metric in another is an error
//     wrapping ErrSchemaConflict that names the column and both inputs.
//  2. Dictionaries merge first, k-way over the inputs' sorted dictionaries (one dimension per
//     goroutine), giving each input a map from its ids to merged ids. Null, when any input has
//     it (or lacks the dimension), is merged id 0.
//  3. Rows merge k-way, with a heap over one cursor per input, by (time truncated to
//     Options.Granularity, merged dimension ids in output order; a multi-value row's ids
//     compare as a list, raw strings bytewise, null first). A cursor reads its input in
//     batches of whole groups of rows with equal truncated time and sorts, stably, any group
//     whose rows are not in that order: inputs need only be in time order, and inputs whose
//     dimension order differs from the output's, or that a coarser granularity rolls up, still
//     merge into a sorted segment. Ties keep input order. With Options.Rollup, rows with equal
//     keys combine through each metric's kernel in columns/agg, in input order: count and
//     sums add (doubles exactly, rounded once, the exactness tail stored beside the value),
//     min and max keep the extreme, first and last keep the value of the earliest or latest
//     event time stored with it (ties: input order), hyperUnique sketches merge. Column
//     writers run in other goroutines, a batch of output rows at a time. A cursor emits rows
//     without touching the heap while it stays below the least other cursor's head, and
//     without rollup the rows of its window before that head go over in one copy; a run of
//     output rows taken from consecutive rows of one input copies its metric values in bulk.
//     A cursor loads its first window only when the merge reaches it (a stand-in row of its
//     first time keeps its place in the heap) and takes the memory of a done cursor's: inputs
//     that follow one another in time hold one window at a time. Inputs that interleave row
//     by row, without rollup, go a step of windows at a time instead (see interleave.go):
//     once their windows' comparisons are many, each window's ids are packed into a word a
//     row, the rows of every window up to the least of the windows' last rows are merged
//     pairwise in input order by a branch-free merge of (time, packed ids), and go to the
//     batch column by column. A rollup group that re-sorts
//     is pre-aggregated when its dimensions are single-value and its metrics long (see
//     preagg.go): the cursor numbers the group's distinct keys and sorts only those, and each
//     metric combines the group's values in row order into one accumulator per key. A group
//     larger than a window streams through it (preaggstream.go), and past a bound keeps no
//     key of its rows: whoever combines them reads their ids again (rekey.go); once its keys
//     are numbered, a goroutine combines its rows for every long metric while the cursor's
//     next group streams on another and the merge emits this one's slots, and one group
//     streamed ahead combines at once, beside the cursor's (preload.go); the slot tables
//     pass from group to group, and once they hold more than their share of the budget each
//     table's pages go back as the slots go out (slottables.go). Streamed groups of inputs
//     whose hours overlap page their slots through a step of windows too, merged on packed
//     keys, each slot combining into the output row before it when its key is that row's.
//     A single-value dimension with a bitmap index logs each output row's merged id (1, 2 or
//     4 bytes a row, by cardinality, in anonymous huge-page mappings pooled for the next merge:
//     merger/internal/scratch); a multi-value one records each input row's output row in a row
//     map (4 bytes an input row).
//  4. Bitmaps are written one merged value at a time. A single-value dimension's come from its
//     id log, counting-sorted by id in ranges of at most 2^22 rows: they agree with the ids
//     written by construction, and the inputs' bitmaps are not read. A multi-value dimension's
//     rows of a value are the rows the inputs' bitmaps of that value map to through the row
//     maps. No bitmap of every value is held at once. Each is written in the segment's bitmap
//     encoding straight from its sorted rows (or, past 1/256 of the rows, a bitset), with no
//     roaring.Bitmap built.
//  5. Every part is staged in the medium and published through colwrite.Writer.Finish: an
//     unnamed file in dst's directory (a named temp file where there is none), each part's CRC
//     checked on the way out, synced per Options.Durability, linked (or renamed) into place,
//     never over an existing file without Options.Replace.
//
// With Options.MaxFanIn, more inputs than that merge in phases: consecutive groups of inputs
// merge into intermediate segments in dst's directory (unnamed files, see IntermediatePattern,
// released as soon as the next phase has read them), which merge in turn. The output is byte for byte
// the one-phase output, with or without rollup: intermediate segments keep each double sum's
// exactness tail and each first/last value's event time, so nothing is rounded twice.
//
// A merge in phases holds open only the group it is merging. MergeInputs opens each input
// (an Input: a file, an object) when the merge of its group begins and closes it when that
// merge ends, the group's checksum pass (step 0) included; an intermediate segment, once
// written, is mapped and its descriptor closed (on Linux; elsewhere it keeps one until read).
// So at most MaxFanIn inputs are open at once, plus a few descriptors of the merge's own (the
// default staging and scratch media's files, the segment being written, its directory while
// it is synced).
// Before the first phase MergeInputs opens every input once, one at a time, for its schema and
// row count, so that an input that does not open or whose schema conflicts fails the merge
// before anything is written. In one phase the inputs open once and stay open to its end.
// Merge's inputs are the caller's, open throughout.
//
// With MaxFanIn 0, a merge runs in phases when its inputs' cursors would take more than a
// quarter of Options.MemoryLimit (about 110 KiB a column an input: 83 inputs of 7 columns under
// the default budget), and MergeInputs also keeps a phase within the process's limit on open
// files (the smaller fan-in wins). The
// descriptors free are the soft RLIMIT_NOFILE, less those open when the merge starts (counted
// in /proc/self/fd on Linux; elsewhere a quarter of the limit is assumed taken), less 16 kept
// for the merge's own files. When every input fits in them, the merge is one phase; otherwise
// it runs in phases of as many inputs as are free (at least 2; where intermediate segments
// keep a descriptor, fewer, so that those waiting fit too). Without a limit to read (off Unix,
// or none set) it is one phase. Result.FanIn says what was used; the bytes are the same.
//
// Memory: mapped inputs (columns.Open maps a segment file) do not stay resident: a part over
// 4 MiB is read through the file, 64 KiB at a time, not the mapping (columns' Sequential
// cursors), and its checksum computed from what was read. Each step
// reads its parts of the inputs once, and the merge takes the inputs' pages out of its resident
// set behind it (columns.Segment.ReleasePages: every 4 MiB of parts checked, after the
// dictionaries, every 131,072 rows an input's cursor reads and when it is done, every 2^20
// rows read from bitmaps, after the bitmaps), so they count in its RSS by what it read since,
// a few MiB, not by their size; the bytes stay in the page cache. What grows with the rows is
// kept out of memory past bounds sized to Options.MemoryLimit (see budget.go): the id logs
// write runs to the scratch medium (2 bytes a row and a few an id: idlog.go), the bitmaps step sorts a bounded range of rows at a time
// and writes a value with more rows a piece at a time, large pre-aggregated groups keep no
// key a row (their rows' ids are read again). The row maps of multi-value dimensions (4 bytes an input row) and the dictionaries
// still grow with the data. The default staging medium keeps the output in its file's page
// cache, with at most 4 MiB of buffers, and the id logs' runs in a second file (1 MiB of
// buffers): a file takes one write at a time, and punching the space of what was read back
// (a TRIM the punch waits for, on a file system mounted with discard) holds it too.
//
// A cancelled context stops a merge within milliseconds: every loop checks it at least every
// few thousand rows or values. The error wraps ctx.Err(), and nothing is left in dst's
// directory (the default staging medium is an unnamed temp file on Linux).
//
// # Builder
//
// A Builder holds rows in memory as Druid's incremental index does (see Builder), and persists
// them as a segment through the same write path as Merge, the builder being the one input.
// Package merger/query reads a *Builder as it reads a segment. With BuilderOptions.LiveBitmaps
// it keeps a roaring bitmap per dimension value as rows arrive, so that filtered queries on rows
// not yet persisted use bitmaps instead of scanning every row.
//
// # Files
//
// Merge writes, in dst's directory, only: the output, written as an unnamed file and linked to
// dst at the end; intermediate segments (with MaxFanIn), unnamed files too; and the default
// staging and scratch media's files, unnamed too. A killed merge leaves nothing on Linux with a file system
// that has O_TMPFILE (ext4, XFS, btrfs, tmpfs), except, with Replace, if it dies between
// the two calls that name the output (a complete segment under columns.TempPattern). Elsewhere
// these are named temp files (columns.TempPattern, IntermediatePattern, tmpfile's pattern),
// removed on every path but a crash; columns.SweepTemp and tmpfile.Sweep remove what a killed
// process left. With Options.Fs every one of these files is on that file system, named.
//
// # Object storage
//
// MergeTo is Merge with another sink: the merge is the same, step 5 streams the staged parts,
// each checked against its CRC-32C, into an Output instead of a file. columns/objstore gives
// both ends on S3-compatible storage: OpenSegment opens an input object (ranged GETs planned
// from its footer's parts, every byte fetched once, each part's checksum checked by the
// Segment as for a local file), and an Upload publishes the output through a multipart upload
// that completes, making the object appear whole, only after the last part is in, and is
// aborted on any failure or cancellation.
//
// # Compaction across workers
//
// A host system (Druid's Overlord and its tasks, Pinot's Minion, Thanos' or Mimir's
// compactor, a Kubernetes job) spreads compaction over workers with this library; the
// scheduling is the host's, and writeout keeps no state between merges, so any worker can
// run any merge. What the host decides:
//
//   - Partition by time chunk. Merge only segments of one time chunk (an hour, a day: the
//     host's segment granularity, as Druid's is), and never let two merges own one chunk at
//     once. Chunks merge independently and in parallel, and each output replaces exactly its
//     chunk's inputs. A chunk too large for one worker is split by MaxFanIn's phases, or into
//     several outputs by a secondary key, as Druid's partitions are.
//   - A task names everything: the input keys (with their sizes or ETags, to refuse an
//     input that changed), the output key, the merge options (rollup, granularity,
//     dimensions), and the durability the host wants. A worker needs only credentials for the
//     bucket, scratch disk of about the inputs' and the output's size (the readers' caches and
//     the staging medium's file, under os.TempDir, or Options.Medium) and memory for the merge
//     itself. Inputs are fetched in ranges as the merge (its checksum pass first) reads them,
//     each byte once.
//   - Publish, then record. The output key should be fresh for each attempt (the chunk, a
//     version and an attempt id, as Druid's segment ids carry a version): the upload is
//     atomic, so a reader sees the complete output or none. The host then swaps, in its own
//     metadata store, the inputs for the output in one transaction, and deletes the inputs
//     later, once no query reads them.
//
// Retries are safe because every failure is clean and every success is checked:
//
//   - A failed or killed attempt leaves no output object: the upload is aborted (a process
//     killed before it could abort leaves a pending multipart upload, never an object; a
//     bucket lifecycle rule, AbortIncompleteMultipartUpload, or objstore's PendingUploads and
//     AbortUploads remove it), and no local file (the stages are unnamed temp files). A
//     retry starts from the same inputs.
//   - A damaged input fails the merge, naming the object and the part, before its bytes can
//     reach an output under fresh checksums (the checksum pass and the per-part checks); the
//     host re-fetches or restores it instead of retrying blindly. The output's parts are
//     checked against the CRC-32C computed when they were staged, and each uploaded part
//     against its Content-MD5 by the service.
//   - Without Replace an existing output key fails the merge before it does any work, so an
//     attempt that succeeded but whose acknowledgement was lost is found (the object exists,
//     whole) rather than redone over; the host records it and moves on. A merge is
//     deterministic: a retry of the same inputs and options writes the same bytes.
//
// # Crashes
//
// With SyncOutput and SyncAll, once Merge has returned nil, dst is the complete new segment
// and stays so through a power loss; before that, a power loss leaves dst as it was (absent,
// or the complete old file with Replace) or, past the naming, the complete new file: never a
// torn one. SyncNone promises less (see medium.SyncNone). TestMergeCrash checks this after every
// file-system operation of a merge on a crash-simulating file system (internal/crashfs).
//
// # Glossary
//
// The words the merge's code uses, in the order a row meets them:
//
//   - input, source: one segment (or a Builder's rows) being merged; inputs are numbered in
//     the order given, and rows of equal keys from several inputs come out in that order.
//   - phase: one merge of at most MaxFanIn sources into one segment (core, runCore); a merge of
//     more inputs runs phases into intermediate segments, the last one writing dst.
//   - key: a row's truncated time, then its merged dimension values, compared dimension by
//     dimension (cmpRows); the output is sorted by key, and with rollup one row a key.
//   - group: the rows of one source of equal truncated time. A source promises only
//     non-decreasing time, so a group whose rows are not in key order is re-sorted
//     (a re-sorted group) before it is emitted; a cursor loads whole groups.
//   - cursor: reads one source's rows in key order, a window at a time (cursor.go).
//   - window: the rows a cursor holds (keys, in cursor.w): a batch of whole groups, about
//     cursorBatch rows; emission positions (npos) walk it through perm, its emission order.
//   - stand-in row: the one row a lazy cursor's window holds before the merge reaches it: the
//     source's first truncated time with the least dimension values. It comes before or ties
//     every row of its source, so the heap orders the cursor right without loading it.
//   - heap: the binary heap of cursors by (head key, input), cursorHeap (heap.go).
//   - rival: the least cursor but the heap's top. The top emits its rows without touching the
//     heap while they come before the rival's head, then the heap is fixed once.
//   - packed key: a row's merged ids of every dimension in one uint64, most significant
//     dimension first (packState, foldKeys); two rows of equal time then compare as words.
//   - interleave step: inputs whose windows overlap row by row go a step of windows at a time,
//     merged on packed keys instead of through the heap (interleave.go); with rollup, so do
//     pages of streamed groups' slots.
//   - pre-aggregation: with rollup of long metrics, a re-sorted group emits one position per
//     distinct key, a slot, instead of one per row (preagg.go).
//   - slot: a distinct key of a pre-aggregated group (groupAgg); its weight is the rows it
//     stands for, and the metric tasks combine those rows into one accumulator per slot.
//   - output row: a row of the merged segment; outRow is the last one started.
//   - ref: a source row (input, row) that an output row combines (batch.refIn, refRow;
//     refEnd bounds each output row's refs); one ref a row without rollup. A ref into a
//     re-sorted group also names the group's rows (refLo, refHi); a ref into a
//     pre-aggregated group names its slot.
//   - run: output rows each of one ref, consecutive rows of one source (batch.run): the
//     column tasks copy them in bulk.
//   - batch: a run of output rows (their keys and refs) handed to the column tasks at once,
//     about batchRows rows.
//   - emitter: takes rows off the heap into batches (emit.go).
//   - pipeline: carries batches to the workers, each owning some column tasks, and back
//     (pipeline.go); the first error of any task stops it.
//   - column task (colTask): writes one column's values of every batch, in order.
//   - retired: inputs whose cursors are done; a batch lists those done since the last one,
//     so that a column task can reuse the memory it held for them.
//   - row map: per input, source row -> output row, kept only when a multi-value dimension's
//     bitmaps are rebuilt from the inputs' bitmaps (core.rowMaps).
//   - id log: a single-value dimension's output ids, staged, from which its bitmaps are built
//     (idlog.go).
package merger
