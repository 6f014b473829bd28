package source

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/merger/internal/fixture"
)

// TestRelease: Release hands every reader a segment source gave out back its buffers, forgets
// them, and leaves them usable: reads after it equal reads before it.
func TestRelease(t *testing.T) {
	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "d"}, {Name: "r", Raw: true}},
		Metrics:    []columns.Metric{{Name: "n", Aggregator: agg.LongSum, Field: "n"}},
	}
	w, err := fixture.NewRowWriter(schema, colwrite.Options{ChunkRows: 64, Compression: columns.CompressionZstd})
	require.NoError(t, err)
	const rows = 1000
	for i := range rows {
		v := strconv.Itoa(i % 37)
		require.NoError(t, w.AddRow(columns.Row{Time: int64(i), Dims: [][]string{{v}, {v + "-raw"}},
			Metrics: []columns.Value{{Long: int64(i * 3)}}}))
	}
	var buf bytes.Buffer
	_, err = w.FinishTo(&buf)
	require.NoError(t, err)
	seg, err := columns.NewSegment(bytes.NewReader(buf.Bytes()), int64(len(buf.Bytes())))
	require.NoError(t, err)
	defer func() { require.NoError(t, seg.Close()) }()

	src := OfSegment(seg)
	times, longs, raw := src.Times(), src.Long("n"), src.Raw("r")
	dim, err := src.Dim("d")
	require.NoError(t, err)
	ids := dim.Cursor()
	read := func() string {
		var b bytes.Buffer
		for r := 0; r < rows; r++ {
			first, tv, err := times.Chunk(r)
			require.NoError(t, err)
			_, lv, err := longs.Chunk(r)
			require.NoError(t, err)
			f2, iv, _, err := ids.Chunk(r)
			require.NoError(t, err)
			rv, _, err := raw.Bytes(r)
			require.NoError(t, err)
			b.WriteString(strconv.FormatInt(tv[r-first], 10) + " " + strconv.FormatInt(lv[r-first], 10) + " " +
				strconv.Itoa(int(iv[r-f2])) + " " + string(rv) + "\n")
		}
		return b.String()
	}
	before := read()
	require.Len(t, src.(*segSource).readers, 4)
	Release(src, nil)
	require.Empty(t, src.(*segSource).readers)
	require.Equal(t, before, read())
	require.Contains(t, before, "999 2997 ")
	Release(src) // again: nothing left to release
}

// TestReleasePages: a segment source's pages go through the segment (nothing to do for one
// read with ReadAt), or through the function given to OfSegmentPages; other sources have none.
func TestReleasePages(t *testing.T) {
	w, err := fixture.NewRowWriter(columns.Schema{Dimensions: []columns.Dimension{{Name: "d"}}}, colwrite.Options{})
	require.NoError(t, err)
	require.NoError(t, w.AddRow(columns.Row{Time: 1, Dims: [][]string{{"x"}}}))
	var buf bytes.Buffer
	_, err = w.FinishTo(&buf)
	require.NoError(t, err)
	seg, err := columns.NewSegment(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	defer func() { require.NoError(t, seg.Close()) }()

	require.NoError(t, ReleasePages(OfSegment(seg)))
	calls := 0
	src := OfSegmentPages(seg, func() error { calls++; return nil })
	require.NoError(t, ReleasePages(src))
	require.NoError(t, ReleasePages(src))
	require.Equal(t, 2, calls)
	require.Same(t, seg, SegmentOf(src))
	require.NoError(t, ReleasePages(nil))
}
