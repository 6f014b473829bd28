package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
)

// writeFiles writes name -> content into dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
}

// readFiles reads every file of dir.
func readFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range dirNames(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		out[name] = string(b)
	}
	return out
}

// With Replace, a failure anywhere (a row after some segments were written, with and without
// runs; a move of the final step) leaves the old outputs as they were, and nothing new.
func TestRunReplaceKeepsOldOnFailure(t *testing.T) {
	sp, err := ParseSpec([]byte(fmt.Sprintf(genSpecJSON, "")))
	require.NoError(t, err)
	data := genCSV(3, 2000)
	old := map[string]string{"day-0000.seg": "old 0", "day-0001.seg": "old 1", "day-0007.seg": "old 7", "day.seg": "other", "notes.txt": "mine"}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		in   []Input
		o    Options
		move func(string) error
		want string
	}{
		{"bad row after segments", []Input{csvInput("a.csv", data), csvInput("b.csv", "ts,page,tags,body,added,d,user\n1,p,,,x,,\n")},
			Options{RowsPerSegment: 500}, nil, `b.csv:2: column added: not an integer: "x"`},
		{"bad row after runs", []Input{csvInput("a.csv", data), csvInput("b.csv", "ts,page,tags,body,added,d,user\n1,p,,,x,,\n")},
			Options{RowsPerSegment: 900, MaxRowsInMemory: 100, MaxFanIn: 3}, nil, `b.csv:2: column added: not an integer: "x"`},
		{"second move fails", []Input{csvInput("a.csv", data)}, Options{RowsPerSegment: 500},
			func(p string) error {
				if strings.HasSuffix(p, "day-0001.seg") {
					return boom
				}
				return nil
			}, "boom"},
		{"moving a stale member out fails", []Input{csvInput("a.csv", data)}, Options{RowsPerSegment: 500},
			func(p string) error {
				if strings.HasSuffix(p, "day-0007.seg") {
					return boom
				}
				return nil
			}, "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, tmp := t.TempDir(), t.TempDir()
			writeFiles(t, dir, old)
			testHookMove = tc.move
			defer func() { testHookMove = nil }()
			o := tc.o
			o.Out, o.TmpDir, o.Durability, o.Replace = filepath.Join(dir, "day.seg"), tmp, noSync, true
			res, err := Run(context.Background(), sp, tc.in, o)
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, res.Segments)
			require.Equal(t, old, readFiles(t, dir), "the old outputs, as they were, and nothing else")
			require.Empty(t, dirNames(t, tmp))
		})
	}
}

// A complete ingest with Replace and RowsPerSegment replaces the series whole: old members
// past the new count are removed and listed; files outside the series stay.
func TestRunReplaceSeries(t *testing.T) {
	sp, err := ParseSpec([]byte(hourSpec))
	require.NoError(t, err)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"day-0000.seg": "old 0", "day-0003.seg": "old 3", "day-00004.seg": "not ours",
		"day-12345.seg": "old 12345", "day.seg": "other", "day-0001.seg.bak": "mine", "day-x.seg": "mine"})
	out := filepath.Join(dir, "day.seg")

	existing, err := ExistingOutputs(out, 2)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "day-0000.seg"), filepath.Join(dir, "day-0003.seg"), filepath.Join(dir, "day-12345.seg")}, existing)
	existing, err = ExistingOutputs(out, 0)
	require.NoError(t, err)
	require.Equal(t, []string{out}, existing)

	// Without Replace, any member of the series is an error, before anything is read.
	_, err = Run(context.Background(), sp, []Input{{Name: "a.csv", open: func() (io.ReadCloser, error) { panic("read") }}},
		Options{Out: out, RowsPerSegment: 2, Durability: noSync})
	require.ErrorIs(t, err, fs.ErrExist)
	require.ErrorContains(t, err, "day-0000.seg")
	require.NoError(t, os.Remove(filepath.Join(dir, "day-0000.seg")))
	_, err = Run(context.Background(), sp, []Input{csvInput("a.csv", hourCSV)}, Options{Out: out, RowsPerSegment: 2, Durability: noSync})
	require.ErrorIs(t, err, fs.ErrExist)
	require.ErrorContains(t, err, "day-0003.seg")

	res, err := Run(context.Background(), sp, []Input{csvInput("a.csv", hourCSV)}, Options{Out: out, RowsPerSegment: 2, Durability: noSync, Replace: true})
	require.NoError(t, err)
	require.Len(t, res.Segments, 2)
	require.Equal(t, []string{filepath.Join(dir, "day-0003.seg"), filepath.Join(dir, "day-12345.seg")}, res.Removed)
	require.Equal(t, []string{"day-0000.seg", "day-00004.seg", "day-0001.seg", "day-0001.seg.bak", "day-x.seg", "day.seg"}, dirNames(t, dir))
	require.Len(t, segRows(t, filepath.Join(dir, "day-0001.seg")), 2)
}

