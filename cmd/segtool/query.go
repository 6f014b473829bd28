package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/query"
	"github.com/writeout/writeout/merger/query/filter"
)

// filterHelp documents the filter language of package filter.
const filterHelp = `The filter language (package merger/query/filter):

  dim = 'value'           the row holds value (a multi-value row: any of its values); also ==
  dim != 'value'          not that (null rows included: two-valued logic, as Druid's default);
                          also <>
  dim in ('a', 'b')       the row holds any of the values; dim not in (...) is its negation
  dim is null             the row is null (a dimension a segment lacks is null in every row)
  dim is not null
  metric > 10             a long or double metric compared with a number: <, <=, >, >=, =,
                          != (also == and <>); numbers may be negative, decimal, with an
                          exponent (-2.5, .5, 1e6)
  metric between 1 and 5  1 <= metric <= 5 (inclusive, as SQL); also not between
  metric in (1, 2)        the value is one of the numbers; also not in
  metric is null          the value is null (a metric a segment lacks is null in every row)
  a and b, a or b, not a, (a), true, false

A null metric value matches no comparison, not even != or not between (as SQL); "not"
complements what it applies to, nulls included: not (delay > 10) holds for a null delay.
A long metric compares exactly with the number (delay > 10.5 is delay >= 11, and values past
2^53 are not rounded); a double metric with the number rounded to a double (as SQL casts it).
The segments' schemas say whether a name is a dimension or a metric: a dimension compares
with quoted strings only, a metric with numbers only, and a sketch metric not at all. A
comparison reads the stored values: with rollup, a stored row's combined value.
Values are single-quoted strings with the escapes \\ \' \" \n \r \t \xHH \uHHHH \UHHHHHHHH;
a column is a bare name (letters, digits, _ . -, starting with a letter or _) or a
double-quoted one ("page title"). Keywords are case-insensitive; not binds tighter than and,
and tighter than or. An empty filter selects every row. Metric comparisons read the metric's
values chunk by chunk, after the dimension predicates of an and (bitmap indexes).`

type queryFlags struct {
	filter      string
	granularity string
	groupBy     string
	metrics     string
	orderBy     string
	limit       int
	quantiles   string
	version     int // of the tables among the inputs; 0: the newest
	text        textOptions
	progress    string
	s3          *s3Flags
}

