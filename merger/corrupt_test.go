package merger

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
)

// Flipped bytes in an input (which Open does not check: part CRCs are Verify's) make Merge fail
// with an error or succeed, never panic, and leave no file behind. (merger/query's
// TestQueryCorruptInput does the same for queries.)
func TestMergeCorruptInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 31))
	rc := newRandCase(rng, 2, 300)
	for len(rc.Rows[0]) == 0 {
		rc = newRandCase(rng, 2, 300)
	}
	dir := t.TempDir()
	good := writeSegment(t, dir, "good.seg", rc.Schemas[1], rc.Rows[1])
	writeSegment(t, dir, "src.seg", rc.Schemas[0], rc.Rows[0])
	orig, err := os.ReadFile(filepath.Join(dir, "src.seg"))
	require.NoError(t, err)
	flips := 300
	if testing.Short() || raceEnabled {
		flips = 60
	}
	failed := 0
	for f := 0; f < flips; f++ {
		b := append([]byte(nil), orig...)
		at := rng.IntN(len(b))
		b[at] ^= byte(1 + rng.IntN(255))
		seg, err := columns.NewSegment(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			continue // Open caught it
		}
		out := t.TempDir()
		_, err = Merge(t.Context(), []*columns.Segment{seg, good}, filepath.Join(out, "o.seg"),
			Options{Rollup: f%2 == 0, Durability: medium.Durability{Sync: medium.SyncNone}})
		if err != nil {
			failed++
			require.Empty(t, dirNames(t, out), "flip at %d", at)
		}
		require.NoError(t, seg.Close())
	}
	t.Logf("%d of %d flips made the merge fail", failed, flips)
}
