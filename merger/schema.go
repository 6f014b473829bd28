package merger

import (
	"fmt"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/internal/schema"
)

// outputSchema merges the inputs' schemas into the output's: their union (schema.Union, the
// conflict rules queries apply too), with
//   - dimensions: dims in that order when not nil, else the union's (first seen first);
//   - rollup and granularity from the options.
func outputSchema(schemas []columns.Schema, name func(int) string, dims []string, rollup bool, gran columns.Granularity) (columns.Schema, error) {
	out, err := schema.Union(schemas, name)
	if err != nil {
		return columns.Schema{}, fmt.Errorf("merger: %w", err)
	}
	if dims != nil {
		ordered := make([]columns.Dimension, 0, len(dims))
		seen := map[string]bool{}
		for _, n := range dims {
			k := out.Dimension(n)
			if k < 0 {
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
