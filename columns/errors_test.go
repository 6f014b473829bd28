package columns

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
)

// TestErrorConvention checks the package's one convention on the calls users get wrong: every
// message starts with "columns: ", a bad argument or option wraps ErrInvalid (and so
// medium.ErrInvalid), a call out of order wraps ErrState, a read from a closed segment wraps
// ErrState and medium.ErrClosed.
func TestErrorConvention(t *testing.T) {
	schema := Schema{Dimensions: []Dimension{{Name: "d"}}, Metrics: []Metric{{Name: "n", Type: MetricLong, Aggregator: agg.LongSum}}}
	w, err := newRowsWriter(schema, writerOptions{})
	require.NoError(t, err)
	for i := range 10 {
		require.NoError(t, w.AddRow(Row{Time: int64(i), Dims: [][]string{{"v" + itoa(i%3)}}, Metrics: []Value{{Long: int64(i)}}}))
	}
	var out bytes.Buffer
	_, err = w.FinishTo(&out)
	require.NoError(t, err)
	seg, err := newSegmentBytes(out.Bytes())
	require.NoError(t, err)
	col, err := seg.Dim("d")
	require.NoError(t, err)
	long, err := seg.Long("n")
	require.NoError(t, err)

	f := func(name string, err error, sentinels ...error) {
		t.Helper()
		require.Error(t, err, name)
		require.True(t, strings.HasPrefix(err.Error(), "columns: "), "%s: %q does not start with the package name", name, err)
		for _, s := range sentinels {
			require.ErrorIs(t, err, s, name)
		}
	}
	invalid := []error{ErrInvalid, medium.ErrInvalid}

	_, err = newWriter(schema, writerOptions{ChunkRows: -1})
	f("ChunkRows", err, invalid...)
	_, err = newWriter(schema, writerOptions{ChunkRows: 1 << 20})
	f("ChunkRows too large", err, invalid...)
	_, err = newRowsWriter(schema, writerOptions{Compression: 99})
	f("Compression", err, invalid...)
	f("Validate", checkWriterOptions(writerOptions{Compression: 99}), invalid...)
	require.NoError(t, checkWriterOptions(writerOptions{}))
	_, err = ParseCompression("lz4")
	f("ParseCompression", err, invalid...)
	_, err = NewSegment(nil, 0)
	f("NewSegment", err, invalid...)
	_, err = long.Get(10)
	f("row past the end", err, invalid...)
	_, err = long.Cursor().At(-1)
	f("negative row", err, invalid...)
	_, err = col.Value(uint32(col.Cardinality()))
	f("Value past the cardinality", err, invalid...)
	_, err = col.Bitmap(uint32(col.Cardinality()))
	f("Bitmap past the cardinality", err, invalid...)
	f("EachBitmapRows past the cardinality", col.EachBitmapRows(uint32(col.Cardinality()), nil, func([]uint32) error { return nil }), invalid...)
	_, err = seg.ReadRow(10)
	f("ReadRow past the end", err, invalid...)
	_, err = seg.Dim("nope")
	f("unknown column", err, ErrSchema)

	// Writers fed bad values, or out of order.
	w3, err := newWriter(schema, writerOptions{})
	require.NoError(t, err)
	tw, err := w3.Time()
	require.NoError(t, err)
	require.NoError(t, tw.Append(5))
	f("time going back", tw.Append(4), invalid...)
	dw, err := w3.Dim("d")
	require.NoError(t, err)
	_, err = dw.AddValue("b")
	require.NoError(t, err)
	_, err = dw.AddValue("a")
	f("dictionary out of order", err, invalid...)
	w4, err := newWriter(schema, writerOptions{})
	require.NoError(t, err)
	dw, err = w4.Dim("d")
	require.NoError(t, err)
	_, err = dw.AddValue("a")
	require.NoError(t, err)
	f("id past the cardinality", dw.AppendID(1), invalid...)
	require.NoError(t, w4.Abort())
	require.NoError(t, w3.Abort())

	// A closed segment.
	require.NoError(t, seg.Close())
	_, err = long.Get(0)
	f("read after Close", err, ErrState, medium.ErrClosed)
	f("EachBitmapRows after Close", col.EachBitmapRows(0, nil, func([]uint32) error { return nil }), ErrState, medium.ErrClosed)

	// The sentinels themselves.
	require.True(t, errors.Is(ErrInvalid, medium.ErrInvalid))
	require.False(t, errors.Is(ErrInvalid, ErrState))
	require.Equal(t, "columns: invalid argument", ErrInvalid.Error())
}
