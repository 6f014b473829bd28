// Package table keeps a table: a location holding segments and a log of versions, each
// version listing the live segments and what changed. Writers on any number of machines
// append to it, compact it and vacuum it with no coordinator: a version
// is committed by creating the next log entry only if it is absent, which a local file
// system and an S3-compatible object store both offer.
//
// # Layout
//
// A table is a local directory or an S3 prefix (s3://bucket/prefix/):
//
//	_log/00000000000000000001.json    version 1 (create: no segments)
//	_log/00000000000000000002.json    version 2, ...: one entry per version
//	_log/.tmp-<16 hex>-<entry name>   a commit in progress, or left by a crash (disk only)
//	segments/<start>-<16 hex>.seg     the segments, each under a unique name; <start> is its
//	                                  interval's start (a compaction's output: its chunk's),
//	                                  20060102T150405Z
//	segments/.tmp-<16 hex>-<name>     a copy in progress, or left by a crash (disk only)
//
// Version numbers are written in 20 digits so that names sort as versions do. The newest
// version is the highest number the listing of _log/ shows.
//
// # Log entries
//
// An entry is one line of JSON: the entry, and the CRC-32C (Castagnoli) of the entry's exact
// bytes as 8 hex digits. Every entry lists all the segments live in its version (a snapshot,
// so a reader reads one file), the change that made it (kind create, append or replace, the
// names added and removed), and the table's schema (null until the first segment):
//
//	{"entry":{"format":1,"version":2,"time":"2026-12-06T15:04:05.123Z",
//	  "operation":{"kind":"append","added":["segments/20240501T000000Z-9f86d081884c7d65.seg"],"removed":[]},
//	  "schema":{"dimensions":[{"name":"page","type":"string","multiValue":false,"raw":false}],
//	            "metrics":[{"name":"added","type":"long","aggregator":"longSum"}],"rollup":false,"granularity":"none"},
//	  "segments":[{"name":"segments/20240501T000000Z-9f86d081884c7d65.seg",
//	    "interval":"2024-05-01T00:00:00.000Z/2024-05-02T00:00:00.000Z",
//	    "rows":75000,"bytes":1843210,"footer":"5d2e8a1c"}]},
//	 "crc32c":"0c8f4e2a"}
//
// (shown on several lines; the file holds one).
//
// The segments of a table share their columns, not their rollup: a segment whose rollup or
// granularity differs from the entry's schema (a rollup compaction's output, an append of a
// segment rolled up otherwise) records its own, both keys together, and its schema is the
// entry's with those (Entry.SegmentSchema); a segment without them has the entry's. An entry
// where some segment records its own is format 2, any other format 1, so that readers of
// format 1 still read every table that needs nothing newer, and refuse (ErrVersion) one that
// does rather than misread it:
//
//	{"entry":{"format":2,"version":5,...,
//	  "schema":{...,"rollup":false,"granularity":"none"},
//	  "segments":[{"name":"segments/20240501T000000Z-3c4e2a1b0f9d8e7c.seg",
//	    "interval":"2024-05-01T00:00:00.000Z/2024-05-02T00:00:00.000Z",
//	    "rows":1200,"bytes":48210,"footer":"8e21f0a4","rollup":true,"granularity":"hour"},
//	   {"name":"segments/20240502T031500Z-9f86d081884c7d65.seg",...,"footer":"5d2e8a1c"}]},
//	 "crc32c":"..."}
//
// The entry's schema is set by the first segment committed and never changes: it is the
// table's columns, and the rollup the other segments are recorded against. A rollup
// compaction leaves it as it was (its outputs record their rollup) rather than rewriting every
// other segment's record; so one rule holds for every entry, and an entry changes only in the
// segments a commit adds and removes. A segment recording the entry's own rollup, one key
// without the other, an unknown granularity, or either key in format 1, is ErrCorrupt.
//
// A segment's footer checksum (FooterChecksum) is a CRC-32C over its rows, interval, size and
// every part's column, kind, offset, length and CRC as the segment's footer lists them: it
// identifies the content without reading the data, and OpenSegment checks it. An entry whose checksum fails, that does not decode, or whose
// fields are inconsistent (an added segment not live, a name outside segments/) is an error
// wrapping ErrCorrupt that names the version: never read as another version. A newer format
// number is ErrVersion. Readers refuse keys they do not know: a writer that adds one writes
// a new format number.
//
// # Commit protocol
//
// Appending first stores the segments under new names: on disk, a temp file in segments/,
// written, fsynced, renamed to its name, and segments/ fsynced; on S3, a multipart upload,
// which appears whole or not at all. Then version N+1 is committed on top of the newest
// version N that was read:
//
//   - On disk: the entry is written to a temp file in _log/ and fsynced, then renamed to its
//     final name with a rename that never replaces (renameat2 RENAME_NOREPLACE; link(2) then
//     unlink where the file system lacks it), then _log/ is fsynced.
//   - On S3: one PutObject of the entry with If-None-Match: *.
//
// Either way, of all the writers that try to create version N+1, exactly one succeeds; the
// others see "exists" (ErrConflict, wrapping fs.ErrExist, if they give up). A writer that lost
// reads the newest version and, if every segment it removes is still live there, tries again
// on top of it; an append removes nothing and always goes on, a compaction whose inputs
// another writer replaced stops with ErrConflict naming the segment (Commit).
//
// # Why it is safe
//
//   - Readers see one version: the entry they read lists every live segment, and segments are
//     never changed in place, only added under new names (and, by vacuum, deleted once no
//     retained version lists them). A half-done compaction is invisible: its outputs are in
//     no entry until its commit, and its commit removes its inputs in the same entry.
//   - No two versions N: the create-exclusive is atomic in the store, so a lost race is always
//     seen, never silently overwritten (the crash tests fail when the commit is made a plain
//     rename).
//   - A crash leaves the old version or the new: the entry is durable before it has its name
//     (fsync, then rename), the name is durable before the commit returns (fsync of _log/),
//     and the segments it lists were durable before it was written. A crash at any step
//     leaves at worst unreferenced temp files and segments, which no entry lists: garbage for
//     vacuum, invisible to readers.
//   - A damaged or missing entry is an error naming its version, never a silent step back to
//     an older version.
//   - A writer whose answer was lost (a retried PutObject that finds its own entry) reads the
//     entry back and compares it byte for byte before it counts the version as another's. If
//     it cannot read it, the outcome is unknown: a rebase that finds its own segments live
//     (their names are unique) returns the version its earlier try made, and an append whose
//     outcome is unknown leaves its copied segments in place rather than risk removing live
//     ones.
//
// # Compaction
//
// Compact replaces many small segments by a few, chunk by chunk. PlanCompaction groups the
// newest version's live segments by time chunk (CompactOptions.SegmentGranularity, UTC days
// by default: a segment belongs to the chunk holding its interval's start, and lies inside
// it when its interval ends by the chunk's end). In each chunk a segment of more than
// TargetRows rows is cut into pieces of TargetRows rows and a last of the rest (ranges of its
// rows, in its order: merger.RowRange), and the pieces are packed into groups of at most
// TargetRows rows, first fit, largest first (ties by name and row, so every worker plans
// alike). A chunk needs work when some group holds two or more pieces, or a piece of a cut
// segment; a chunk whose segments fit no two together and none over the target is done, so
// repeated compactions converge.
//
// A segment that crosses a chunk boundary (Plan.Crossing) is split first, a replacement of
// its own: its rows are in time order, so each chunk's rows are one range (found by binary
// search over its times, columns.Segment.TimeRows), merged alone into a piece inside the chunk
// (cut to TargetRows rows too); the commit replaces the segment by its pieces, which join
// their chunks at the next plan. Every shard whose chunks a crossing segment reaches plans its
// split (the first commit wins), so no piece lands in the chunk of a worker already done.
// Chunks finer than a segment's own granularity are refused: its interval is whole granules
// of it, so it would cross every chunk. With CompactOptions.Rollup the segments' own do not
// matter, every one not rolled up at RollupGranularity being rewritten at it: that must be no
// coarser than the chunks.
//
// Each group merges (merger.MergeInputsTo, rows combined as its rollup says, below) into
// one output, stored as Append stores a segment (a temp file, fsynced, renamed without
// replacing, segments/ fsynced; on S3 a multipart upload). Then the chunk commits as one
// version of kind replace: removed, every input of the chunk's groups; added, the outputs.
// A reader sees either version: the inputs, or the outputs, never both and never neither.
// When another writer replaced an input first, the commit fails with ErrConflict; the
// chunk's outputs are removed and Compact plans again from the newest version (the rows are
// in the other writer's outputs). Compact returns once a plan is empty: any number of
// compactions can run at once on one table, and each returns nil.
//
// With CompactOptions.Shard and Shards, a worker takes only the chunks whose start hashes to
// its shard (ChunkShard: FNV-1a of the start as "2024-05-01T00:00:00.000Z", modulo Shards).
// N workers given the indexes 0 to N-1 (a Kubernetes Indexed Job's JOB_COMPLETION_INDEX,
// say) partition the chunks; workers that overlap are still safe, only wasteful.
//
// # Rollup
//
// The segments of a chunk are packed with those of their own rollup and granularity only, and
// each output keeps them: a compaction without rollup never changes how a row is stored.
// With CompactOptions.Rollup and RollupGranularity G (Druid's compaction with rollup and a
// coarser query granularity), a chunk's segments are packed all together, every output is
// merged with rollup at G, and a segment not rolled up at G is rewritten even alone in its
// chunk; a segment crossing a chunk is split and rolled up at once. Each chunk is still one
// version, so readers see exact counts and sums throughout, the inputs' rows or their rollup,
// and a second compaction with the same options has nothing to do. A raw segment appended
// later stays raw (its own rollup recorded) until a compaction with rollup takes its chunk.
// Counts stay right across the change: a count metric is stored per row, and rolled-up
// rows add their counts.
//
// Splitting by rows never splits a rolled-up row of one input (a rolled-up segment has one
// row a key), but two outputs of one chunk, cut from one large segment or packed apart, may
// hold rows of one key, as two appends may: readers add them, and a later compaction that
// packs the two together combines them.
//
// # Vacuum
//
// Vacuum removes what no retained version needs. The rule:
//
//   - The newest version is always retained, and every segment it lists is kept: the table
//     stays readable and writable, whatever the retention.
//   - An older version v is retained while the entry of the version after it is younger than
//     VacuumOptions.Retain (by the time the entry records): a reader that opened v before it
//     was replaced has that long. Retain 0 retains the newest version alone.
//   - Segments that some version lists but no retained version does are removed first; then
//     the entries of the versions not retained, oldest first, so the entries left are always
//     the newest ones, consecutive (Log and Snapshot of a removed version say ErrNotExist);
//     then files that no version lists (an append's copies or a compaction's outputs never
//     committed, temp files in _log/ and segments/) once VacuumOptions.PendingAge old.
//   - A crash during Vacuum leaves at worst an entry not retained whose segments are gone,
//     which the next Vacuum removes. The newest version is never touched.
//
// PendingAge (default an hour) is what keeps running writers safe: a segment an append has
// stored but not committed yet is listed by no version, and removing it would let the append
// commit a segment that is gone. A negative PendingAge removes such files at once, for a
// table no writer is using. A writer whose base version Vacuum removed fails with
// ErrNotExist and starts again. On S3, Vacuum also aborts the pending multipart uploads under
// segments/ (a killed append or compaction) once PendingAge old (when the service says when
// they started; with PendingAge negative, all of them), and removes the upload markers
// (objstore.MarkerInfix) of uploads no longer pending.
//
// # What it needs from the store
//
// A local table needs an afero.Fs with a rename that fails when the target exists
// (RenameNoReplacer; provided for afero.OsFs through renameat2 or link, and by
// internal/crashfs), directories whose fsync makes their entries durable, and files whose
// fsync makes their data durable. An S3 table needs strong read-after-write consistency of
// objects and listings (S3 since 2020, MinIO, R2, GCS), PutObject with If-None-Match: *
// (S3 since 2024; MinIO; R2; GCS's equivalent), and multipart uploads.
//
// Whether the service honours If-None-Match is probed once, at a Table's first write: a probe
// object put twice with it, the second put must be refused. Where it is not, every write
// (Create, Append, Commit, Compact) fails with ErrUnsupported, since two writers could both
// commit one version. With Options.SingleWriter the writes go on there instead: a commit
// checks that its entry is absent (a HEAD), then stores it with a plain PutObject. The check
// and the put are two requests, not one atomic step, so that is safe only while one writer
// at a time works on the table: the caller vouches for it (a lock of its own, a single
// scheduled job). Readers and Vacuum need no conditional write. Where the probe finds
// conditional writes honoured, SingleWriter changes nothing.
package table
