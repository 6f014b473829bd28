// Package ingest turns the rows of input files (CSV, NDJSON, Parquet: the registry of input
// formats) into segments, through the one way rows become a segment: a merger.Builder.
//
// # Spec
//
// An ingestion spec (Spec, ParseSpec) is a segment schema (columns.Schema) plus where each
// column's values are in the input: the time field and its format (epoch seconds, millis,
// micros, nanos, RFC 3339 or a Go layout), the input format, CSV's delimiter, multi-value
// delimiter and null text, and a mapping of dimensions to input fields. SpecHelp describes
// the JSON for users. A spec is validated once: by ParseSpec, or by Run for one built in Go;
// Run then works out what every reader needs from it (a plan) once for all its inputs.
//
// # Formats
//
// An input format is a value (format.go): its name, the extensions of its files, the magic
// bytes its content starts with (if any), how its reader is made, and its paragraph of
// SpecHelp. Each lives in a file of its own (csv.go, ndjson.go, parquet.go) and is listed in
// the registry, formats; the spec's validation, the choice of an input's format, FormatNames,
// SpecHelp and the error messages all read the registry. Adding a format is one file and its
// line in the registry.
//
// # Nulls
//
// A long or double metric's missing value (an empty CSV field or the null text, a column the
// CSV header lacks, an NDJSON null, "" or missing key) is null by default, as in SQL and in
// Druid's SQL-compatible null handling (its default from Druid 28): a missing delay must not
// make a longMin 0. The rows keep columns.Value.Null, and what it means to an aggregator is
// decided in columns/agg alone. The spec's input.nullAsZero names metrics whose missing values
// read as 0 instead.
//
// # Readers
//
// Each format's reader reads one input (an io.Reader and a name for messages) into
// columns.Row values ready for merger.Builder.Add. A row that does not parse is a *RowError,
// whose message is FILE:LINE: column NAME: reason, and reading goes on after it; an input that
// cannot be read at all (a CSV header without the time or a dimension field, a line over
// input.maxRecordBytes) is an error wrapping ErrInput. A malformed CSV record is a
// *RowError naming the line where it starts, and reading goes on at the line after it.
//
// # Run
//
// Run drives an ingestion: rows go into a Builder (which interns dimension values, rolls rows
// up as they arrive when the schema says so, and sums doubles exactly), which is persisted as
// a run in a temp directory when it holds Options.MaxRowsInMemory rows or its memory estimate
// (Builder.MemBytes) passes half of Options.MemoryLimit; at the end a single run's rows go
// straight to the output, several runs are merged into it with the rows still in memory, at
// most Options.MaxFanIn at once and no more than MemoryLimit has room for (each run counted by
// what a merge holds for it: its dictionaries' id maps and a chunk of each column), in phases
// when there are more. Input.Rows takes rows already made (a generator's) through the same
// path. Options.RowsPerSegment splits the output into numbered segments. Outputs are staged
// and put in place together once the whole ingest succeeded (Options.Replace): on failure or
// cancellation nothing is left behind, and existing outputs are as they were.
//
// Each input's rows are parsed ahead on a goroutine of their own, up to 16 batches of 1,024
// rows, while Run's goroutine adds the rows parsed before to the Builder and persists runs:
// parsing overlaps building on a second core. Everything Run reports (OnWarning, OnSkip,
// Progress, errors) still comes from Run's goroutine in the input's order, and a Run that
// stops early stops the parsing before it closes the input.
//
// A spilled doubleSum is rounded once per run, then once more in the merge: with rollup, the
// sum of rows that met in different runs can differ in its last bit from the sum of the same
// rows met in one Builder. Without rollup, a run-merged output is the same bytes as the one
// persisted straight from a Builder holding every row.
package ingest
