package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/ingest"
)

func sha(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// gen writes the bytes it wrote when it held every row in memory (segtool at a0bede2, before
// issue 34), whatever memory it is given now.
func TestGenGoldenBytes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want map[string]string
	}{
		{[]string{"--rows", "20000"}, map[string]string{
			"basic-0000.seg": "c85155c2b69fdc8b3363e29c0df45a56f869ffa4164ad0a342b529a9b7dbe9ca"}},
		{[]string{"--rows", "20000", "--max-bytes-in-memory", "1048576"}, map[string]string{
			"basic-0000.seg": "c85155c2b69fdc8b3363e29c0df45a56f869ffa4164ad0a342b529a9b7dbe9ca"}},
		{[]string{"--rows", "20000", "--rollup", "--granularity", "hour", "--max-bytes-in-memory", "1048576"}, map[string]string{
			"basic-0000.seg": "219143b8cd969f2e80782842de222c3218eeee7329e9b8b873dd5378867e2829"}},
		{[]string{"--schema", "wide", "--rows", "3000", "--seed", "7", "--medium", "heap"}, map[string]string{
			"wide-0000.seg": "e9133e481acc89ea59cf77d70da31de53051bdd3eb4d838fbe8b2b8ca0e51b52"}},
		{[]string{"--rows", "2000", "--segments", "2", "--seed", "5"}, map[string]string{
			"basic-0000.seg": "016ab428922895a768a977ba6c8d97c7a2363e4696b44764f5e1864699deef57",
			"basic-0001.seg": "d6848f1c9aee5ec7b02c3f9116860e38e83e8d4774100b9bf9ca5d2101a100d5"}},
		// The time flags' defaults, given: the same bytes.
		{[]string{"--rows", "2000", "--segments", "2", "--seed", "5", "--start", "2000-01-01T00:00:00Z", "--span", "1d", "--step", "0s"}, map[string]string{
			"basic-0000.seg": "016ab428922895a768a977ba6c8d97c7a2363e4696b44764f5e1864699deef57",
			"basic-0001.seg": "d6848f1c9aee5ec7b02c3f9116860e38e83e8d4774100b9bf9ca5d2101a100d5"}},
	} {
		dir := t.TempDir()
		mustSegtool(t, append([]string{"gen", "--durability", "none", "--out", dir}, tc.args...)...)
		got := map[string]string{}
		for name := range tc.want {
			got[name] = sha(t, filepath.Join(dir, name))
		}
		require.Equal(t, tc.want, got, strings.Join(tc.args, " "))
		require.Len(t, dirNames(t, dir), len(tc.want), "no temp file left")
	}
}

// gen streams: the rows it generates are held in memory only up to ingest's bounds, each
// bound reached writing a run (with MaxRowsInMemory 2,000, a run every 2,000 rows but the last
// ones, merged from memory), and the segment is byte for byte the one a Builder holding every
// row persists.
func TestGenStreams(t *testing.T) {
	const rows, inMemory = 30_000, 2_000
	dir := t.TempDir()
	for _, rollup := range []bool{false, true} {
		gran := columns.GranularityNone
		if rollup {
			gran = columns.GranularityMinute
		}
		streamed := filepath.Join(dir, "streamed.seg")
		res, err := genRun(context.Background(), streamed, genSource{schema: "basic", seed: gen.BasicSeed, rows: rows}, rollup, gran,
			ingest.Options{Durability: medium.Durability{Sync: medium.SyncNone}, Replace: true, MaxRowsInMemory: inMemory, MemoryLimit: -1})
		require.NoError(t, err)
		if !rollup { // rollup makes a Builder hold fewer rows than it took: fewer runs
			require.Equal(t, rows/inMemory-1, res.Runs())
		} else {
			require.Positive(t, res.Runs())
		}

		// The reference: every row in one Builder, persisted once.
		g, err := newGenerator(genSource{schema: "basic", seed: gen.BasicSeed, rows: rows})
		require.NoError(t, err)
		m, err := newGenMapping(g, rollup, gran)
		require.NoError(t, err)
		b, err := merger.NewBuilder(m.schema, merger.BuilderOptions{})
		require.NoError(t, err)
		var src gen.Row
		r := columns.Row{Dims: make([][]string, len(m.schema.Dimensions)), Metrics: make([]columns.Value, len(m.schema.Metrics))}
		for g.Next(&src) {
			m.convert(&src, &r)
			require.NoError(t, b.Add(r))
		}
		whole := filepath.Join(dir, "whole.seg")
		pres, err := b.Persist(context.Background(), whole, merger.PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}, Replace: true})
		require.NoError(t, err)
		require.Equal(t, pres.RowsOut, res.Segments[0].Rows)
		require.Equal(t, sha(t, whole), sha(t, streamed), "rollup %v", rollup)
	}
}
