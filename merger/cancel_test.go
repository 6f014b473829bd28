package merger

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/bench/gen"
	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
)

// TestMergeCancel cancels merges at random points (random delays, and from the Progress
// callback at random row counts): the merge returns within 100 ms of the cancel with an
// error wrapping context.Canceled and leaves the output directory as it was; or, cancelled
// too late, it succeeds with the whole output.
func TestMergeCancel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	inDir := t.TempDir()
	var segs []*columns.Segment
	for i := 0; i < 5; i++ {
		segs = append(segs, genSegment(t, inDir, gen.BasicSeed+int64(i), 20_000))
	}
	// How long a whole merge takes, to spread the cancels over it.
	probeDir := t.TempDir()
	res := mustMerge(t, segs, filepath.Join(probeDir, "probe.seg"), Options{})
	full := res.Total
	t.Logf("a whole merge takes %v", full)

	rounds := 40
	if testing.Short() {
		rounds = 12
	}
	var worst time.Duration
	cancelled, completed := 0, 0
	for r := 0; r < rounds; r++ {
		dir := t.TempDir()
		dst := filepath.Join(dir, "out.seg")
		before := dirNames(t, dir)
		opts := Options{Durability: medium.Durability{Sync: []medium.SyncMode{medium.SyncNone, medium.SyncOutput}[rng.IntN(2)]}}
		if rng.IntN(3) == 0 {
			opts.MaxFanIn = 2
		}
		if rng.IntN(3) == 0 {
			opts.Rollup, opts.Granularity = true, columns.GranularityHour
		}
		ctx, cancel := context.WithCancel(context.Background())
		var cancelAt time.Time
		if rng.IntN(2) == 0 {
			delay := time.Duration(rng.Int64N(int64(full) * 12 / 10))
			timer := time.AfterFunc(delay, func() { cancelAt = time.Now(); cancel() })
			defer timer.Stop()
		} else {
			at := rng.Int64N(5 * 20_000)
			opts.ProgressRows = 1 + rng.IntN(5000)
			opts.Progress = func(p Progress) {
				if p.RowsDone >= at && cancelAt.IsZero() {
					cancelAt = time.Now()
					cancel()
				}
			}
		}
		_, err := Merge(ctx, segs, dst, opts)
		end := time.Now()
		cancel()
		if err == nil {
			completed++
			checkBitmaps(t, openSeg(t, dst))
			continue
		}
		cancelled++
		require.True(t, errors.Is(err, context.Canceled), "round %d: %v", r, err)
		require.False(t, cancelAt.IsZero())
		took := end.Sub(cancelAt)
		worst = max(worst, took)
		require.Less(t, took, 100*time.Millisecond, "round %d: returned %v after the cancel", r, took)
		require.Equal(t, before, dirNames(t, dir), "round %d: directory changed", r)
	}
	t.Logf("%d cancelled, %d completed before the cancel took effect; slowest return after a cancel: %v", cancelled, completed, worst)
	require.Greater(t, cancelled, rounds/2)
}
