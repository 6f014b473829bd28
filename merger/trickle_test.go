package merger

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/internal/sys/systrace"
	"github.com/writeout/writeout/medium"
)

// TestMergeTrickle: under Durability.TrickleBytes every file a merge writes is paced with the
// trickle sequence: the default medium's file, the intermediate segment (3 inputs, MaxFanIn 2)
// and the output, which alone is fdatasynced, last. Result.Trickles counts every
// sync_file_range call. (It replaces sys.Default for its duration: not parallel.)
func TestMergeTrickle(t *testing.T) {
	const every = 8 << 10
	dir := t.TempDir()
	segs := make([]*columns.Segment, 3)
	for i := range segs {
		segs[i] = genSegment(t, dir, gen.BasicSeed+int64(i), 1500)
	}
	var rec systrace.Recorder
	saved := sys.Default
	rec.Wrap(&sys.Default)
	defer func() { sys.Default = saved }()
	dst := filepath.Join(t.TempDir(), "out.seg")
	res := mustMerge(t, segs, dst, Options{MaxFanIn: 2, Durability: medium.Durability{TrickleBytes: every}})
	sys.Default = saved
	require.Equal(t, 2, res.Phases)

	calls := rec.Calls()
	groups := systrace.ByFile(calls)
	require.GreaterOrEqual(t, len(groups), 2, "the intermediate segment and the output")
	out, inter := groups[len(groups)-1], groups[len(groups)-2]
	require.NoError(t, systrace.Check(out, res.Bytes, every, true), "output")
	require.NoError(t, systrace.Check(inter, res.BytesWritten-res.Bytes, every, false), "intermediate segment")
	for _, g := range groups[:len(groups)-2] {
		require.NoError(t, systrace.Check(g, -1, every, false), "staging medium")
	}
	ranges := 0
	for _, c := range calls {
		if c.Op == "sync_file_range" {
			ranges++
		}
	}
	require.Equal(t, ranges, res.Trickles)
	require.GreaterOrEqual(t, res.Bytes/every, int64(4))
	require.GreaterOrEqual(t, (res.BytesWritten-res.Bytes)/every, int64(4))
	t.Logf("%d files paced, %d sync_file_range calls; output %d bytes, intermediate %d bytes", len(groups), ranges, res.Bytes, res.BytesWritten-res.Bytes)
}
