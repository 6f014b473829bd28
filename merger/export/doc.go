// Package export writes a segment's rows out of writeout, in segment order (time, then
// dimensions), as a Parquet file, with github.com/parquet-go/parquet-go (WriteParquet to an
// io.Writer, ParquetFile to a file published as segments are). ParquetInputsTo writes the
// rows of several segments of one schema (a table's live segments) one after the other into
// one file, the same file a segment holding all those rows would export to.
//
// # The file
//
// One column per segment column, in schema order, zstd-compressed:
//
//	segment column                 Parquet column
//	__time                         required INT64 TIMESTAMP(MILLIS, isAdjustedToUTC=true)
//	string dimension               optional BYTE_ARRAY STRING, RLE_DICTIONARY; null is null
//	raw string dimension           optional BYTE_ARRAY STRING, PLAIN (long payloads)
//	multi-value dimension          optional LIST of required BYTE_ARRAY STRING, RLE_DICTIONARY
//	long metric (count included)   optional INT64; a null metric value is null
//	double metric                  optional DOUBLE; a null metric value is null
//	sketch metric (hyperUnique...)  optional BYTE_ARRAY: the sketch as the segment stores it
//	                               (SketchCursor.Bytes; never null: a missing sketch is empty)
//
// A multi-value dimension's null row (a segment does not tell a null row from one with no
// values) is a null list, never an empty one; an element is never null (a segment has no null
// inside a list) but may be the empty string, as a single value may: "" and null stay apart.
// A dictionary column falls back to PLAIN for the rest of a row group once its dictionary passes
// 8 MiB (parquet-go's DictionaryMaxBytes), so memory stays bounded on any cardinality.
//
// The file's key/value metadata holds the segment's schema under the key "writeout.schema",
// as columns.Schema's JSON. Rows stream: parquet-go is given 256 rows at a time and closes a
// row group every Options.RowGroupRows rows, so the writer holds one row group's pages (in
// memory, or in Options.Medium through internal/parquetpool) and never the whole segment.
//
// # Reading it back into a segment
//
// Info.IngestSpec returns the ingestion spec (merger/ingest) that reads the file back. For a
// segment of string dimensions (nulls and multi-values included), long and double metrics, and
// count metrics of 1 per row, ingesting the export with that spec gives the same segment, byte
// for byte. Where a Parquet column cannot carry what the segment stores, the round trip is not
// exact; the limits:
//
//   - count: ingestion counts input rows, so a rolled-up segment's counts (above 1) would
//     become 1. Info.IngestSpec reads such a count column with longSum instead: the values are
//     the same and add the same way under rollup, but the schema names longSum, not count.
//   - longFirst/longLast/doubleFirst/doubleLast: a segment stores with each value the time of
//     the row it came from; the export holds the value only. Ingestion takes the row's __time
//     as that time: the same when the segment's granularity is none and its rows were not
//     rolled up, else earlier (the truncated time), which changes which value a later rollup
//     or merge keeps.
//   - doubleSum: a rolled-up segment stores beside a sum the rounding remainder that keeps
//     later merges exact; the export holds the rounded double only, so a re-ingested sum has
//     no remainder and a later merge may differ in its last bit.
//   - sketches (hyperUnique, quantiles): the export holds each sketch's bytes. A sketch made
//     from a dimension is made again from that dimension's exported values, the same when the
//     segment was not rolled up; one made from any other input field is read back as it is
//     (the spec marks it isInputSketch), so a later rollup merges the same sketches.
//   - fieldName: a long or double metric is exported under its name, so the spec reads it
//     from there; a schema whose metric had another fieldName re-ingests with the name.
//   - raw dimensions re-ingest as raw dimensions (the spec keeps the schema), and a
//     dimension's "" stays "" and its null null.
//
// # Metric nulls
//
// Every long and double metric's null rows come from one function, metricNulls; a segment
// that stores no metric nulls exports every value.
package export
