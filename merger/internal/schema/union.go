// Package schema holds the one set of rules by which the schemas of several inputs combine,
// which merges and queries both apply: Union.
package schema

import (
	"errors"
	"fmt"

	"github.com/writeout/writeout/columns"
)

// ErrConflict marks inputs whose schemas cannot be combined: a metric whose aggregator or type
// differs between inputs, a dimension raw in one input and dictionary-encoded in another, or a
// name that is a dimension in one input and a metric in another. Package merger exports it as
// ErrSchemaConflict and package merger/query as its ErrSchemaConflict: the same value.
var ErrConflict = errors.New("input schemas conflict")

// Union combines the inputs' schemas; name(i) names input i in errors. The result has
//   - the union of the dimensions, first seen first, each of type string; a dimension is
//     multi-value when any input has it multi-value, raw when the inputs have it raw (they
//     must agree), and has a bitmap index only when every input holding it has one;
//   - the union of the metrics, first seen first, each of its aggregator's value type;
//     inputs holding the same metric must agree on its aggregator and type;
//   - no rollup and no granularity.
//
// A conflict is an error wrapping ErrConflict that names the column and both inputs.
func Union(schemas []columns.Schema, name func(int) string) (columns.Schema, error) {
	if len(schemas) == 1 { // nothing to conflict with (a query of one input: no maps to build)
		s := schemas[0].Normalized()
		return columns.Schema{Dimensions: s.Dimensions, Metrics: s.Metrics}, nil
	}
	var out columns.Schema
	dimAt := map[string]int{}
	dimFrom := map[string]int{}
	metAt := map[string]int{}
	metFrom := map[string]int{}
	for i, s := range schemas {
		for _, d := range s.Dimensions {
			if j, ok := metFrom[d.Name]; ok {
				return columns.Schema{}, fmt.Errorf("%w: %q is a metric in %s and a dimension in %s", ErrConflict, d.Name, name(j), name(i))
			}
			k, ok := dimAt[d.Name]
			if !ok {
				d.Type = columns.DimString
				dimAt[d.Name] = len(out.Dimensions)
				dimFrom[d.Name] = i
				out.Dimensions = append(out.Dimensions, d)
				continue
			}
			o := &out.Dimensions[k]
			if o.Raw != d.Raw {
				return columns.Schema{}, fmt.Errorf("%w: dimension %q is %s in %s and %s in %s", ErrConflict, d.Name, rawOrDict(*o), name(dimFrom[d.Name]), rawOrDict(d), name(i))
			}
			o.MultiValue = o.MultiValue || d.MultiValue
			o.NoBitmapIndex = o.NoBitmapIndex || d.NoBitmapIndex
		}
		for _, m := range s.Metrics {
			if j, ok := dimFrom[m.Name]; ok {
				return columns.Schema{}, fmt.Errorf("%w: %q is a dimension in %s and a metric in %s", ErrConflict, m.Name, name(j), name(i))
			}
			k, ok := metAt[m.Name]
			if !ok {
				m.Type = m.ValueType()
				metAt[m.Name] = len(out.Metrics)
				metFrom[m.Name] = i
				out.Metrics = append(out.Metrics, m)
				continue
			}
			o := out.Metrics[k]
			if o.Aggregator != m.Aggregator || o.ValueType() != m.ValueType() {
				return columns.Schema{}, fmt.Errorf("%w: metric %q is %s(%s) in %s and %s(%s) in %s", ErrConflict, m.Name,
					o.Aggregator, o.ValueType(), name(metFrom[m.Name]), m.Aggregator, m.ValueType(), name(i))
			}
			if ob, mb := metricJSON(o), metricJSON(m); ob != mb { // a sketch's parameters
				return columns.Schema{}, fmt.Errorf("%w: metric %q is %s in %s and %s in %s", ErrConflict, m.Name, ob, name(metFrom[m.Name]), mb, name(i))
			}
		}
	}
	return out, nil
}

func rawOrDict(d columns.Dimension) string {
	if d.Raw {
		return "raw"
	}
	return "dictionary-encoded"
}

// metricJSON returns m's schema entry without its name and type, as JSON: what two inputs'
// metrics of one name must agree on besides the aggregator (Field aside: it names the input).
func metricJSON(m columns.Metric) string {
	m.Name, m.Type, m.Field, m.InputSketch = "", "", "", false
	b, err := m.MarshalJSON()
	if err != nil {
		return err.Error()
	}
	return string(b)
}
