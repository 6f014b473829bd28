// Package combine holds the combining rules that merges, rollups and queries share: Long
// combines two long values by their aggregator, Sum adds doubles exactly.
package combine

import "github.com/writeout/writeout/columns"

// Long combines a and b by agg: the smaller for longMin, the larger for longMax, the sum for
// count and longSum.
func Long(agg columns.Aggregator, a, b int64) int64 {
	switch agg {
	case columns.AggLongMin:
		return min(a, b)
	case columns.AggLongMax:
		return max(a, b)
	}
	return a + b // count, longSum
}
