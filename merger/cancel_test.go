package merger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/medium"
)

// TestMergeCancel cancels merges at random points (random delays, and from the Progress
// callback at random row counts): the merge returns with an error wrapping context.Canceled
// and leaves the output directory as it was; or, cancelled too late, it succeeds with the
// whole output. How soon it returns is BenchmarkMergeCancel's (the bar: 100 ms).
func TestMergeCancel(t *testing.T) {
	rows, rounds := 15_000, 30
	if testing.Short() || raceEnabled {
		rounds = 10
	}
	if raceEnabled {
		rows = 5_000
	}
	lat, cancelled := cancelRounds(t, rows, rounds)
	require.Greater(t, cancelled, rounds/2)
	t.Logf("return after a cancel: median %v, p95 %v, max %v", lat[len(lat)/2], lat[(len(lat)*95+99)/100-1], lat[len(lat)-1])
}

// BenchmarkMergeCancel reports how soon a cancelled merge returns: the median, 95th percentile
// and worst of 30 rounds' latencies per op (the bar: a p95 under 100 ms).
func BenchmarkMergeCancel(b *testing.B) {
	var p50, p95, worst float64
	for b.Loop() {
		lat, _ := cancelRounds(b, 15_000, 30)
		p50 += float64(lat[len(lat)/2].Microseconds()) / 1000
		p95 += float64(lat[(len(lat)*95+99)/100-1].Microseconds()) / 1000
		worst = max(worst, float64(lat[len(lat)-1].Microseconds())/1000)
	}
	b.ReportMetric(p50/float64(b.N), "p50-ms")
	b.ReportMetric(p95/float64(b.N), "p95-ms")
	b.ReportMetric(worst, "max-ms")
}

// cancelRounds merges 5 inputs of rows rows, cancelling each of rounds merges at a random
// point, checks every outcome (cancelled cleanly, or complete), and returns the sorted
// latencies from cancel to return of the cancelled merges, and their count.
func cancelRounds(t testing.TB, rows, rounds int) ([]time.Duration, int) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	inDir := t.TempDir()
	var segs []*columns.Segment
	for i := 0; i < 5; i++ {
		segs = append(segs, genSegment(t, inDir, gen.BasicSeed+int64(i), rows))
	}
	// How long a whole merge takes, to spread the cancels over it: the fastest of three, since
	// the first merge of a process is slower (cold caches, and several times so under -race),
	// and a too long estimate would put most timed cancels after the merge's end.
	var full time.Duration
	for i := range 3 {
		probeDir := t.TempDir()
		res := mustMerge(t, segs, filepath.Join(probeDir, "probe.seg"), Options{})
		if i == 0 || res.Total < full {
			full = res.Total
		}
	}
	t.Logf("a whole merge takes %v", full)

	var lat []time.Duration
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
			at := rng.Int64N(5 * int64(rows))
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
		lat = append(lat, took)
		if took >= 100*time.Millisecond {
			t.Logf("round %d: returned %v after the cancel: %v (fan-in %d)", r, took, err, opts.MaxFanIn)
		}
		require.Equal(t, before, dirNames(t, dir), "round %d: directory changed", r)
	}
	require.NotEmpty(t, lat, "no merge was cancelled")
	slices.Sort(lat)
	t.Logf("%d cancelled, %d completed before the cancel took effect", cancelled, completed)
	return lat, cancelled
}

// TestMergeCancelWhileJudging: a merge cancelled while it builds the bitmaps, as its inputs'
// deferred checks are judged on a goroutine of its own, returns once that goroutine is done:
// the caller closes the inputs (here those of a first phase, intermediate segments) as soon
// as Merge returns, and the judging reads them.
func TestMergeCancelWhileJudging(t *testing.T) {
	dir := t.TempDir()
	var segs []*columns.Segment
	for i := range 4 {
		segs = append(segs, genSegment(t, dir, gen.BasicSeed+int64(i), 20_000))
	}
	for _, fan := range []int{0, 2} {
		ctx, cancel := context.WithCancel(t.Context())
		_, err := Merge(ctx, segs, filepath.Join(dir, fmt.Sprintf("out%d.seg", fan)), Options{
			MaxFanIn: fan, Durability: medium.Durability{Sync: medium.SyncNone},
			Progress: func(p Progress) {
				if p.Step == StepBitmaps {
					cancel()
				}
			},
		})
		cancel()
		require.ErrorIs(t, err, context.Canceled, "fan-in %d", fan)
		require.Zero(t, judgesRunning.Load(), "fan-in %d: a judging goroutine outlived the merge", fan)
	}
}
