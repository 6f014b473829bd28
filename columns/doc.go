// Package columns encodes the columns of a segment and packs them into one checksummed segment
// file: written through a medium.Medium, published atomically with the durability asked for,
// and read back through a mapping or any io.ReaderAt by a Segment. Segments are made from rows
// by merger.Builder, or by merging segments (merger.Merge).
//
// # Data model
//
// A segment is a table sorted by time: __time (int64 milliseconds since the epoch, rows in
// non-decreasing order), string dimensions (single- or multi-value, nullable; dictionary-encoded
// with a roaring bitmap per value, or raw) and metrics (int64, float64 or HyperLogLog sketches),
// each with the aggregator rollup and queries combine it with. The Schema serializes to JSON in
// the shape of a Druid ingestion spec.
//
// # Writing
//
// The segment writer (this package's own, reached by merger through internal/colwrite, not
// part of this API) stages every part of every column in its own medium.Bytes, computing the
// part's CRC-32C and size as it is staged. It is fed a column at a time, never holding more
// than one bitmap. Publishing writes an unnamed file (O_TMPFILE on Linux; elsewhere a temp
// file, TempPattern) in the destination directory, copies each part out of its stage with
// WriteTo while checking the bytes against the staged CRC, syncs per medium.Durability, links
// or renames it into place (never over an existing file unless asked) and syncs the directory
// (PublishOptions). An aborted segment leaves nothing behind.
//
// # Reading
//
// Open maps a file (Linux; elsewhere it reads with ReadAt), NewSegment reads any io.ReaderAt.
// A Segment gives the schema, row count and interval, column handles with per-row access and
// chunk-at-a-time cursors, the dictionaries (by id, by value through binary search, or in
// order), one value's bitmap at a time (as a roaring.Bitmap, or its rows decoded straight from
// the stored bytes by DimColumn.EachBitmapRows), the null rows, and Verify. Bad bytes give
// errors wrapping ErrCorrupt or ErrVersion that name the column and part (a failed checksum
// found by a read names the file too; see Integrity); no input makes a
// reader panic or read outside the file. A bad argument gives an error wrapping ErrInvalid, a
// call out of order (a read from a closed segment included) one wrapping ErrState.
//
// # File layout
//
// All integers are little-endian; uvarint and varint are encoding/binary's (varint zigzag).
//
//	+-------------------+  offset 0
//	| magic "WOSEG"     |  5 bytes
//	| version u8 = 2..6 |  1 byte: 6 when a part uses a version 6 encoding, else 5 when one
//	|                   |  uses a version 5 encoding, else 4 when one uses a version 4
//	|                   |  encoding, else 3 when a metric has a nulls part, else 2 (1
//	|                   |  reads too)
//	+-------------------+  offset 6
//	| part 0            |  parts back to back, in footer order, no gaps:
//	| part 1            |  part i+1 starts where part i ends
//	| ...               |
//	+-------------------+
//	| footer            |  see below, CRC-32C protected
//	+-------------------+
//	| footer CRC-32C u32|  Castagnoli, over the footer bytes
//	| footer length u32 |
//	| magic "WOSEG"     |
//	+-------------------+  end of file
//
// The footer:
//
//	version u8 | rows u64 | interval start i64 | interval end i64 (exclusive) |
//	schema length uvarint | schema JSON |
//	part count uvarint | per part:
//	    column uvarint (0 = __time, 1.. dimensions, then metrics, in schema order) |
//	    kind u8 | encoding u8 | offset u64 | length u64 | CRC-32C u32
//
// The interval follows from the rows and the schema's granularity (Granularity.Interval):
// [truncate(first time), truncate(last time) + the granularity's width), so [first, last+1)
// at granularity none, and the zero interval without rows. Every time is truncated to the
// granularity; under rollup the rows are strictly increasing by (time, dimensions). Verify
// checks all three.
//
// The parts a column has follow from its schema entry (each exactly once, any order):
//
//	__time, long metric     values      long-chunks (1)
//	double metric           values      double-chunks (2)
//	hyperUnique metric      values      blob-chunks (3), one serialized sketch per row
//	raw dimension           values      blob-chunks (3); nulls  roaring (8)
//	dictionary dimension    dictionary  front-coded (6)
//	                        ids         id-chunks (4) or, multi-value, multi-id-chunks (5)
//	                        bitmaps     roaring-table (7) or, version 4, roaring-table-v4
//	                                    (14), unless noBitmapIndex
//	                        nulls       roaring (8)
//
// From version 2, metrics whose aggregator needs more than its values have side parts
// (version 1 files have none, and hold no first/last metric):
//
//	longFirst, longLast,    times       long-chunks (1), kind 6: per row, the event time of
//	doubleFirst, doubleLast             the row the value came from (columns/agg, First/Last)
//	doubleSum               tails       blob-chunks (3), kind 7: per row, the terms that added
//	                                    to the rounded value give the exact sum, as
//	                                    little-endian float64s; empty when the value is exact
//
// From version 3, a long or double metric (count included) that has at least one null row (a
// missing value, as Druid's SQL-compatible null handling; Value.Null)
// has one more part, listed right after its other parts:
//
//	long or double metric   nulls       roaring (8), kind 5: the null rows, never empty
//
// A null row stores 0 (+0 for doubles) in its values, the time 0 in a first/last metric's
// times and an empty tail in a doubleSum's tails, so the value encodings are unchanged. A
// segment is version 3 only when some metric has a nulls part: without one, a file is exactly
// what a version 2 writer wrote. Readers of version 2 refuse version 3 (ErrVersion); this one
// reads both. What a null means to an aggregator (skipped by sums, ignored by min, max, first
// and last; an all-null group is null) is decided in columns/agg only.
//
// From version 4, a part may use the version 4 encoding of its kind instead of the one above
// (see "Version 4 encodings" below); the writer does so only where the part needs it, and a
// segment is version 4 exactly when some part does (its metrics' nulls parts are then
// optional, as in version 3). Readers before version 4 refuse such a segment (ErrVersion).
//
// From version 5, an ids part may also use the version 5 encoding id-chunks-v5 (see "Version 5
// encodings" below), under the same rule: a segment is version 5 exactly when some part uses a
// version 5 encoding; its other parts may use version 4 encodings or not. Readers before
// version 5 refuse such a segment (ErrVersion). Likewise from version 6 an ids part may be
// id-chunks-derived ("Version 6 encodings"): version 6 exactly when some part is.
//
// # Chunked parts (values, ids)
//
//	+---------+---------+-----+-----------+-------------------------------------+-----------+------------+
//	| chunk 0 | chunk 1 | ... | chunk k-1 | index: k x (offset u64, firstRow u64) | k u32     | rows u64   |
//	+---------+---------+-----+-----------+-------------------------------------+-----------+------------+
//
// Offsets are from the part's start; chunk i ends where chunk i+1 or the index starts. First
// rows start at 0 and strictly increase; a chunk holds at most 65536 rows (the writer's
// ChunkRows, default 4096; blob chunks also close at 1 MiB). A chunk is framed as
//
//	codec u8 = 0 (none) | raw bytes
//	codec u8 = 1 (zstd) or 2 (s2) | raw length uvarint | compressed raw bytes
//
// and the writer keeps the compressed form only when it is smaller. The raw bytes of a chunk:
//
//	long chunk     one int64 encoding, picked per chunk as the smallest of
//	                 plain     0 | n uvarint | n x i64
//	                 constant  1 | n uvarint | v varint
//	                 for       2 | n uvarint | min varint | w u8 | n x (v-min) packed at w bits
//	                 delta     3 | n uvarint | first varint | dmin varint | w u8 |
//	                               n-1 x (delta-dmin) packed at w bits
//	double chunk     plain     0 | n uvarint | n x f64 bits
//	                 constant  1 | n uvarint | f64 bits
//	                 integral  2 | n uvarint | a long chunk of the values (all whole numbers)
//	id chunk         n uvarint | w u8 | n ids packed at w bits
//	multi-id chunk   n uvarint | total uvarint | cw u8 | n x (count-1) packed at cw bits |
//	                 w u8 | total ids packed at w bits
//	blob chunk       a long chunk of the n lengths | the n values back to back
//
// Bit packing is a little-endian bit stream: value i occupies bits [i*w, (i+1)*w), in
// ceil(n*w/8) bytes. Ids are packed at w = bits needed for cardinality-1 (0 for cardinality 1).
// Every row of a dictionary dimension holds at least one id; a null row holds the null id
// alone.
//
// # Version 4 encodings: chunks
//
// Bit-packing keeps each value's width but hides its byte patterns from zstd and s2. Three
// version 4 part encodings let chunks be entropy-coded instead, chunk by chunk, where that is
// smaller. The writer uses them under CompressionZstd, the choice for size; not under s2, the
// default, whose files stay the fastest to read; never under CompressionNone. It names a part
// by its version 4 encoding only when some chunk of it needs the new form:
//
//	long-chunks-v4 (11)    long chunks that may also take
//	                 planes    4 | n uvarint | t u8 = 2 (for) or 3 (delta) | the fields of that
//	                               encoding after n, up to and including w | the n (for) or n-1
//	                               (delta) packed values in the planes form of width w
//	double-chunks-v4 (12)  double chunks whose integral chunk may hold a planes long chunk
//	id-chunks-v4 (13)      single-value ids as frequency ranks (rank 0 is the id the most rows
//	                       hold; ties by id), then the rank table:
//	                 chunks | index | k u32 | rows u64 | rank table: c ids packed at w bits
//	                 ranked chunk  n uvarint | w u8 | form u8 | the n ranks: form 0 packed at w
//	                               bits, form 1 in the planes form of width w
//
// The rank table (c = the cardinality, w = bits for c-1, as for id chunks) lists the id of
// rank 0, 1, ..., c-1: a permutation of the ids. The planes form of n values of width w splits
// them into ceil(w/8) byte planes, plane j holding byte j of each value (plane 0 the low
// bytes), each plane as
//
//	raw 0 | n bytes    constant 1 | the byte    huff0 2 | size uvarint | huff0 4-stream block
//	fse 3 | size uvarint | fse block
//
// (huff0 and fse as github.com/klauspost/compress writes them, each block with its table; n is
// at most 65536.) Ranking puts a Zipf dimension's frequent ids in the low codes, so the planes
// see their skew; the writer counts the ids as they are appended, stages the bit-packed chunks
// in a child medium, and at the end of the rows transcodes them chunk by chunk (one chunk and
// the counts in memory), closing the child medium after. Multi-value ids keep the version 2
// encoding.
//
// # Version 5 encodings
//
// Ranks suit ids in no order. Ids sorted within runs of rows (a dimension that comes right
// after the time in the sort order, where many rows share a time: rows per minute, or the
// rows of a rolled-up hour) repeat and ascend, and their differences are small. One version 5
// encoding lets such chunks say so:
//
//	id-chunks-v5 (15)      id-chunks-v4, whose ranked chunks may also take
//	                 form 2    n uvarint | w u8 | 2 | d_0 ... d_{n-1} in the planes form of
//	                               width w, d_i = (id_i - id_{i-1}) mod c, id_{-1} = 0
//
// (ids, not ranks: the rank table does not apply to them). The writer tries form 2 for a chunk
// when at most one step in 8 from an id to the next descends and keeps it when it is smaller
// than the ranked chunk (after a chunk where it was, the next chunks tried take it without the
// comparison but every 16th), and names the part id-chunks-v5 only when some chunk is in form 2; it does so under CompressionZstd only, as for the version 4 encodings. Readers check
// every d_i below c. On issue 34's minutes table at 30,000,000 rows (115 rows a minute, the
// first dimension sorted within each minute) form 2 takes that dimension's ids from 25.2 MB
// to 11.3 MB (bench/RESULTS.md, issue 37).
//
// # Version 6 encodings
//
// The bitmaps of a single-value dimension partition its rows: each row is in exactly one
// bitmap, its id's. So they alone give the ids, and under zstd, whose files are for size, the
// writer may leave the ids out:
//
//	id-chunks-derived (16)  a chunked part whose chunks hold no bytes (each frame is the codec
//	                        byte 0 alone); row r of a chunk holds the id of the bitmap that
//	                        holds r
//
// The writer uses it for a single-value dimension with a bitmap index and 2 to 1024 ids, under
// CompressionZstd unless told to store ids (segwrite.Options.StoreIDs, for readers of version
// 5), in chunks of 65536 rows whatever ChunkRows says. A segment with such a part is version
// 6; readers of version 5 refuse it (ErrVersion). A reader derives a chunk's ids with a
// cursor on each bitmap that keeps its place from chunk to chunk, so a column read front to
// back decodes each bitmap once (a jump forward passes over Elias-Fano highs a word at a time
// and roaring containers whole; a jump back starts the cursors again). The read-path check of
// such a dimension (it replaces the ids against bitmaps check of "Integrity" below) decodes
// every bitmap and checks they hold each row exactly once (keyed sums of the rows and their
// count) and the null id's bitmap is the null rows; deriving checks it again for each chunk
// (a row in two bitmaps or none, rows past the end), so damage never reads as an id, trusted
// or not. The writer checks the bitmaps against the ids it was given by their pair hashes in
// every build for such a dimension, the bitmaps being then the rows' only copy. On the events
// of bench/peers (3,000,000 rows; dimensions of 200, 1,000 and 5,000 values) the first two
// dimensions' ids took 5.3 MB of a 34.3 MB file (bench/RESULTS.md, issue 37).
//
// # Dictionary part
//
//	+---------+-----+-------------+---------------------------+-----------+----------+---------------+
//	| block 0 | ... | block b-1   | block offsets: b x u32    | count u32 | flags u8 | block size u8 |
//	+---------+-----+-------------+---------------------------+-----------+----------+---------------+
//
// count non-null values in strictly increasing byte order, 16 to a block. A block's first value
// is stored whole (length uvarint | bytes), each next one front-coded against the one before
// (shared prefix uvarint | suffix length uvarint | suffix). flags bit 0: the dimension has the
// null value, with id 0; value i then has id i+1. Lookup binary-searches the blocks' first
// values and scans one block.
//
// # Bitmap index part and nulls part
//
//	+----------+----------+-----+------------+--------------------+-----------+
//	| bitmap 0 | bitmap 1 | ... | bitmap c-1 | ends: c x u64      | count u32 |
//	+----------+----------+-----+------------+--------------------+-----------+
//
// One roaring bitmap (RoaringBitmap portable serialization; from version 4 possibly another
// form, see "Version 4 encodings: bitmap index") per id, holding the rows that hold the id;
// bitmap i spans [ends[i-1], ends[i]) of the part (ends[-1] = 0), so one bitmap is read
// without the others. The nulls part is a single roaring bitmap of the null rows (empty when
// there are none).
//
// # Version 4 encodings: bitmap index
//
// A bitmap index part may be roaring-table-v4 (14) instead of roaring-table (7): the same
// bitmaps back to back, ends table and count, but each bitmap in one of three forms, told
// apart by its bytes:
//
//	no bytes                  the empty bitmap
//	first byte 1              Elias-Fano over the row numbers:
//	                            1 | n uvarint (n >= 1, minimal) | l u8 |
//	                            lows: the n rows' low l bits, bit-packed (as above), in
//	                                  ceil(n*l/8) bytes, padding bits 0 |
//	                            highs: for the i-th row r (from 0), bit (r >> l) + i set, in the
//	                                  bytes up to the one holding the last set bit
//	                          with l = floor(log2((last row + 1) / n)), 0 when that is below 1,
//	                          at most 31
//	first byte 0x3a or 0x3b   the portable roaring serialization, as in roaring-table
//
// so each bitmap has exactly one form, and the writer picks the smallest (Elias-Fano only when
// strictly smaller than roaring). Rows that hold a value n times in a segment of N rows, spread
// in time order, cost about log2(N/n) + 2 bits each as Elias-Fano against 16 in a roaring array
// container; runs and dense bitmaps stay roaring. On the generated event table (bench/peers)
// the dimensions' bitmap indexes take about half the bytes they take as roaring
// (bench/RESULTS.md has the measurements).
//
// The writer uses this encoding under every Compression but CompressionNone (which keeps the
// layout of versions 2 and 3), for a part where some bitmap is empty or Elias-Fano: otherwise
// the part's bytes are those of roaring-table and it is written as such. Readers check every
// Elias-Fano bitmap whole: n values, strictly increasing, each below the segment's rows, and
// the canonical form above (so damage that still decodes gives other rows, which Verify
// finds against the ids). Nulls parts stay roaring (8).
//
// # Integrity
//
// Open checks the framing, the footer CRC and the footer, and every part's index against the
// part's bounds. A part's CRC is computed while it is staged and checked again as it is copied
// into the file, so a stage that reads back different bytes is caught before anything is
// published.
//
// Reads check checksums too, so that no answer ever comes from damaged bytes: every reader
// checks a part's CRC-32C the first time it touches the part's bytes (a cursor's first chunk,
// a bitmap, the null rows; a dictionary when Segment.Dim hands out its column, see below), before it returns
// anything derived from them. Each part is checked once per open Segment, however many readers and goroutines
// touch it: its state (unchecked, good, bad) is one atomic word, so later reads cost one atomic
// load, and concurrent first reads may both compute the CRC. A bad part stays bad: every read
// of it returns an error wrapping ErrCorrupt that names the file (Segment.Name), the column and
// the part, e.g.
//
//	columns: data/a.seg: column "country" part bitmaps: CRC 1a2b3c4d, the footer says 5e6f7a8b: columns: corrupt segment
//
// Open reads parts' indexes and trailers unchecked, but lets nothing derived from them out
// before the part is checked: a dictionary's cardinality and null flag (DimColumn.Cardinality,
// HasNull, which return no error) are reached through Segment.Dim, which checks the dictionary
// first, so a query pays only for the dictionaries it uses. When Open cannot parse a part whose
// CRC does not match, it reports the mismatch.
//
// The whole cost is one CRC-32C pass over each part read, once per open segment (12 to 20
// GB/s with the CPU's CRC instruction, plus reading the part from memory once more): about 1%
// of a merge's CPU time, and up to a fifth of the lightest work there is, a scan of every
// column through cursors (BenchmarkSegmentRead, op=open-cursors). Callers that have just
// checked the bytes avoid even that: VerifyChecksumsContext and Verify mark every part they check as
// checked; OpenWith and
// NewSegmentWith with OpenOptions.TrustChecksums open a segment that way (for a file the caller wrote and read back, or verified through
// another Segment). Damaged bytes that are trusted give wrong answers or decoding errors.
//
// A matching CRC says the bytes are the ones written, not that the writer wrote them right: a
// buggy writer or a faulty tool leaves parts that agree with their CRCs and break the format's
// invariants. So the first read of a part, once its CRC matches, also runs the cheap invariants
// Verify checks of it, over the whole part, once per open segment, remembering a failure as it
// does a bad CRC (the error names the file, column and part):
//
//	__time values                    in order, inside the interval, truncated to the
//	                                 granularity; the interval the first and last times give
//	dictionary                       strictly increasing, every block exactly filled
//	ids, bitmaps, nulls (dictionary  one check, run by the first read of any of the three: the
//	dimension)                       bitmaps hold exactly the distinct (row, id) pairs of the
//	                                 ids, the null rows exactly the rows holding the null id
//	                                 (a sum of a hash of each pair, keyed at random per open
//	                                 segment, and the counts, compared); for derived ids, the
//	                                 bitmaps hold each row once (see "Version 6 encodings")
//	nulls (raw dimension)            every null row holds no bytes
//	nulls (long or double metric)    not empty; every null row stores 0, time 0, no tail
//
// and every sketch read as bytes (SketchCursor.Bytes) must decode (agg.Sketches.Check, without
// allocating). Each is a pass over the parts it checks, done once: a query that reads one
// bitmap of a dimension pays for decoding its ids and every bitmap once. Verify alone checks
// what needs every column of a row at once: under rollup, that no two rows share a key.
// TrustChecksums skips these checks too.
// Verify also decodes everything and checks every invariant the format states.
package columns
