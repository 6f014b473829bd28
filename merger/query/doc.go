// Package query runs filtered aggregations on segments (*columns.Segment) and in-memory
// builders (*merger.Builder), as Druid's timeseries and groupBy queries do; its subpackage
// filter is the filter language.
//
// Run and RunMany evaluate a Spec's filter to a roaring bitmap (through the bitmap indexes
// where there are some, by scanning the rows otherwise), then aggregate the matching rows
// grouped by time bucket and by the values of chosen dimensions. Multi-value dimensions
// explode as in Druid: a row counts in the group of each of its values. Results come sorted by
// time bucket, then group values (null first, then byte order), under every granularity (with
// All, one bucket: by group values); Spec.OrderBy sorts by output columns instead, stably,
// and Spec.Limit keeps the first groups. Sums of doubles are exact and rounded once, so a
// query gives the same result on a merged segment as on its inputs (without rollup; with
// rollup the stored partial sums were rounded).
//
// # Time buckets
//
// A bucket is fixed-width (Spec.Granularity: none, second, minute, hour, day, as rollup uses)
// or a UTC calendar period (Spec.Period: ISO weeks from Monday 00:00, months, quarters,
// years), whose widths vary: windows advance bucket by bucket through Period's arithmetic, so
// calendar queries stream as fixed-width ones do. A group's Time is its bucket's start.
//
// # Order and limit
//
// An OrderBy that is a prefix of the default order (__time, then the group-by dimensions,
// ascending) streams; any other holds the groups until the last row is read: all of them, or
// with a Limit the best Limit in a heap whose root is the worst held. Ties keep the default
// order. With the default order, a Limit ends the query once it has its groups.
//
// # Memory
//
// RunEach hands the groups on as they are complete: segments keep their rows in time order, so
// it reads every input window by window (whole time buckets, about 4096 rows a window)
// on a goroutine of its own, combines and sorts one window's groups while the caller's each
// has the window before. Memory holds two windows' groups, whatever the number of groups in
// all (a query by hour and two dimensions of 3,000,000 rows, 2.9 million groups: about 42 MiB
// of RSS for segtool query, against 2.9 GB when the whole result was built first), and the
// parts' memory is reused. RunMany collects RunEach's parts into one Result. A query with All
// has one bucket, and a builder keeps its rows in the order they were added: then there is
// one window, and every group is in memory at once (a one-window query runs on the caller's
// goroutine alone).
//
// # Finding groups
//
// A segment grouped by single-value dictionary dimensions finds a row's group in an array
// indexed by the combination of its ids (at most 2^22 slots), cleared group by group as the
// rows' time bucket moves on; ids are in value order, so a window's groups sort by that index.
// Other inputs (multi-value or raw dimensions, builders, many slots) hash their group keys.
//
// Several inputs are queried as one table: a dimension an input lacks is null there, a
// long or double metric an input lacks reads as null (an empty sketch for hyperUnique).
//
// Null metric values (columns.Value.Null, a segment's nulls part) combine as columns/agg says,
// through its accumulators alone: sums and counts of a metric skip them, min, max, first and
// last ignore them, and a group whose values were all null is null (AggValue.Null); count is
// never null.
package query
