package merger

import "github.com/writeout/writeout/columns/agg"

// exactSum is agg.ExactSum under the names the aggregation code here used before it moved to
// columns/agg; it goes once that code calls the agg kernels directly.
type exactSum struct{ s agg.ExactSum }

func (e *exactSum) add(x float64)     { e.s.Add(x) }
func (e *exactSum) merge(o *exactSum) { e.s.Merge(&o.s) }
func (e *exactSum) value() float64    { return e.s.Value() }
func (e *exactSum) reset()            { e.s.Reset() }