func newQueryCmd() *cobra.Command {
	f := queryFlags{s3: &s3Flags{}}
	cmd := &cobra.Command{
		Use:   "query [--filter EXPR] [--granularity G] [--group-by a,b] [--order-by COL [desc],...] [--limit N] [--format csv|ndjson] SEG...",
		Short: "Run a filtered aggregation over segments",
		Long: `query selects the rows of the segments that --filter matches (through the bitmap indexes,
and the metric columns for comparisons on metrics), groups them by time bucket (--granularity
none, second, minute, hour, day; week, month, quarter or year on the UTC calendar, weeks
starting on Monday as ISO weeks; or all: one bucket) and by the values of the --group-by
dimensions, and writes one line per group: __time (the bucket's start; with all, the earliest
time in the group), the group-by values, __rows (the segment rows in the group) and every
metric aggregated with its aggregator (hyperUnique: the estimated number of distinct values;
quantiles: the number of values); --metrics picks metrics.
--quantiles 0.5,0.9,0.99 adds, after each metric whose sketch gives quantiles (quantiles), one
column per quantile named after the metric and the quantile in percent (delay_q_p50,
delay_q_p90, delay_q_p99; 0.999 gives delay_q_p99.9): the estimated value at that quantile
(lower quantile, within the metric's relative accuracy), null for a group without values. Several segments are queried as
one table. Groups come out ordered by time bucket, then by group values (null first, then byte
order), for every granularity (with all: by group values).
--order-by orders them by output columns instead: __time, a --group-by dimension, __rows or a
metric by its name (hyperUnique and quantiles: by the number printed), each followed by asc
(the default) or desc, comma-separated (--order-by "added desc, page"); the sort is stable
(equal groups keep the default order), nulls come first in ascending order and last in
descending order; a name with a space or a comma goes in double quotes. An order other than a
prefix of the default one (__time, then the --group-by dimensions, ascending) holds every group
in memory until the last row is read (with --limit, only the best N, in a bounded heap).
--limit N writes only the first N groups in that order; in the default order the query stops
reading once it has them.
A multi-value dimension in --group-by counts a row once in the group of each of its values.
Null metric values are skipped: sums add the others, min, max, first and last ignore them, and
a group whose values were all null shows null (count counts every row, never null).
A dimension some segments lack is null in their rows; a --group-by, --filter, --order-by or
--metrics name that is no column of any segment (or a metric where a dimension is wanted), and
segments whose schemas conflict as merge would refuse them, are errors, found before any row
is read.
With standard output redirected and standard error a terminal, standard error shows a progress
bar of the input rows read (--progress always shows it whatever the streams).

` + filterHelp + `

` + textConventionsHelp + `

` + s3Help,
		Example: `  segtool query --filter "page = 'Paris' and language in ('fr', 'de')" --group-by language events.seg
  segtool query --filter "added > 100 and deleted between 0 and 20" --group-by page --order-by "added desc" --limit 3 events.seg
  segtool query --granularity hour --format ndjson day1.seg day2.seg
  segtool query --granularity week --group-by language --time-format rfc3339 day1.seg day2.seg
  segtool query --filter "tags is null or not tags = 'bot'" --metrics added,editors merged.seg
  segtool query --group-by service --quantiles 0.5,0.99 latencies.seg
  segtool query --group-by page s3://seg/day1.seg s3://seg/day2.seg
  segtool query --version 3 events/`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.text.validate(); err != nil {
				return err
			}
			spec, err := f.spec()
			if err != nil {
				return err
			}
			qs, err := parseQuantiles(f.quantiles)
			if err != nil {
				return err
			}
			if args, err = expandTables(cmd.Context(), args, f.version, f.s3); err != nil {
				return err
			}
			bar, err := newCommandProgress(f.progress, false, cmd.ErrOrStderr(), cmd.OutOrStdout())
			if err != nil {
				return err
			}
			return runQuery(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args, spec, f.text, qs, f.s3, bar)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.filter, "filter", "", "filter expression (default: every row)")
	fl.StringVar(&f.granularity, "granularity", "all", "time buckets: none, second, minute, hour, day, week, month, quarter, year (UTC) or all")
	fl.StringVar(&f.groupBy, "group-by", "", "comma-separated dimensions to group by")
	fl.StringVar(&f.metrics, "metrics", "", "comma-separated metrics to aggregate (default: all)")
	fl.StringVar(&f.orderBy, "order-by", "", "comma-separated output columns, each optionally asc or desc (default: time bucket, then group values)")
	fl.IntVar(&f.limit, "limit", 0, "write only the first N groups (0: all)")
	fl.StringVar(&f.quantiles, "quantiles", "", "comma-separated quantiles in [0, 1] of the metrics whose sketches give them (quantiles)")
	fl.IntVar(&f.version, "version", 0, "the version of the tables among the inputs (default: the newest)")
	addTextFlags(cmd, &f.text)
	addProgressFlag(cmd, &f.progress, true)
	addS3Flags(cmd, f.s3)
	return cmd
}

func (f queryFlags) spec() (query.Spec, error) {
	var spec query.Spec
	flt, err := filter.Parse(f.filter)
	if err != nil {
		return spec, usagef("--filter: %v", err)
	}
	spec.Filter = flt
	if err := spec.SetGranularity(f.granularity); err != nil {
		return spec, usagef("--granularity: %v", err)
	}
	if spec.OrderBy, err = query.ParseOrderBy(f.orderBy); err != nil {
		return spec, usagef("--order-by: %v", err)
	}
	if f.limit < 0 {
		return spec, usagef("--limit: %d is negative (0 writes every group)", f.limit)
	}
	spec.Limit = f.limit
	spec.GroupBy = splitList(f.groupBy)
	if f.metrics != "" {
		spec.Metrics = splitList(f.metrics)
	}
	return spec, nil
}

// querySegments opens the segments (files, or s3:// objects through s3) and runs spec over
// them as one table, handing the groups to each part by part (query.RunEach).
// bar (nil: none) counts the rows read.
func querySegments(ctx context.Context, paths []string, spec query.Spec, s3 *s3Flags, bar *progressBar, each func(query.Result) error) (err error) {
	qs := make([]query.Queryable, 0, len(paths))
	var closers []func() error
	defer func() {
		for _, c := range closers {
			err = errors.Join(err, c())
		}
	}()
	segs, segClosers, err := openInputs(ctx, paths, s3)
	closers = append(closers, segClosers...)
	if err != nil {
		return err
	}
	var rows int64
	for _, sg := range segs {
		qs = append(qs, sg)
		rows += int64(sg.Rows())
	}
	spec.InputNames = paths
	spec.Progress = bar.followRows("querying", rows)
	// The query's errors name the column and the file they are about.
	return query.RunEach(ctx, qs, spec, each)
}

