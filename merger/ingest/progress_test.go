package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Options.Progress counts the input bytes as they are read, each input whole at its size (a
// file's as it is on the disk, gzipped or not; a stream's bytes), then the segment's write.
func TestRunProgress(t *testing.T) {
	sp, err := ParseSpec([]byte(pqSpecJSON))
	require.NoError(t, err)
	dir := t.TempDir()
	pqs, csvPath, ndjson := pqSplitFiles(t, dir, 5, 20_000, 1000, 20_000)
	nd, err := os.ReadFile(ndjson)
	require.NoError(t, err)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, err = zw.Write(nd)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	gz := ndjson + ".gz"
	require.NoError(t, os.WriteFile(gz, zb.Bytes(), 0o644))
	csvData, err := os.ReadFile(csvPath)
	require.NoError(t, err)

	var want int64
	for _, p := range []string{pqs[0], csvPath, gz} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		want += fi.Size()
	}
	want += int64(len(csvData))
	pqFile, err := os.Open(pqs[0]) // a file given as a Reader, as standard input is
	require.NoError(t, err)
	defer pqFile.Close()
	fi, err := pqFile.Stat()
	require.NoError(t, err)
	want += fi.Size()
	inputs := []Input{{Path: pqs[0]}, {Path: csvPath}, {Path: gz},
		// A stream: no size, no io.ReaderAt.
		{Name: "stdin", Format: CSV, Reader: io.MultiReader(bytes.NewReader(csvData))},
		{Name: "pq", Reader: pqFile}}
	var reports []Progress
	res, err := Run(context.Background(), sp, inputs, Options{Out: filepath.Join(dir, "out.seg"), Durability: noSync,
		MaxRowsInMemory: 8000, Progress: func(p Progress) { reports = append(reports, p) }})
	require.NoError(t, err)
	require.Equal(t, int64(100_000), res.InputRows)
	require.Positive(t, res.Runs(), "rows spilled as runs, merged at the end")

	lastRead := -1
	var prev int64
	mid := 0
	for i, p := range reports {
		require.LessOrEqual(t, prev, p.Bytes, "report %d: %+v", i, p)
		require.LessOrEqual(t, p.Bytes, want, "report %d: %+v", i, p)
		prev = p.Bytes
		if p.Bytes > 0 && p.Bytes < want {
			mid++
		}
		switch p.Step {
		case StepRead:
			lastRead = i
		case StepWrite:
			require.LessOrEqual(t, p.WriteDone, p.WriteTotal, "report %d: %+v", i, p)
		default:
			t.Fatalf("report %d: step %q", i, p.Step)
		}
	}
	require.Greater(t, mid, 4, "bytes counted as the inputs are read: %+v", reports)
	require.Equal(t, Progress{Step: StepRead, Bytes: want, Rows: 100_000}, reports[lastRead])
	require.Less(t, lastRead, len(reports)-1, "the segment's write comes after the reading")
	last := reports[len(reports)-1]
	require.Equal(t, StepWrite, last.Step)
	require.Positive(t, last.WriteTotal)
	require.Equal(t, last.WriteTotal, last.WriteDone)
}
