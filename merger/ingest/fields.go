package ingest

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/axiomhq/hyperloglog"

	"github.com/writeout/writeout/columns"
)

// metricKind is how a reader fills one metric.
type metricKind uint8

const (
	metCount metricKind = iota
	metLong
	metDouble
	metSketch // hyperUnique from an input field
	metNone   // hyperUnique over a dimension: the Builder fills it
)

// plan is what every reader of a spec needs, worked out once from a validated spec (newPlan):
// the readers of a Run share it, and none validates the spec again.
type plan struct {
	sp        *Spec
	parseTime func(string) (int64, error)
	timeField string
	dimFields []string
	metFields []string // "" for count and hyperUnique over a dimension
	kinds     []metricKind
	zero      []bool // per metric: a missing value reads as 0 (Spec.nullAsZero), not null
	maxRecord int    // inputSpec.MaxRecordBytes, defaulted
}

// newPlan returns the plan of sp, which has been validated (ParseSpec, Spec.Validate);
// maxRecord, when positive, overrides the spec's input.maxRecordBytes.
func newPlan(sp *Spec, maxRecord int64) (*plan, error) {
	pl := &plan{sp: sp, timeField: sp.timestamp.Field, maxRecord: sp.maxRecordBytes()}
	if maxRecord > 0 {
		pl.maxRecord = int(min(maxRecord, math.MaxInt32))
	}
	if pl.timeField == "" {
		pl.timeField = columns.TimeColumn
	}
	var err error
	if pl.parseTime, err = timeParser(sp.timestamp.Format); err != nil {
		return nil, specErr(err)
	}
	for _, d := range sp.Schema.Dimensions {
		pl.dimFields = append(pl.dimFields, sp.dimensionField(d))
	}
	for _, m := range sp.Schema.Metrics {
		f := sp.metricField(m)
		pl.metFields = append(pl.metFields, f)
		k := metCount
		switch {
		case m.Agg().CountsRows:
		case m.ValueType() == columns.MetricLong:
			k = metLong
		case m.ValueType() == columns.MetricDouble:
			k = metDouble
		case f == "":
			k = metNone
		default:
			k = metSketch
		}
		pl.kinds = append(pl.kinds, k)
		pl.zero = append(pl.zero, sp.nullAsZero(m))
	}
	return pl, nil
}

// fieldParser turns the text of fields into a row, shared by the formats: the plan, and the
// state of one input.
type fieldParser struct {
	plan
	file      string
	line      int
	onWarning func(Warning)
	warned    bool // a time was implausible: the input's one warning is given
}

func newFieldParser(pl *plan, name string, opts readerOptions) fieldParser {
	return fieldParser{plan: *pl, file: name, onWarning: opts.OnWarning}
}

// shape makes row fit the schema.
func (p *fieldParser) shape(row *columns.Row) {
	if len(row.Dims) != len(p.dimFields) {
		row.Dims = make([][]string, len(p.dimFields))
	}
	if len(row.Metrics) != len(p.kinds) {
		row.Metrics = make([]columns.Value, len(p.kinds))
	}
}

func (p *fieldParser) errf(column, format string, args ...any) *RowError {
	return &RowError{File: p.file, Line: p.line, Column: column, Reason: fmt.Sprintf(format, args...)}
}

func (p *fieldParser) setTime(row *columns.Row, s string, null bool) error {
	if null || s == "" {
		return p.errf(p.timeField, "missing time")
	}
	t, err := p.parseTime(s)
	if err != nil {
		return p.errf(p.timeField, "%v", err)
	}
	return p.acceptTime(row, t, s)
}

// acceptTime sets the row's time to t, read from the text s, after the range check (and the
// input's one warning of an implausible time).
func (p *fieldParser) acceptTime(row *columns.Row, t int64, s string) error {
	if t < columns.MinTime || t > columns.MaxTime {
		return p.errf(p.timeField, "time %q out of range (%d..%d milliseconds since the epoch)", s, columns.MinTime, columns.MaxTime)
	}
	if (t < plausibleMin || t > plausibleMax) && !p.warned {
		p.warned = true
		p.warn(s, t)
	}
	row.Time = t
	return nil
}