// runQuery writes the groups as they come: memory holds one window's groups (query.RunEach),
// not the whole result.
func runQuery(ctx context.Context, out, errOut io.Writer, paths []string, spec query.Spec, o textOptions, qs quantiles, s3 *s3Flags, bar *progressBar) error {
	var w *queryWriter
	groups := 0
	err := querySegments(ctx, paths, spec, s3, bar, func(part query.Result) error {
		if w == nil {
			var err error
			if w, err = newQueryWriter(out, part, o, qs); err != nil {
				return err
			}
		}
		groups += len(part.Rows)
		return w.rows(part.Rows)
	})
	bar.finish(err == nil)
	if err != nil {
		return err
	}
	if groups == 0 && spec.Filter != nil {
		// The header alone looks like a failure: say what happened (standard error, so that
		// the output stays the result).
		fmt.Fprintf(errOut, "segtool: query: no row matches the filter %s\n", spec.Filter)
	}
	return w.flush()
}

// queryWriter writes a query's groups as CSV or NDJSON, the text tableWriter writes for the
// same cells (dump's conventions), appending straight into one reused buffer: a query can hand
// on millions of groups, and building cells for them cost as much as the query itself.
type queryWriter struct {
	tw   *tableWriter
	csv  bool
	buf  []byte   // lines not yet written
	keys [][]byte // NDJSON: each column's `"name":`
	qs   quantiles
	ofQ  []bool // per result metric: its sketch gives quantiles (columns for qs follow it)
	// the text of the last time written: a window's groups share a few bucket times
	lastTime int64
	timeText []byte
	haveTime bool
}

// queryFlushBytes is how much queryWriter gathers before it writes.
const queryFlushBytes = 256 << 10

// newQueryWriter writes the header of a result's columns.
func newQueryWriter(out io.Writer, res query.Result, o textOptions, qs quantiles) (*queryWriter, error) {
	names := append([]string{columns.TimeColumn}, res.GroupBy...)
	names = append(names, "__rows")
	ofQ := make([]bool, len(res.Metrics))
	for i, m := range res.Metrics {
		names = append(names, m.Name)
		if ofQ[i] = len(qs.q) > 0 && givesQuantiles(m); ofQ[i] {
			for _, n := range qs.names {
				names = append(names, m.Name+"_"+n)
			}
		}
	}
	if len(qs.q) > 0 && !slices.Contains(ofQ, true) {
		return nil, usagef("--quantiles: no metric of the query is a quantile sketch")
	}
	tw := newTableWriter(out, o, names)
	if err := tw.header(); err != nil {
		return nil, err
	}
	w := &queryWriter{tw: tw, csv: o.format == "csv", qs: qs, ofQ: ofQ}
	if !w.csv {
		w.keys = make([][]byte, len(names))
		for i, n := range names {
			w.keys[i] = append(appendJSONString(nil, n), ':')
		}
	}
	return w, nil
}

