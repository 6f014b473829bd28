package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

// flipSchema has every part kind: dictionary dimensions with bitmaps (single- and multi-value,
// with nulls), one without a bitmap index, a raw one; long and double metrics with the side
// parts times (first/last) and tails (doubleSum); a hyperUnique sketch. (columns'
// readcheck_test.go damages the same shapes through the library.)
func flipSchema() columns.Schema {
	return columns.Schema{
		Dimensions: []columns.Dimension{
			{Name: "page"},
			{Name: "tags", MultiValue: true},
			{Name: "body", Raw: true},
			{Name: "country", NoBitmapIndex: true},
		},
		Metrics: []columns.Metric{
			{Name: "count", Aggregator: "count"},
			{Name: "added", Aggregator: "longSum", Field: "added"},
			{Name: "firstAdded", Aggregator: "longFirst", Field: "added"},
			{Name: "delta", Aggregator: "doubleSum", Field: "delta"},
			{Name: "lastDelta", Aggregator: "doubleLast", Field: "delta"},
			{Name: "users", Aggregator: "hyperUnique", Field: "user"},
		},
	}
}

// writeFlipSegment writes n rows of flipSchema, varied by seed, with null and multi-value rows.
func writeFlipSegment(t *testing.T, n, seed int, opts colwrite.Options) []byte {
	pages := []string{"Paris", "Berlin", "Rome"}
	tags := [][]string{{"a", "b"}, nil, {"c"}, {"b", "c", "a"}}
	countries := []string{"de", "fr", "it"}
	b, err := merger.NewBuilder(flipSchema(), merger.BuilderOptions{})
	require.NoError(t, err)
	defer b.Close()
	hllAgg, _ := agg.Lookup("hyperUnique")
	hll, err := hllAgg.SketchesOf(nil)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		k := i + seed
		r := columns.Row{Time: 1_700_000_000_000 + int64(i/2)*60_000, Dims: make([][]string, 4), Metrics: make([]columns.Value, 6)}
		if k%4 != 3 {
			r.Dims[0] = []string{pages[k%3]}
		}
		r.Dims[1] = tags[k%4]
		if k%5 != 0 {
			r.Dims[2] = []string{fmt.Sprintf("body %d", k*7)}
		}
		r.Dims[3] = []string{countries[(k/2)%3]}
		r.Metrics[0].Long = 1
		r.Metrics[1].Long = int64(k*13 - 40)
		r.Metrics[2].Long = int64(k * 3)
		r.Metrics[3].Double = float64(k)*0.1 + 1e-3
		r.Metrics[4].Double = float64(k) / 3
		sk := hll.New()
		require.NoError(t, sk.Insert(fmt.Appendf(nil, "user%d", k%6)))
		r.Metrics[5].Sketch = sk
		require.NoError(t, b.Add(r))
	}
	dst := filepath.Join(t.TempDir(), "flip.seg")
	_, err = b.Persist(context.Background(), dst, merger.PersistOptions{ChunkRows: opts.ChunkRows, Compression: opts.Compression,
		Durability: medium.Durability{Sync: medium.SyncNone}})
	require.NoError(t, err)
	data, err := os.ReadFile(dst)
	require.NoError(t, err)
	return data
}

// flipOutcome counts what the flips did to one command.
type flipOutcome struct {
	openFail, readFail, same int
	// per part (column/kind): flips that failed at the first read, and flips that gave the
	// intact output
	readFails, sames map[string]int
}

// TestFlipEveryByteCommands is issue 11's bar 1 for the commands: every byte of three small
// segments (every part kind; no compression, zstd, s2) flipped in turn, and query (a filtered
// grouped aggregate over dimensions and metrics, a group-by over every dimension) and dump run
// on each copy. Each run either exits 0 printing exactly what the intact file gives, or exits
// non-zero saying corrupt and naming the column and part of the flipped byte (and the file),
// having printed at most a prefix of the intact output. A flip in the header, the footer or
// the trailer fails. A part a command reads fails it for every flip in it: no flip in a part
// gives the intact output while another in the same part fails at the read-path check.
func TestFlipEveryByteCommands(t *testing.T) {
	segs := []struct {
		name string
		b    []byte
	}{
		{"none", writeFlipSegment(t, 12, 0, colwrite.Options{ChunkRows: 4, Compression: columns.CompressionNone})},
		{"zstd", writeFlipSegment(t, 16, 1, colwrite.Options{ChunkRows: 5, Compression: columns.CompressionZstd})},
		{"s2", writeFlipSegment(t, 10, 2, colwrite.Options{ChunkRows: 3, Compression: columns.CompressionS2})},
	}
	for _, sg := range segs {
		t.Run(sg.name, func(t *testing.T) {
			t.Parallel() // three at most: the flips of one segment run in turn
			flipCommands(t, sg.name, sg.b)
		})
	}
}