// The plausible event times: years 1900 to 2199. A time outside gets a warning (once per
// input): it is valid, but most likely read in the wrong unit.
var (
	plausibleMin = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	plausibleMax = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() - 1
)

// epochUnits are the epoch time formats, with the milliseconds of one unit.
var epochUnits = []struct {
	name   string
	millis float64
}{{"seconds", 1e3}, {"millis", 1}, {"micros", 1e-3}, {"nanos", 1e-6}}

// warn reports time t, read from s, as implausible.
func (p *fieldParser) warn(s string, t int64) {
	if p.onWarning == nil {
		return
	}
	format := strings.ToLower(p.sp.timestamp.Format)
	switch format {
	case "":
		format = "millis"
	case "posix":
		format = "seconds"
	}
	msg := fmt.Sprintf("time %q read as %s is in year %d, outside %d..%d", s, format,
		time.UnixMilli(t).UTC().Year(), 1900, 2199)
	hint := "check the data and timestamp.format"
	for _, u := range epochUnits {
		if u.name != format {
			continue
		}
		// The largest unit that makes the time plausible (a smaller one gives a time in 1970).
		for _, v := range epochUnits {
			m := float64(t) / u.millis * v.millis
			if v.name != format && float64(plausibleMin) <= m && m <= float64(plausibleMax) {
				hint = fmt.Sprintf("are the times in %s? (set timestamp.format)", v.name)
				break
			}
		}
	}
	p.onWarning(Warning{File: p.file, Line: p.line, Column: p.timeField,
		Message: msg + ": " + hint + "; this warning is given once per input"})
}

// checkValues rejects a dimension value longer than a segment holds, and a multi-value row
// of more values than a segment holds.
func (p *fieldParser) checkValues(d int, v []string) error {
	if len(v) > maxRowValues {
		return p.errf(p.sp.Schema.Dimensions[d].Name, "%d values, at most %d", len(v), maxRowValues)
	}
	for _, s := range v {
		if len(s) > columns.MaxValueBytes {
			return p.errf(p.sp.Schema.Dimensions[d].Name, "value of %d bytes, at most %d", len(s), columns.MaxValueBytes)
		}
	}
	return nil
}

// maxRowValues is the most values a multi-value dimension holds in one row (the columns
// package's limit on the values of one row, which it does not export).
const maxRowValues = 1 << 20

// setMetric parses metric i from its field's text; empty (or null) is null, or 0 for a
// metric of input.nullAsZero (a sketch adds nothing).
func (p *fieldParser) setMetric(row *columns.Row, i int, s string, null bool) error {
	v := &row.Metrics[i]
	sk := v.Sketch // the row's own sketch, reused from row to row
	*v = columns.Value{}
	switch p.kinds[i] {
	case metCount:
		v.Long = 1
		return nil
	case metNone:
		return nil
	case metLong, metDouble, metSketch: // parsed below
	}
	if null || s == "" {
		v.Null = p.kinds[i] != metSketch && !p.zero[i]
		return nil
	}
	switch p.kinds[i] {
	case metLong:
		n, err := parseLong(s)
		if err != nil {
			return p.errf(p.sp.Schema.Metrics[i].Name, "%v", err)
		}
		v.Long = n
	case metDouble:
		f, err := parseDouble(s)
		if err != nil {
			return p.errf(p.sp.Schema.Metrics[i].Name, "%v", err)
		}
		v.Double = f
	case metSketch:
		v.Sketch = rowSketch(sk)
		v.Sketch.Insert([]byte(s))
	case metCount, metNone: // set above
	}
	return nil
}

// rowSketch returns sk emptied, or a new sketch when sk is nil: each row keeps its own sketch
// (rows are parsed ahead of the Builder, which clones a row's sketch when it adds the row).
func rowSketch(sk *hyperloglog.Sketch) *hyperloglog.Sketch {
	if sk == nil {
		return hyperloglog.New()
	}
	sk.Reset()
	return sk
}
