package query

import (
	"fmt"
	"slices"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/suggest"
	"github.com/writeout/writeout/merger/internal/schema"
	"github.com/writeout/writeout/merger/query/filter"
)

// inputName names input i in errors.
func (s *Spec) inputName(i int) string {
	if i < len(s.InputNames) && s.InputNames[i] != "" {
		return s.InputNames[i]
	}
	return fmt.Sprintf("input %d", i)
}

// pathNames returns names (a copy) with each input that has no name and is a segment opened
// from a file named by its path.
func pathNames(qs []Queryable, names []string) []string {
	out := slices.Clone(names)
	for i, q := range qs {
		if seg, ok := q.(*columns.Segment); ok && seg != nil && seg.Name() != "" && (i >= len(out) || out[i] == "") {
			for len(out) <= i {
				out = append(out, "")
			}
			out[i] = seg.Name()
		}
	}
	return out
}

// check validates spec against the inputs' schemas, before any row is read, and returns the
// metrics the query aggregates. Queries reject what merges reject: inputs whose schemas
// conflict (schema.Union, the rules Merge applies), and names that are no column of the
// inputs: a group-by or filter dimension in no input, or that is a metric, and a metric in no
// input. A dimension some inputs lack is valid: it is null there.
func check(schemas []columns.Schema, spec *Spec) ([]columns.Metric, error) {
	union, err := schema.Union(schemas, spec.inputName)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	if spec.Granularity > columns.GranularityDay {
		return nil, fmt.Errorf("%w: unknown granularity %d", ErrInvalid, spec.Granularity)
	}
	switch {
	case spec.Period > PeriodYear:
		return nil, fmt.Errorf("%w: unknown period %d", ErrInvalid, spec.Period)
	case spec.Period != PeriodNone && spec.All:
		return nil, fmt.Errorf("%w: period %s and all both set", ErrInvalid, spec.Period)
	case spec.Period != PeriodNone && spec.Granularity != columns.GranularityNone:
		return nil, fmt.Errorf("%w: period %s and granularity %s both set", ErrInvalid, spec.Period, spec.Granularity)
	}
	// metricIn names the first input holding name as a metric.
	metricIn := func(name string) string {
		for i, s := range schemas {
			if s.Metric(name) >= 0 {
				return spec.inputName(i)
			}
		}
		return ""
	}
	seen := map[string]bool{}
	for _, g := range spec.GroupBy {
		if seen[g] {
			return nil, fmt.Errorf("%w: group-by dimension %q listed twice", ErrInvalid, g)
		}
		seen[g] = true
		if in := metricIn(g); in != "" {
			return nil, fmt.Errorf("%w: group-by %q is a metric (in %s), not a dimension", ErrInvalid, g, in)
		}
		if union.Dimension(g) < 0 {
			return nil, fmt.Errorf("%w: group-by dimension %q is in no input%s", ErrInvalid, g, suggest.Hint(g, dimensionNames(union)))
		}
	}
	for _, c := range filter.Columns(spec.Filter) {
		if err := checkFilterColumn(union, c, metricIn); err != nil {
			return nil, err
		}
	}
	if spec.Metrics == nil {
		return union.Metrics, nil
	}
	out := make([]columns.Metric, 0, len(spec.Metrics))
	for _, n := range spec.Metrics {
		k := union.Metric(n)
		if k < 0 {
			if union.Dimension(n) >= 0 {
				return nil, fmt.Errorf("%w: metric %q is a dimension", ErrInvalid, n)
			}
			return nil, fmt.Errorf("%w: no metric %q in the inputs%s", ErrInvalid, n, suggest.Hint(n, metricNames(union)))
		}
		out = append(out, union.Metrics[k])
	}
	return out, nil
}

// checkFilterColumn checks that a filter predicate's column is of a kind it applies to:
// strings compare with dimensions, numbers with long and double metrics, and either kind
// can be null (a sketch metric is never null).
func checkFilterColumn(union columns.Schema, c filter.Column, metricIn func(string) string) error {
	if k := union.Metric(c.Name); k >= 0 {
		m := union.Metrics[k]
		if m.Agg().Type == agg.SketchType {
			return fmt.Errorf("%w: filter %s: %q is a %s sketch metric (in %s); filters compare long and double metrics", ErrInvalid, c.Expr, c.Name, m.Aggregator, metricIn(c.Name))
		}
		if c.Use == filter.UseString {
			return fmt.Errorf("%w: filter %s: %q is a %s metric (in %s); compare it with a number, not a quoted string", ErrInvalid, c.Expr, c.Name, m.ValueType(), metricIn(c.Name))
		}
		return nil
	}
	if union.Dimension(c.Name) < 0 {
		return fmt.Errorf("%w: filter column %q is in no input%s", ErrInvalid, c.Name, suggest.Hint(c.Name, columnNames(union)))
	}
	if c.Use == filter.UseNumber {
		return fmt.Errorf("%w: filter %s: %q is a dimension; compare it with quoted strings (= '...', in ('...')); <, <=, >, >=, between and numbers apply to long and double metrics", ErrInvalid, c.Expr, c.Name)
	}
	return nil
}

// dimensionNames, metricNames and columnNames list a schema's names, for "did you mean".
func dimensionNames(s columns.Schema) []string {
	names := make([]string, len(s.Dimensions))
	for i, d := range s.Dimensions {
		names[i] = d.Name
	}
	return names
}

func metricNames(s columns.Schema) []string {
	names := make([]string, len(s.Metrics))
	for i, m := range s.Metrics {
		names[i] = m.Name
	}
	return names
}

func columnNames(s columns.Schema) []string { return append(dimensionNames(s), metricNames(s)...) }
