package ingest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/agg"
)

// A rolled-up longSum whose exact sum does not fit an int64 fails the ingest with
// agg.ErrOverflow naming the metric, whether the rows meet in the Builder or in the merge of
// runs; nothing is written. One back in range on the way is exact.
func TestRunLongSumOverflow(t *testing.T) {
	sp, err := ParseSpec([]byte(`{"dimensions": [{"name": "k"}], "metrics": [{"name": "added", "aggregator": "longSum", "fieldName": "v"}],
	  "rollup": true, "granularity": "day"}`))
	require.NoError(t, err)
	for _, maxRows := range []int{0, 1} {
		dir := t.TempDir()
		out := filepath.Join(dir, "s.seg")
		_, err := Run(context.Background(), sp, []Input{csvInput("s.csv", "__time,k,v\n1,a,9223372036854775807\n2,a,1\n")},
			Options{Out: out, Durability: noSync, MaxRowsInMemory: maxRows})
		require.ErrorIs(t, err, agg.ErrOverflow, "max rows %d", maxRows)
		t.Log(err)
		require.ErrorContains(t, err, `metric "added"`)
		require.ErrorContains(t, err, "the exact sum 9223372036854775808 is outside the int64 range")
		require.Empty(t, dirNames(t, dir))
		_, err = Run(context.Background(), sp, []Input{csvInput("s.csv", "__time,k,v\n1,a,9223372036854775807\n2,a,1\n3,a,-2\n")},
			Options{Out: out, Durability: noSync, MaxRowsInMemory: maxRows})
		require.NoError(t, err, "max rows %d", maxRows)
		require.Equal(t, []string{`0 ["a"] 9223372036854775806`}, segRows(t, out))
	}
}
