package columns

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// timesGoodSlow is timeRows' rule for one chunk, row by row: what timesGood must agree with.
func timesGoodSlow(vals []int64, start int, prev int64, iv Interval, g Granularity) bool {
	for k, v := range vals {
		if (start+k > 0 && v < prev) || !g.validTime(v) || !iv.Contains(v) || g.Truncate(v) != v {
			return false
		}
		prev = v
	}
	return true
}

// TestTimesGood: timesGood, the quick pass of the time check, agrees with the row-by-row
// rules on chunks of sorted times with one time changed (seeded, the seed logged).
func TestTimesGood(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	goods, bads := 0, 0
	for _, g := range []Granularity{GranularityNone, GranularityMinute, GranularityHour} {
		w := g.Millis()
		for range 3000 {
			base := int64(1_700_000_000_000) / w * w
			vals := make([]int64, 1+rng.IntN(40))
			v := base + int64(rng.IntN(5))*w
			for i := range vals {
				vals[i] = v
				if rng.IntN(3) == 0 {
					v += int64(1+rng.IntN(3)) * w
				}
			}
			iv := Interval{Start: base, End: vals[len(vals)-1] + w}
			start, prev := 0, int64(0)
			if rng.IntN(2) == 0 {
				start, prev = 100, vals[0]-int64(rng.IntN(2))*w
			}
			switch rng.IntN(6) {
			case 0: // unchanged
			case 1: // one time moved by a little
				vals[rng.IntN(len(vals))] += int64(rng.IntN(3) - 1)
			case 2: // one time moved by buckets
				vals[rng.IntN(len(vals))] += int64(rng.IntN(5)-2) * w
			case 3: // the interval shrunk
				iv.End -= w
			case 4: // the interval moved on
				iv.Start += w
			default: // the previous chunk ended later
				prev += w
			}
			want := timesGoodSlow(vals, start, prev, iv, g)
			require.Equal(t, want, timesGood(vals, start, prev, iv, g), "granularity %s, start %d, prev %d, interval %v, %v", g, start, prev, iv, vals)
			if want {
				goods++
			} else {
				bads++
			}
		}
	}
	t.Logf("%d good chunks, %d bad", goods, bads)
}