// flipCommands flips every byte of one segment in turn and runs the commands on each copy.
func flipCommands(t *testing.T, name string, good []byte) {
	path := filepath.Join(t.TempDir(), "flip.seg")
	runs := []struct {
		name string
		args []string
	}{
		{"query-filtered", []string{"query", "--filter", "page = 'Paris' or tags in ('a', 'c') or country is null", "--group-by", "country", path}},
		{"query-all-dims", []string{"query", "--group-by", "page,tags,body,country", "--granularity", "minute", path}},
		{"dump", []string{"dump", path}},
	}
	require.NoError(t, os.WriteFile(path, good, 0o644))
	seg, err := columns.Open(path)
	require.NoError(t, err)
	require.NoError(t, seg.Verify())
	parts := seg.Info().Parts
	require.NoError(t, seg.Close())
	want := make([]string, len(runs))
	outcomes := make([]flipOutcome, len(runs))
	for k, r := range runs {
		want[k] = mustSegtool(t, r.args...)
		require.Greater(t, strings.Count(want[k], "\n"), 2, "%s: a few lines", r.name)
		outcomes[k] = flipOutcome{readFails: map[string]int{}, sames: map[string]int{}}
	}
	// The copy is damaged in place, one byte written and restored at a time.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	put := func(i int, c byte) {
		_, err := f.WriteAt([]byte{c}, int64(i))
		require.NoError(t, err)
	}
	for i := range good {
		x := []byte{0x01, 0x80, 0xff, 0x10}[i%4]
		put(i, good[i]^x)
		pk := -1
		for j, p := range parts {
			if int64(i) >= p.Offset && int64(i) < p.Offset+p.Length {
				pk = j
			}
		}
		for k, r := range runs {
			what := fmt.Sprintf("%s: flip %#x at %d: segtool %s", name, x, i, r.name)
			code, out, errs := segtool(t, r.args...)
			o := &outcomes[k]
			if code == 0 {
				require.Equal(t, want[k], out, "%s exits 0: it must print what the intact file gives", what)
				require.GreaterOrEqual(t, pk, 0, "%s: a flip in the header, footer or trailer must fail", what)
				o.same++
				o.sames[partKey(parts[pk])]++
				continue
			}
			require.Equal(t, exitFailure, code, "%s: %s", what, errs)
			require.True(t, strings.HasPrefix(want[k], out), "%s fails, yet printed what the intact file does not:\n%s", what, out)
			if pk < 0 {
				require.Regexp(t, `corrupt|version`, errs, what)
				o.openFail++
				continue
			}
			p := parts[pk]
			require.Contains(t, errs, "corrupt", what)
			require.Contains(t, errs, fmt.Sprintf("column %q part %s: CRC ", p.Column, p.Kind), what)
			if strings.Contains(errs, "columns: "+path+": column ") {
				o.readFail++
				o.readFails[partKey(p)]++
			} else {
				require.Contains(t, errs, "columns: open "+path+": ", what)
				o.openFail++
			}
		}
		put(i, good[i])
	}
	for k, r := range runs {
		o := outcomes[k]
		for p, n := range o.sames {
			require.Zero(t, o.readFails[p], "%s: %s: part %s gave the intact output %d times, and failed a read check %d times", name, r.name, p, n, o.readFails[p])
		}
		t.Logf("%s (%d bytes) segtool %s: %d failed at open, %d at a read check, %d printed the intact output (flips in parts it does not read: %s)",
			name, len(good), r.name, o.openFail, o.readFail, o.same, keys(o.sames))
	}
}

func partKey(p segfmt.PartInfo) string { return p.Column + "/" + p.Kind.String() }

func keys(m map[string]int) string {
	var ks []string
	for k, n := range m {
		ks = append(ks, fmt.Sprintf("%s:%d", k, n))
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}
