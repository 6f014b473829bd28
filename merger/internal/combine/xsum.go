package combine

import "github.com/writeout/writeout/columns/agg"

// Sum is agg.ExactSum, until the callers use the columns/agg kernels directly.
type Sum = agg.ExactSum
