package columns

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// TestPublishSyncAllReadsBack: with SyncAll the synced output's cached pages are dropped and
// the file is read back and checked before it is named; a byte that differs on the device
// (simulated by changing the file where its pages are dropped) fails the publish with
// ErrCorrupt and leaves nothing. SyncOutput does not read back.
func TestPublishSyncAllReadsBack(t *testing.T) {
	s, rows := publishRows(t, 200)
	want := writeRows(t, s, rows, writerOptions{})
	type drop struct{ off, n int64 }
	run := func(t *testing.T, d medium.Durability, flip int64) ([]drop, string, error) {
		dir := t.TempDir()
		dst := filepath.Join(dir, "seg")
		var drops []drop
		calls := sys.Default
		synced := false
		calls.Fdatasync = func(f *os.File) error { synced = true; return sys.Default.Fdatasync(f) }
		calls.DropCache = func(f *os.File, off, n int64) error {
			require.True(t, synced, "pages dropped before the fdatasync")
			drops = append(drops, drop{off, n})
			if flip >= 0 {
				b := make([]byte, 1)
				_, err := f.ReadAt(b, flip)
				require.NoError(t, err)
				b[0] ^= 0x20
				_, err = f.WriteAt(b, flip)
				require.NoError(t, err)
			}
			return sys.Default.DropCache(f, off, n)
		}
		w := filledWriter(t, s, rows, writerOptions{})
		w.calls = &calls
		_, err := w.Finish(dst, PublishOptions{Durability: d})
		return drops, dir, err
	}

	t.Run("good", func(t *testing.T) {
		drops, dir, err := run(t, medium.Durability{Sync: medium.SyncAll}, -1)
		require.NoError(t, err)
		require.Equal(t, []drop{{0, int64(len(want))}}, drops, "the whole file's pages dropped once")
		got, err := os.ReadFile(filepath.Join(dir, "seg"))
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
	// A flipped byte in a part, in the footer and in the trailer: each fails the publish.
	for _, off := range []int64{int64(len(want)) / 3, int64(len(want)) - 40, int64(len(want)) - 2} {
		drops, dir, err := run(t, medium.Durability{Sync: medium.SyncAll}, off)
		require.ErrorIs(t, err, ErrCorrupt, "byte %d", off)
		require.ErrorContains(t, err, "read back")
		require.Len(t, drops, 1)
		require.Empty(t, listDir(t, afero.NewOsFs(), dir), "nothing published, nothing left")
	}
	// SyncOutput and SyncNone never read back.
	for _, d := range []medium.Durability{{}, {Sync: medium.SyncNone}} {
		drops, _, err := run(t, d, int64(len(want))/3)
		require.NoError(t, err)
		require.Empty(t, drops, "%s", d.Sync)
	}
}

// TestPublishSyncAllReadsBackFs: on an afero.Fs the file is read back through it.
func TestPublishSyncAllReadsBackFs(t *testing.T) {
	s, rows := publishRows(t, 50)
	fsys := afero.NewMemMapFs()
	require.NoError(t, fsys.MkdirAll("/d", 0o755))
	info, err := filledWriter(t, s, rows, writerOptions{}).Finish("/d/seg", PublishOptions{Fs: fsys, Durability: medium.Durability{Sync: medium.SyncAll}})
	require.NoError(t, err)
	got, err := afero.ReadFile(fsys, "/d/seg")
	require.NoError(t, err)
	require.Equal(t, writeRows(t, s, rows, writerOptions{}), got)
	require.Equal(t, int64(len(got)), info.Size)
}
