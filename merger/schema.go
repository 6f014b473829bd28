package merger

import (
	"fmt"

	"github.com/writeout/writeout/columns"
)

// outputSchema merges the inputs' schemas into the output's:
//   - dimensions: opts.Dimensions in that order, or the union first seen first; a dimension is
//     multi-value when any input has it multi-value, raw when the inputs have it raw (they must
//     agree), and has a bitmap index only when every input holding it has one;
//   - metrics: the union first seen first; inputs holding the same metric must agree on its
//     aggregator and type;
//   - rollup and granularity from the options.
func outputSchema(schemas []columns.Schema, name func(int) string, dims []string, rollup bool, gran columns.Granularity) (columns.Schema, error) {
	var out columns.Schema
	type origin struct{ input, index int }
	dimAt := map[string]int{}
	dimFrom := map[string]int{}
	metAt := map[string]int{}
	metFrom := map[string]int{}
	for i, s := range schemas {
		for _, d := range s.Dimensions {
			if j, ok := metFrom[d.Name]; ok {
				return columns.Schema{}, fmt.Errorf("%w: %q is a metric in %s and a dimension in %s", ErrSchemaConflict, d.Name, name(j), name(i))
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
				return columns.Schema{}, fmt.Errorf("%w: dimension %q is %s in %s and %s in %s", ErrSchemaConflict, d.Name, rawOrDict(*o), name(dimFrom[d.Name]), rawOrDict(d), name(i))
			}
			o.MultiValue = o.MultiValue || d.MultiValue
			o.NoBitmapIndex = o.NoBitmapIndex || d.NoBitmapIndex
		}
		for _, m := range s.Metrics {
			if j, ok := dimFrom[m.Name]; ok {
				return columns.Schema{}, fmt.Errorf("%w: %q is a dimension in %s and a metric in %s", ErrSchemaConflict, m.Name, name(j), name(i))
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
				return columns.Schema{}, fmt.Errorf("%w: metric %q is %s(%s) in %s and %s(%s) in %s", ErrSchemaConflict, m.Name,
					o.Aggregator, o.ValueType(), name(metFrom[m.Name]), m.Aggregator, m.ValueType(), name(i))
			}
		}
	}
	if dims != nil {
		ordered := make([]columns.Dimension, 0, len(dims))
		seen := map[string]bool{}
		for _, n := range dims {
			k, ok := dimAt[n]
			if !ok {
				return columns.Schema{}, fmt.Errorf("%w: output dimension %q is in no input", ErrInvalid, n)
			}
			if seen[n] {
				return columns.Schema{}, fmt.Errorf("%w: output dimension %q listed twice", ErrInvalid, n)
			}
			seen[n] = true
			ordered = append(ordered, out.Dimensions[k])
		}
		out.Dimensions = ordered
	}
	out.Rollup = rollup
	out.Granularity = gran
	if err := out.Validate(); err != nil {
		return columns.Schema{}, fmt.Errorf("merger: output schema: %w", err)
	}
	return out, nil
}

func rawOrDict(d columns.Dimension) string {
	if d.Raw {
		return "raw"
	}
	return "dictionary-encoded"
}
