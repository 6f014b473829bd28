package colwrite_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/medium"
)

// TestDoor writes a segment through the door columns registered, and reads it back.
func TestDoor(t *testing.T) {
	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "page"}, {Name: "url", Raw: true}},
		Metrics: []columns.Metric{
			{Name: "added", Aggregator: agg.LongSum},
			{Name: "delta", Aggregator: agg.DoubleSum},
			{Name: "users", Aggregator: agg.HyperUnique, Field: "user"},
		},
	}
	w, err := colwrite.New(schema, colwrite.Options{Medium: medium.NewHeap(), Compression: columns.CompressionZstd})
	require.NoError(t, err)
	tw, err := w.Time()
	require.NoError(t, err)
	page, err := w.Dim("page")
	require.NoError(t, err)
	url, err := w.Raw("url")
	require.NoError(t, err)
	added, err := w.Long("added")
	require.NoError(t, err)
	delta, err := w.Double("delta")
	require.NoError(t, err)
	users, err := w.Sketch("users")
	require.NoError(t, err)

	main, err := page.AddValue("Main")
	require.NoError(t, err)
	talk, err := page.AddValue("Talk")
	require.NoError(t, err)
	require.Equal(t, 2, page.Cardinality())
	require.NoError(t, tw.AppendValues([]int64{1, 2, 3}))
	require.NoError(t, page.AppendSingleIDs([]uint32{main, talk, main}))
	for _, u := range []string{"/a", "/b"} {
		require.NoError(t, url.Append(u))
	}
	require.NoError(t, url.AppendNull())
	require.NoError(t, added.AppendValues([]int64{10, 20, 30}))
	require.NoError(t, delta.AppendValues([]float64{0.5, 1.5, 2.5}))
	for range 3 {
		require.NoError(t, users.Append(nil))
	}
	run, err := page.NewBitmapRun(main)
	require.NoError(t, err)
	require.NoError(t, run.AddRows([]uint32{0, 2}))
	require.NoError(t, run.AddRows([]uint32{1}))
	require.NoError(t, page.WriteBitmapRun(run))

	var buf bytes.Buffer
	info, err := w.FinishTo(&buf)
	require.NoError(t, err)
	require.Equal(t, 3, info.Rows)
	seg, err := columns.NewSegment(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	require.NoError(t, seg.Verify())
	dc, err := seg.Dim("page")
	require.NoError(t, err)
	bm, err := dc.Bitmap(talk)
	require.NoError(t, err)
	require.Equal(t, []uint32{1}, bm.ToArray())
	r, err := seg.ReadRow(2)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"Main"}, nil}, r.Dims)
	require.Equal(t, int64(30), r.Metrics[0].Long)
	require.Equal(t, 2.5, r.Metrics[1].Double)
	require.NoError(t, w.Abort(), "Abort after Finish")
}

// TestDoorErrors: bad options and a run from another writer are refused with errors wrapping
// columns.ErrInvalid; a column of the wrong kind with one wrapping ErrSchema.
func TestDoorErrors(t *testing.T) {
	require.NoError(t, colwrite.Check(colwrite.Options{}))
	require.ErrorIs(t, colwrite.Check(colwrite.Options{ChunkRows: 1 << 20}), columns.ErrInvalid)
	require.ErrorIs(t, colwrite.Check(colwrite.Options{Compression: 99}), columns.ErrInvalid)

	schema := columns.Schema{Dimensions: []columns.Dimension{{Name: "d"}}}
	_, err := colwrite.New(schema, colwrite.Options{ChunkRows: -1})
	require.ErrorIs(t, err, columns.ErrInvalid)
	_, err = colwrite.New(columns.Schema{Dimensions: []columns.Dimension{{Name: "__time"}}}, colwrite.Options{})
	require.Error(t, err)

	open := func() (colwrite.Writer, colwrite.DimWriter) {
		w, err := colwrite.New(schema, colwrite.Options{})
		require.NoError(t, err)
		d, err := w.Dim("d")
		require.NoError(t, err)
		_, err = d.AddValue("a")
		require.NoError(t, err)
		return w, d
	}
	w1, d1 := open()
	w2, d2 := open()
	_, err = w1.Raw("d")
	require.ErrorIs(t, err, columns.ErrSchema)
	_, err = w1.Long("d")
	require.ErrorIs(t, err, columns.ErrSchema)
	run, err := d1.NewBitmapRun(0)
	require.NoError(t, err)
	require.ErrorIs(t, d2.WriteBitmapRun(nil), columns.ErrInvalid)
	require.ErrorIs(t, d2.WriteBitmapRun(foreignRun{}), columns.ErrInvalid)
	require.NoError(t, run.AddRows(nil))
	require.NoError(t, w1.Abort())
	require.NoError(t, w2.Abort())
	_, err = w1.Dim("d")
	require.ErrorIs(t, err, columns.ErrState, "after Abort")
}

type foreignRun struct{}

func (foreignRun) AddRows([]uint32) error { return nil }
