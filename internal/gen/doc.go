// Package gen makes seeded, deterministic rows for writeout's benchmarks,
// tests and command-line tool.
//
// # Generators
//
// Basic is Apache Druid's "basic" benchmark schema, column for column (nine
// string dimensions, four metrics, six aggregators; segment i of a benchmark
// uses seed BasicSeed+i). Wide is a 25-column table in the shape of Apache
// Pinot's segment-creation benchmarks: dictionary-encoded int-like and word
// dimensions with and without bitmap indexes, raw int dimensions, raw int64
// metrics, two raw payload columns of configurable length and a raw JSON
// column. The doc comments of Basic and Wide list every column.
//
// The types here (Column, Row, Generator) are this package's own, so that gen
// depends on nothing else in writeout; callers map them to columns' schema.
//
// # Rows
//
// A Generator fills a caller's Row in place, reusing its slices, so that a
// long run allocates nothing (Basic) or one string a row (Wide, whose raw
// text columns share that string). Strings handed out are immutable and may
// be kept; the Row's slices may not, so Clone a Row to keep it.
//
// A string column's value is a StringValue: Null for a null row, otherwise
// Values (one value for a single-value column, the generated values in order
// with duplicates kept for a multi-value one) and, for columns with
// NullElements, NullAt marking null elements.
//
// # Time
//
// Rows come out in non-decreasing time order, spread evenly over an
// interval [start, start+span) with seeded jitter: row i of n has time
// start + floor((i + u) * span / n) for a seeded u in [0, 1), computed in
// integer arithmetic. (Druid's generator spaces rows exactly evenly, without
// jitter.) The interval is [2000-01-01T00:00Z, 2000-01-02T00:00Z) unless
// BasicOptions.Time or WideOptions.Time sets another TimeRange, anywhere in
// [MinTime, MaxTime], the times a segment can hold; Interval reports it. The
// interval moves only the times (and Wide's json, which holds the time):
// every other value is the same whatever the interval.
//
// # Distributions
//
// Ranges are half-open, [start, end), as in Druid's generator: "sequential
// 0..1000" cycles 0, 1, ..., 999, 0, ... and "uniform 1..100000" draws from
// 1..99999. A sequential column does not advance on rows that come out null.
// Zipf over [start, end) with exponent s gives start+k-1 the probability
// (1/k^s) / H(end-start, s); unlike Druid (whose table is off by one: the
// start value never occurs and start+1 is the most frequent), every value in
// the range can occur. Zipf, enumerated and rounded-normal columns sample by
// inverting an exact cumulative table held as 53-bit integer thresholds.
// Null probabilities apply to the whole row, before any value is drawn.
//
// # Determinism
//
// The same generator, seed, row count and options give identical rows on
// every run: each column draws from its own PCG stream
// (math/rand/v2's PCG, a fixed algorithm) seeded from (seed, column), and
// every derived quantity (bounded integers, probability tests, time) is
// computed in integers by this package. Only the cumulative tables are built
// with floating point (math.Pow, math.Erfc); a last-bit difference there on
// another platform would change a draw with probability about 2^-53. Tests
// pin a hash of the rows.
//
// # Text output
//
// WriteCSV and CSVOptions.Write write rows as CSV; WriteNDJSON writes
// newline-delimited JSON. Both use integer milliseconds for __time. CSV
// joins multi-value cells with '|' and writes null as an empty field (both
// configurable); NDJSON writes multi-value cells as arrays and null as null.
package gen
