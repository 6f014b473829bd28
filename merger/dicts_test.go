package merger

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/internal/source"
)

// fakeDim is a dimension whose dictionary holds vals (the null first when null is set) while
// it claims card values: only what mergeDictionaries reads.
type fakeDim struct {
	source.DimSource
	card int
	null bool
	vals []string
}

func (d fakeDim) Cardinality() int { return d.card }
func (d fakeDim) Dictionary() source.DictIterator {
	return &fakeIter{null: d.null, vals: d.vals, i: -1}
}

type fakeIter struct {
	null bool
	vals []string
	i    int
}

func (it *fakeIter) Next() bool {
	it.i++
	return it.i < len(it.vals)+boolInt(it.null)
}
func (it *fakeIter) IsNull() bool { return it.null && it.i == 0 }
func (it *fakeIter) Err() error   { return nil }
func (it *fakeIter) Value() string {
	if it.IsNull() {
		return ""
	}
	return it.vals[it.i-boolInt(it.null)]
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// recordSink collects the merged dictionary.
type recordSink struct {
	null bool
	vals []string
}

func (s *recordSink) AddNull() error { s.null = true; return nil }
func (s *recordSink) AddValue(v string) (uint32, error) {
	s.vals = append(s.vals, v)
	return uint32(len(s.vals) - 1 + boolInt(s.null)), nil
}

func TestMergeDictionaries(t *testing.T) {
	dims := []source.DimSource{
		fakeDim{card: 3, null: true, vals: []string{"a", "c"}},
		nil,
		fakeDim{card: 3, vals: []string{"b", "c", "d"}},
	}
	var sink recordSink
	maps, card, err := mergeDictionaries(context.Background(), dims, []string{"in0", "in1", "in2"}, true, &sink)
	require.NoError(t, err)
	require.Equal(t, 5, card)
	require.Equal(t, []string{"a", "b", "c", "d"}, sink.vals)
	require.Equal(t, [][]uint32{{0, 1, 3}, nil, {2, 3, 4}}, maps)

	// A dictionary with fewer values than its cardinality is corrupt, whether it ends before
	// the merge starts or during it: the map would keep entries never written.
	for _, d := range []fakeDim{{card: 2, null: true}, {card: 4, vals: []string{"x", "y"}}} {
		_, _, err := mergeDictionaries(context.Background(), []source.DimSource{d}, []string{"in0"}, true, &recordSink{})
		require.ErrorIs(t, err, columns.ErrCorrupt)
	}
}
