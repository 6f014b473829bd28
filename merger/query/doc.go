// Package query runs filtered aggregations on segments (*columns.Segment) and in-memory
// builders (*merger.Builder), as Druid's timeseries and groupBy queries do; its subpackage
// filter is the filter language.
//
// Run and RunMany evaluate a Spec's filter to a roaring bitmap (through the bitmap indexes
// where there are some, by scanning the rows otherwise), then aggregate the matching rows
// grouped by time bucket and by the values of chosen dimensions. Multi-value dimensions
// explode as in Druid: a row counts in the group of each of its values. Results come sorted by
// time, then group values (null first, then byte order). Sums of doubles are exact and rounded
// once, so a query gives the same result on a merged segment as on its inputs (without
// rollup; with rollup the stored partial sums were rounded).
//
// Several inputs are queried as one table: a dimension an input lacks is null there, a
// long or double metric an input lacks reads as null (an empty sketch for hyperUnique).
//
// Null metric values (columns.Value.Null, a segment's nulls part) combine as columns/agg says,
// through its accumulators alone: sums and counts of a metric skip them, min, max, first and
// last ignore them, and a group whose values were all null is null (AggValue.Null); count is
// never null.
package query