// An input that is an output, under any name, is refused before anything is written.
func TestRunInputIsOutput(t *testing.T) {
	sp, err := ParseSpec([]byte(hourSpec))
	require.NoError(t, err)
	dir := t.TempDir()
	in := filepath.Join(dir, "a.csv")
	require.NoError(t, os.WriteFile(in, []byte(hourCSV), 0o644))
	require.NoError(t, os.Symlink("a.csv", filepath.Join(dir, "link.seg")))
	require.NoError(t, os.Link(in, filepath.Join(dir, "hard.seg")))
	require.NoError(t, os.Link(in, filepath.Join(dir, "day-0002.seg")))
	input := []Input{{Name: "a.csv", Path: in, Format: CSV, open: func() (io.ReadCloser, error) { return openFile(context.Background(), in) }}}
	for _, o := range []Options{
		{Out: in}, {Out: filepath.Join(dir, "link.seg")}, {Out: filepath.Join(dir, "hard.seg")},
		{Out: filepath.Join(dir, "day.seg"), RowsPerSegment: 1},
	} {
		o.Replace, o.Durability = true, noSync
		_, err := Run(context.Background(), sp, input, o)
		require.ErrorIs(t, err, ErrInvalid, o.Out)
		require.ErrorContains(t, err, "is the output")
		require.ErrorContains(t, err, "(the same file)")
		b, err := os.ReadFile(in)
		require.NoError(t, err)
		require.Equal(t, hourCSV, string(b))
	}
	require.Equal(t, []string{"a.csv", "day-0002.seg", "hard.seg", "link.seg"}, dirNames(t, dir))

	// A directory named like an output is never moved nor removed.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "day-0009.seg", "keep"), 0o755))
	require.NoError(t, os.Remove(filepath.Join(dir, "day-0002.seg")))
	_, err = Run(context.Background(), sp, input, Options{Out: filepath.Join(dir, "day.seg"), RowsPerSegment: 1, Replace: true, Durability: noSync})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "day-0009.seg is a directory")
	require.DirExists(t, filepath.Join(dir, "day-0009.seg", "keep"))
}

// Over a thousand tiny runs merge with at most MaxFanIn open at once, in phases, giving the
// rows of an ingest without runs.
func TestRunBoundedFanIn(t *testing.T) {
	sp, err := ParseSpec([]byte(fmt.Sprintf(genSpecJSON, `, "rollup": true, "granularity": "minute"`)))
	require.NoError(t, err)
	dir, tmp := t.TempDir(), t.TempDir()
	for _, tc := range []struct{ rows, fan int }{{1500, 16}, {100, 2}} {
		data := genCSV(5, tc.rows)
		one := filepath.Join(dir, fmt.Sprint("one-", tc.fan, ".seg"))
		_, err := Run(context.Background(), sp, []Input{csvInput("a.csv", data)}, Options{Out: one, Durability: noSync})
		require.NoError(t, err)
		maxOpen, merges := 0, 0
		testHookRunsOpen = func(n int) { maxOpen, merges = max(maxOpen, n), merges+1 }
		out := filepath.Join(dir, fmt.Sprint(tc.fan, ".seg"))
		res, err := Run(context.Background(), sp, []Input{csvInput("a.csv", data)}, Options{Out: out,
			TmpDir: tmp, Medium: medium.NewHeap(), Durability: noSync, MaxRowsInMemory: 1, MaxFanIn: tc.fan})
		testHookRunsOpen = nil
		require.NoError(t, err)
		require.Equal(t, tc.rows-1, res.runs) // the last row is merged from the Builder, no run
		require.Equal(t, tc.fan, maxOpen, "runs open at once")
		require.Greater(t, merges, tc.rows/tc.fan, "merged in phases")
		require.Equal(t, segRows(t, one), segRows(t, out))
		require.Empty(t, dirNames(t, tmp))
	}
	_, err = Run(context.Background(), sp, []Input{csvInput("a.csv", "")}, Options{Out: filepath.Join(dir, "x.seg"), MaxFanIn: 1})
	require.ErrorIs(t, err, ErrInvalid)
}

