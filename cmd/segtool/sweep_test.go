package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSweepQuotesNames: names are printed quoted, so that a newline in a name (here in the
// directory's) cannot forge a line of output; names with a newline never match a pattern.
func TestSweepQuotesNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a\nremoved \"x\"")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, n := range []string{".writeout-1.tmp", ".writeout-\n2.tmp", "writeout-mmapfile-3\n.tmp"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), nil, 0o644))
	}
	code, out, errs := segtool(t, "sweep", dir)
	require.Equal(t, 0, code, errs)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Equal(t, []string{
		"removed " + strconv.Quote(filepath.Join(dir, ".writeout-1.tmp")),
		"1 leftover file(s) removed from " + strconv.Quote(dir),
	}, lines)
	require.Empty(t, errs)
	require.ElementsMatch(t, []string{".writeout-\n2.tmp", "writeout-mmapfile-3\n.tmp"}, dirNames(t, dir))
}

// TestSweepRunDirs: a directory with ingest's name goes only when everything in it is a run
// that opens as a segment or a temp file of writeout; a symlink named like a run (even to a
// segment), a subdirectory, or a user's file keeps the directory and all it holds.
func TestSweepRunDirs(t *testing.T) {
	dir := t.TempDir()
	gen := t.TempDir()
	mustSegtool(t, "gen", "--rows", "20", "--segments", "1", "--durability", "none", "--out", gen)
	seg, err := os.ReadFile(filepath.Join(gen, "basic-0000.seg"))
	require.NoError(t, err)
	mk := func(d string, files map[string][]byte) {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
		for n, b := range files {
			require.NoError(t, os.WriteFile(filepath.Join(dir, d, n), b, 0o644))
		}
	}
	mk("writeout-ingest-1.tmp", map[string][]byte{"run-000000.seg": seg, "run-000001.seg": seg, ".writeout-9.tmp": seg[:50]})
	mk("writeout-segtool-2.tmp", map[string][]byte{"run-000000.seg": seg})
	mk("writeout-ingest-3.tmp", map[string][]byte{"run-000000.seg": seg[:len(seg)-1]}) // truncated: not a complete run
	mk("writeout-ingest-4.tmp", map[string][]byte{"run-000000.seg": seg})
	require.NoError(t, os.Symlink(filepath.Join(gen, "basic-0000.seg"), filepath.Join(dir, "writeout-ingest-4.tmp", "run-000001.seg")))
	mk("writeout-ingest-5.tmp/sub", map[string][]byte{"run-000000.seg": seg})
	mk("writeout-segtool-6.tmp", map[string][]byte{"run-000000.seg": seg, "my-notes.txt": []byte("mine")})
	mk("writeout-ingest-7.tmp", nil) // empty: nothing in it is not ours
	code, out, errs := segtool(t, "sweep", dir)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "3 leftover file(s) removed from "+dir)
	require.ElementsMatch(t, []string{"writeout-ingest-3.tmp", "writeout-ingest-4.tmp", "writeout-ingest-5.tmp", "writeout-segtool-6.tmp"}, dirNames(t, dir))
	for _, d := range []string{"writeout-ingest-3.tmp", "writeout-ingest-4.tmp", "writeout-ingest-5.tmp", "writeout-segtool-6.tmp"} {
		require.Contains(t, errs, "kept "+strconv.Quote(filepath.Join(dir, d)))
	}
	got, err := os.ReadFile(filepath.Join(dir, "writeout-segtool-6.tmp", "my-notes.txt"))
	require.NoError(t, err)
	require.Equal(t, "mine", string(got))
	require.Len(t, dirNames(t, filepath.Join(dir, "writeout-segtool-6.tmp")), 2, "nothing removed from a directory that is kept")
	require.Len(t, dirNames(t, filepath.Join(dir, "writeout-ingest-4.tmp")), 2)
}
