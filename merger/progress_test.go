package merger

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
)

// TestMergeProgress: each segment written reports its rows, then its bitmaps, from one
// goroutine, the counts never going back (rows count on over a phase of two groups); the last
// report of the bitmaps step counts every bitmap of the output, and the rows of a phase end at
// every input row of the phase.
func TestMergeProgress(t *testing.T) {
	dir := t.TempDir()
	var segs []*columns.Segment
	for i := range 4 {
		segs = append(segs, genSegment(t, dir, int64(100+i), 20_000))
	}
	var events []Progress
	var inCall atomic.Int32
	dst := filepath.Join(dir, "out.seg")
	res, err := Merge(context.Background(), segs, dst, Options{
		MaxFanIn: 2, ProgressRows: 5000,
		Progress: func(p Progress) {
			require.Equal(t, int32(1), inCall.Add(1), "Progress called concurrently")
			events = append(events, p)
			inCall.Add(-1)
		},
	})
	require.NoError(t, err)
	require.Equal(t, 2, res.Phases)

	out := openSeg(t, dst)
	var outBitmaps int64
	for _, d := range out.Schema().Dimensions {
		if d.Raw || d.NoBitmapIndex {
			continue
		}
		c, err := out.Dim(d.Name)
		require.NoError(t, err)
		outBitmaps += int64(c.Cardinality())
	}

	var last Progress
	bitmapSteps := 0
	for i, p := range events {
		require.Contains(t, []string{StepRows, StepBitmaps}, p.Step)
		if i > 0 && p.Phase == last.Phase {
			require.GreaterOrEqual(t, p.RowsDone, last.RowsDone)
			if p.Step == last.Step && p.Step == StepBitmaps {
				require.GreaterOrEqual(t, p.BitmapsDone, last.BitmapsDone)
			}
		} else if i > 0 {
			require.Equal(t, last.Phase+1, p.Phase)
			require.Equal(t, StepBitmaps, last.Step)
			require.Equal(t, last.RowsTotal, last.RowsDone, "phase %d ends at all its rows", last.Phase)
		}
		require.LessOrEqual(t, p.RowsDone, p.RowsTotal)
		require.LessOrEqual(t, p.BitmapsDone, p.BitmapsTotal)
		if i+1 < len(events) && events[i+1].Step != p.Step && p.Step == StepBitmaps {
			require.Equal(t, p.BitmapsTotal, p.BitmapsDone, "a segment's bitmaps step ends complete")
			require.Positive(t, p.BitmapsTotal)
		}
		if p.Step == StepBitmaps {
			bitmapSteps++
		}
		last = p
	}
	require.Greater(t, bitmapSteps, 2)
	require.Equal(t, int64(80_000), events[0].RowsTotal, "phase 1 reads the 4 inputs, in 2 groups")
	require.Equal(t, 2, last.Phase)
	require.Equal(t, StepBitmaps, last.Step)
	require.Equal(t, outBitmaps, last.BitmapsTotal, "the last phase rebuilds every bitmap of the output")
	require.Equal(t, int64(80_000), last.RowsTotal)
}
