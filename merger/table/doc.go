// Package table keeps a table: a location holding segments and a log of versions, each
// version listing the live segments and what changed. Writers on any number of machines
// append to it (and, in the next steps, compact and vacuum it) with no coordinator: a version
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
//	                                  interval's start, 20060102T150405Z
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
// (shown on several lines; the file holds one). A segment's footer checksum (FooterChecksum)
// is a CRC-32C over its rows, interval, size and every part's column, kind, offset, length and
// CRC as the segment's footer lists them: it identifies the content without reading the data,
// and OpenSegment checks it. An entry whose checksum fails, that does not decode, or whose
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
// # What it needs from the store
//
// A local table needs an afero.Fs with a rename that fails when the target exists
// (RenameNoReplacer; provided for afero.OsFs through renameat2 or link, and by
// internal/crashfs), directories whose fsync makes their entries durable, and files whose
// fsync makes their data durable. An S3 table needs strong read-after-write consistency of
// objects and listings (S3 since 2020, MinIO, R2, GCS), PutObject with If-None-Match: *
// (S3 since 2024; MinIO; R2; GCS's equivalent), and multipart uploads.
package table