// rows writes rows, one line each.
func (w *queryWriter) rows(rows []query.Row) error {
	b := w.buf
	for i := range rows {
		if w.csv {
			b = w.appendCSV(b, &rows[i])
		} else {
			b = w.appendJSON(b, &rows[i])
		}
		if len(b) >= queryFlushBytes {
			if _, err := w.tw.w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	w.buf = b
	return nil
}

// flush writes what is gathered and flushes the output.
func (w *queryWriter) flush() error {
	if len(w.buf) > 0 {
		if _, err := w.tw.w.Write(w.buf); err != nil {
			return err
		}
		w.buf = w.buf[:0]
	}
	return w.tw.flush()
}

// time returns the text of t: CSV's field or NDJSON's value.
func (w *queryWriter) time(t int64) []byte {
	if w.haveTime && t == w.lastTime {
		return w.timeText
	}
	c := cell{kind: cellTime, i: t}
	if w.csv {
		w.timeText = w.tw.appendCSV(w.timeText[:0], c)
	} else {
		w.timeText = w.tw.appendJSON(w.timeText[:0], c)
	}
	w.lastTime, w.haveTime = t, true
	return w.timeText
}

// appendCSV appends r's line as tableWriter.row writes its cells in CSV.
func (w *queryWriter) appendCSV(b []byte, r *query.Row) []byte {
	null := w.tw.o.null
	b = append(b, w.time(r.Time)...)
	for _, g := range r.Groups {
		b = append(b, ',')
		if g.Null {
			b = appendCSVField(b, null)
		} else {
			b = appendCSVField(b, g.Value)
		}
	}
	b = append(b, ',')
	b = appendInt(b, r.Rows)
	for i := range r.Values {
		v := &r.Values[i]
		b = append(b, ',')
		switch {
		case v.Null:
			b = appendCSVField(b, null)
		case v.Type == columns.MetricDouble:
			b = strconv.AppendFloat(b, v.Double, 'g', -1, 64)
		default:
			b = appendInt(b, v.Long)
		}
		if w.ofQ[i] {
			for _, q := range w.qs.q {
				b = append(b, ',')
				if f, ok := quantile(v, q); ok {
					b = strconv.AppendFloat(b, f, 'g', -1, 64)
				} else {
					b = appendCSVField(b, null)
				}
			}
		}
	}
	return append(b, '\n')
}

// appendJSON appends r's line as tableWriter.row writes its cells in NDJSON.
func (w *queryWriter) appendJSON(b []byte, r *query.Row) []byte {
	b = append(b, '{')
	b = append(b, w.keys[0]...)
	b = append(b, w.time(r.Time)...)
	k := 1
	for _, g := range r.Groups {
		b = append(b, ',')
		b = append(b, w.keys[k]...)
		k++
		if g.Null {
			b = append(b, "null"...)
		} else {
			b = appendJSONString(b, g.Value)
		}
	}
	b = append(b, ',')
	b = append(b, w.keys[k]...)
	k++
	b = appendInt(b, r.Rows)
	for i := range r.Values {
		v := &r.Values[i]
		b = append(b, ',')
		b = append(b, w.keys[k]...)
		k++
		switch {
		case v.Null:
			b = append(b, "null"...)
		case v.Type == columns.MetricDouble:
			b = w.tw.appendJSON(b, cell{kind: cellDouble, f: v.Double})
		default:
			b = appendInt(b, v.Long)
		}
		if w.ofQ[i] {
			for _, q := range w.qs.q {
				b = append(b, ',')
				b = append(b, w.keys[k]...)
				k++
				if f, ok := quantile(v, q); ok {
					b = w.tw.appendJSON(b, cell{kind: cellDouble, f: f})
				} else {
					b = append(b, "null"...)
				}
			}
		}
	}
	return append(b, '}', '\n')
}

// quantiles are the --quantiles: each in [0, 1], with its column suffix (p50, p99.9).
type quantiles struct {
	q     []float64
	names []string
}

// parseQuantiles parses --quantiles.
func parseQuantiles(s string) (quantiles, error) {
	var qs quantiles
	for _, f := range splitList(s) {
		q, err := strconv.ParseFloat(f, 64)
		if err != nil || !(q >= 0 && q <= 1) {
			return qs, usagef("--quantiles: %q is not a quantile in [0, 1]", f)
		}
		// The percent, to 4 decimals: 0.99 is p99, not p98.99999999999999.
		n := "p" + strconv.FormatFloat(math.Round(q*1e6)/1e4, 'f', -1, 64)
		if slices.Contains(qs.names, n) {
			return qs, usagef("--quantiles: %s given twice", n)
		}
		qs.q, qs.names = append(qs.q, q), append(qs.names, n)
	}
	return qs, nil
}

// givesQuantiles reports whether metric m's sketches estimate quantiles (agg.Quantiler).
func givesQuantiles(m columns.Metric) bool {
	sks, err := m.Sketches()
	if err != nil || sks == nil {
		return false
	}
	_, ok := sks.New().(agg.Quantiler)
	return ok
}

// quantile returns the estimate at q of v's sketch; false for a group without values.
func quantile(v *query.AggValue, q float64) (float64, bool) {
	qr, ok := v.Sketch.(agg.Quantiler)
	if !ok {
		return 0, false
	}
	f, err := qr.Quantile(q)
	return f, err == nil
}