// Without Replace, an output created by someone else after the check is never overwritten:
// the ingest fails saying it exists, and takes its other outputs back.
func TestRunNoReplaceRace(t *testing.T) {
	sp, err := ParseSpec([]byte(hourSpec))
	require.NoError(t, err)
	dir := t.TempDir()
	testHookMove = func(p string) error {
		if strings.HasSuffix(p, "day-0001.seg") {
			return os.WriteFile(p, []byte("theirs"), 0o644)
		}
		return nil
	}
	defer func() { testHookMove = nil }()
	_, err = Run(context.Background(), sp, []Input{csvInput("a.csv", hourCSV)}, Options{Out: filepath.Join(dir, "day.seg"), RowsPerSegment: 2, Durability: noSync})
	require.ErrorIs(t, err, fs.ErrExist)
	require.Equal(t, map[string]string{"day-0001.seg": "theirs"}, readFiles(t, dir))
}

// Options.Compression is the outputs' codec, whether the rows go straight to the output, or
// through runs merged in phases (MaxFanIn 2); anything but the four compressions is invalid.
func TestRunCompression(t *testing.T) {
	sp, err := ParseSpec([]byte(fmt.Sprintf(genSpecJSON, "")))
	require.NoError(t, err)
	dir := t.TempDir()
	data := genCSV(7, 20_000)
	codecs := func(path string) columns.ChunkCodecs {
		seg, err := columns.Open(path)
		require.NoError(t, err)
		defer seg.Close()
		var all columns.ChunkCodecs
		for i := range seg.Info().Parts {
			c, _, err := seg.PartCodecs(i)
			require.NoError(t, err)
			all.None, all.S2, all.Zstd = all.None+c.None, all.S2+c.S2, all.Zstd+c.Zstd
		}
		return all
	}
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"straight", Options{}},
		{"runs", Options{MaxRowsInMemory: 3000, MaxFanIn: 2}},
	} {
		var rows []int64
		for _, comp := range []columns.Compression{columns.CompressionDefault, columns.CompressionZstd, columns.CompressionNone} {
			o := tc.opts
			o.Out = filepath.Join(dir, fmt.Sprintf("%s-%s.seg", tc.name, comp))
			o.Durability, o.Compression = noSync, comp
			res, err := Run(context.Background(), sp, []Input{csvInput("a.csv", data)}, o)
			require.NoError(t, err)
			if tc.name == "runs" {
				require.Greater(t, res.runs, 2, "merged in phases")
			}
			c := codecs(o.Out)
			switch comp {
			case columns.CompressionDefault:
				require.Positive(t, c.S2, "%s: %+v", tc.name, c)
				require.Zero(t, c.Zstd, "%s: %+v", tc.name, c)
			case columns.CompressionZstd:
				require.Positive(t, c.Zstd, "%s: %+v", tc.name, c)
				require.Zero(t, c.S2, "%s: %+v", tc.name, c)
			case columns.CompressionNone:
				require.Zero(t, c.Zstd+c.S2, "%s: %+v", tc.name, c)
			case columns.CompressionS2:
				t.Fatal("written with the default, not s2 by name")
			}
			rows = append(rows, res.Segments[0].Rows)
		}
		require.Equal(t, rows[0], rows[1])
		require.Equal(t, rows[0], rows[2])
	}
	_, err = Run(context.Background(), sp, []Input{csvInput("a.csv", data)}, Options{Out: filepath.Join(dir, "x.seg"), Compression: 99})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "want none, s2 or zstd")
}
