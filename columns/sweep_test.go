package columns

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/faultfs"
)

func TestIsTempName(t *testing.T) {
	f := func(name string, want bool) {
		t.Helper()
		require.Equal(t, want, IsTempName(name), "%q", name)
	}
	f(".writeout-123.tmp", true)
	f(".writeout-4294967295.tmp", true)
	f(".writeout-merge-42.tmp", true)
	f(".writeout-abc.tmp", false)
	f(".writeout-.tmp", false)
	f(".writeout-merge-.tmp", false)
	f(".writeout--1.tmp", false)
	f(".writeout-Merge-1.tmp", false)
	f(".writeout-1.tmpx", false)
	f(".writeout-1.tmp\n", false)
	f("writeout-1.tmp", false)
	f(".writeout-a-b-1.tmp", false)
}

// TestSweepTemp: a sweep removes what it can prove a publication or a merge made (a regular
// file of the pattern, empty or beginning like a segment) and nothing else: not a directory of
// the pattern whatever it holds, not a user's file that happens to have the name.
func TestSweepTemp(t *testing.T) {
	fsys := afero.NewMemMapFs()
	dir := "/segs"
	s, rows := publishRows(t, 5)
	seg := writeRows(t, s, rows, writerOptions{})
	require.NoError(t, fsys.MkdirAll(dir+"/.writeout-77.tmp", 0o755))
	require.NoError(t, afero.WriteFile(fsys, dir+"/.writeout-77.tmp/user-file", []byte("precious"), 0o644))
	files := map[string][]byte{
		".writeout-123.tmp":      nil,         // a reservation, or a publication killed before its first write
		".writeout-456.tmp":      seg[:100],   // a publication killed mid-write
		".writeout-merge-9.tmp":  seg,         // an intermediate segment
		".writeout-789.tmp":      []byte("x"), // a user's file: not ours
		".writeout-790.tmp":      []byte("WOSE"),
		".writeout-abc.tmp":      nil, // not the pattern (digits)
		"seg":                    seg,
		".writeout-.tmpx":        nil,
		"writeout-1.tmp":         nil,
		".writeout-merge-10.tmp": []byte("notes"),
	}
	for n, b := range files {
		require.NoError(t, afero.WriteFile(fsys, filepath.Join(dir, n), b, 0o644))
	}
	removed, err := SweepTemp(fsys, dir)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{dir + "/.writeout-123.tmp", dir + "/.writeout-456.tmp", dir + "/.writeout-merge-9.tmp"}, removed)
	require.Equal(t, []string{".writeout-.tmpx", ".writeout-77.tmp", ".writeout-789.tmp", ".writeout-790.tmp", ".writeout-abc.tmp",
		".writeout-merge-10.tmp", "seg", "writeout-1.tmp"}, listDir(t, fsys, dir))
	require.Equal(t, []string{"user-file"}, listDir(t, fsys, dir+"/.writeout-77.tmp"))
	_, err = SweepTemp(fsys, "/missing")
	require.Error(t, err)

	// A temp file left by a publication that died (here: on an afero.Fs, which has no unnamed
	// files, and whose removal failed) is what the sweep removes.
	ffs := faultfs.New(fsys, faultfs.FailWhen(func(o faultfs.Op) bool { return o.Kind == faultfs.KindRemove || o.Kind == faultfs.KindRename }, syscall.EIO))
	_, err = filledWriter(t, s, rows, writerOptions{}).Finish(dir+"/seg2", PublishOptions{Fs: ffs})
	require.Error(t, err)
	left := listDir(t, fsys, dir)
	require.Len(t, left, 9, "the temp file could not be removed: %v", left)
	removed, err = SweepTemp(fsys, dir)
	require.NoError(t, err)
	require.Len(t, removed, 1)
}
