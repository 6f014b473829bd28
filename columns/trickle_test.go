package columns

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/internal/sys/systrace"
	"github.com/writeout/writeout/medium"
)

// TestTrickleSequence pins the trickle scheme through the system-call table: on a publish with
// TrickleBytes, each full range N is submitted with sync_file_range(WRITE) alone, then the range
// N-1 (one interval behind, never N) is waited for with WAIT_BEFORE, the ranges are contiguous
// from 0 and cover every full interval of the file, and the one fdatasync comes last. Only the
// sync_file_range calls made are counted as trickles.
func TestTrickleSequence(t *testing.T) {
	s, rows := publishRows(t, 400)
	for _, tc := range []struct {
		name  string
		every int64
		d     medium.SyncMode
		into  bool // PublishOptions.File, as Merge's intermediate segments
	}{
		{"output 4KiB", 4096, medium.SyncOutput, false},
		{"output unaligned", 3000, medium.SyncOutput, false},
		{"output none", 8192, medium.SyncNone, false},
		{"output all", 4096, medium.SyncAll, false},
		{"into none", 4096, medium.SyncNone, true},
		{"into output", 5000, medium.SyncOutput, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec systrace.Recorder
			w := withCalls(filledWriter(t, s, rows, writerOptions{}), rec.Wrap)
			dir := t.TempDir()
			dst := filepath.Join(dir, "seg")
			opts := PublishOptions{Durability: medium.Durability{Sync: tc.d, TrickleBytes: tc.every}}
			if tc.into {
				f, err := os.CreateTemp(dir, "into-*")
				require.NoError(t, err)
				t.Cleanup(func() { _ = f.Close() })
				opts.File = f
			}
			info, err := w.Finish(dst, opts)
			require.NoError(t, err)
			calls := rec.Calls()
			groups := systrace.ByFile(calls)
			require.Len(t, groups, 1, "%v", calls)
			require.NoError(t, systrace.Check(groups[0], info.Size, tc.every, tc.d != medium.SyncNone))
			ranges := 0
			for _, c := range groups[0] {
				if c.Op == "sync_file_range" {
					ranges++
				}
			}
			require.Equal(t, ranges, info.Trickles)
			require.GreaterOrEqual(t, info.Size/tc.every, int64(4), "the test needs several intervals")
			t.Logf("%d bytes every %d: %d sync_file_range calls, then %v", info.Size, tc.every, ranges, groups[0][len(groups[0])-1].Op)
		})
	}
}

// TestTrickleUnsupported: where sync_file_range is missing (the probe says so) or the file
// system refuses it (EINVAL on the first call), the publish paces with an fdatasync every
// interval instead, counted as syncs and not as trickles.
func TestTrickleUnsupported(t *testing.T) {
	s, rows := publishRows(t, 400)
	const every = 4096
	for _, tc := range []struct {
		name string
		edit func(c *sys.Calls)
	}{
		{"probe", func(c *sys.Calls) { c.TrickleSupported = func() bool { return false } }},
		{"refused", func(c *sys.Calls) {
			c.SyncFileRange = func(*os.File, int64, int64, int) error {
				return fmt.Errorf("sync_file_range: %w", sys.ErrUnsupported)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec systrace.Recorder
			w := withCalls(filledWriter(t, s, rows, writerOptions{}), func(c *sys.Calls) { tc.edit(c); rec.Wrap(c) })
			dst := filepath.Join(t.TempDir(), "seg")
			info, err := w.Finish(dst, PublishOptions{Durability: medium.Durability{TrickleBytes: every}})
			require.NoError(t, err)
			require.Zero(t, info.Trickles)
			fdatasyncs := 0
			for _, c := range rec.Calls() {
				if c.Op == "fdatasync" {
					fdatasyncs++
				}
			}
			// One per full interval, the final one, and the directory's fsync.
			require.Equal(t, int(info.Size/every)+1, fdatasyncs)
			require.Equal(t, fdatasyncs+1, info.Syncs)
		})
	}
}
