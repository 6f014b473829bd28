package merger

import (
	"context"
	"fmt"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/internal/source"
)

// dictSink receives the merged dictionary: addNull first when there is a null, then every
// value in strictly increasing order. colwrite.DimWriter is one.
type dictSink interface {
	AddNull() error
	AddValue(v string) (uint32, error)
}

// mergeDictionaries merges sorted dictionaries k-way. dims[i] is input i's dimension, nil
// when the input lacks it; names[i] names it in errors. The merged dictionary has null (id 0) when withNull is set. It
// returns for every input holding the dimension the map from its ids to merged ids (nil for
// the others), and the merged cardinality. A segment input's map comes from source.IDMap: it
// is valid until source.Release of that input, which merge calls when the merge is over.
func mergeDictionaries(ctx context.Context, dims []source.DimSource, names []string, withNull bool, sink dictSink) ([][]uint32, int, error) {
	maps := make([][]uint32, len(dims))
	type head struct {
		in  int
		it  source.DictIterator
		pos uint32 // input id of the current value
		v   string
	}
	var heads []*head
	card := 0
	if withNull {
		if err := sink.AddNull(); err != nil {
			return nil, 0, err
		}
		card = 1
	}
	for i, d := range dims {
		if d == nil {
			continue
		}
		maps[i] = source.IDMap(d, d.Cardinality()) // every entry is written below, or the merge fails
		it := d.Dictionary()
		h := &head{in: i, it: it}
		for {
			if !it.Next() {
				if err := it.Err(); err != nil {
					return nil, 0, fmt.Errorf("merger: %s: %w", names[i], err)
				}
				if int(h.pos) != len(maps[i]) {
					return nil, 0, fmt.Errorf("merger: %s: dictionary holds %d values, cardinality says %d: %w", names[i], h.pos, len(maps[i]), columns.ErrCorrupt)
				}
				h = nil
				break
			}
			if !it.IsNull() {
				h.v = it.Value()
				break
			}
			if !withNull {
				return nil, 0, fmt.Errorf("merger: internal error: null in %s without a merged null", names[i])
			}
			maps[i][h.pos] = 0
			h.pos++
		}
		if h != nil {
			heads = append(heads, h)
		}
	}
	// A binary heap ordered by (value, input).
	less := func(a, b *head) bool {
		if a.v != b.v {
			return a.v < b.v
		}
		return a.in < b.in
	}
	down := func(i int) {
		n := len(heads)
		for {
			l := 2*i + 1
			if l >= n {
				return
			}
			m := l
			if r := l + 1; r < n && less(heads[r], heads[l]) {
				m = r
			}
			if !less(heads[m], heads[i]) {
				return
			}
			heads[i], heads[m] = heads[m], heads[i]
			i = m
		}
	}
	for i := len(heads)/2 - 1; i >= 0; i-- {
		down(i)
	}
	var last string
	var lastID uint32
	have := false
	for n := 0; len(heads) > 0; n++ {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, 0, fmt.Errorf("merger: %w", err)
			}
		}
		h := heads[0]
		if !have || h.v != last {
			id, err := sink.AddValue(h.v)
			if err != nil {
				return nil, 0, err
			}
			last, lastID, have = h.v, id, true
			card++
		}
		maps[h.in][h.pos] = lastID
		h.pos++
		if h.it.Next() {
			v := h.it.Value()
			if h.it.IsNull() || v <= h.v {
				return nil, 0, fmt.Errorf("merger: %s: dictionary not strictly sorted at id %d: %w", names[h.in], h.pos, columns.ErrCorrupt)
			}
			h.v = v
			down(0)
			continue
		}
		if err := h.it.Err(); err != nil {
			return nil, 0, fmt.Errorf("merger: %s: %w", names[h.in], err)
		}
		if int(h.pos) != len(maps[h.in]) {
			return nil, 0, fmt.Errorf("merger: %s: dictionary holds %d values, cardinality says %d: %w", names[h.in], h.pos, len(maps[h.in]), columns.ErrCorrupt)
		}
		heads[0] = heads[len(heads)-1]
		heads = heads[:len(heads)-1]
		down(0)
	}
	return maps, card, nil
}
