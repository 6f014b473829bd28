package query

import (
	"slices"

	"github.com/writeout/writeout/merger/internal/source"
)

// groupDim reads one group-by dimension of the source: local ids are the source's ids of a
// dictionary dimension, or interned raw values; missing means null everywhere.
type groupDim struct {
	ds     source.DimSource
	ids    *source.IDCache
	raw    source.RawReader
	intern map[string]uint32
	values []GroupValue // raw: local id -> value
	null   [1]uint32
	// dictionary values read so far, by id (a window's groups ask for the same few often)
	known []GroupValue
	have  []bool
}

func (g *groupDim) rowIDs(row int) ([]uint32, error) {
	switch {
	case g.ids != nil:
		return g.ids.At(row)
	case g.raw != nil:
		b, ok, err := g.raw.Bytes(row)
		if err != nil {
			return nil, err
		}
		if !ok {
			g.null[0] = 0
			return g.null[:], nil
		}
		id, found := g.intern[string(b)]
		if !found {
			id = uint32(len(g.values))
			v := string(b)
			g.intern[v] = id
			g.values = append(g.values, GroupValue{Value: v})
		}
		g.null[0] = id
		return g.null[:], nil
	}
	g.null[0] = 0
	return g.null[:], nil
}

func (g *groupDim) value(id uint32) (GroupValue, error) {
	switch {
	case g.ds != nil:
		if int(id) < len(g.have) && g.have[id] {
			return g.known[id], nil
		}
		v, null, err := g.ds.Value(id)
		if err != nil {
			return GroupValue{}, err
		}
		gv := GroupValue{Null: null, Value: v}
		if int(id) >= len(g.have) { // id is a valid id of the dictionary: Value read it
			g.have = slices.Grow(g.have, int(id)+1-len(g.have))[:id+1]
			g.known = slices.Grow(g.known, int(id)+1-len(g.known))[:id+1]
		}
		g.known[id], g.have[id] = gv, true
		return gv, nil
	case g.raw != nil:
		return g.values[id], nil
	}
	return GroupValue{Null: true}, nil
}

// smallKey is a group key (bucket, then a uint32 id per group-by dimension) of up to four
// dimensions, zero-padded: a map of these hashes and compares faster than one of strings.
type smallKey [8 + 4*4]byte

// groupOf returns the group of key (the caller adds a new one's times, ids and accumulators).
func (r *runner) groupOf(key []byte) (gi int32, isNew bool) {
	if len(key) <= len(smallKey{}) {
		var k smallKey
		copy(k[:], key)
		if gi, ok := r.small[k]; ok {
			return gi, false
		}
		gi = int32(len(r.times))
		r.small[k] = gi
		return gi, true
	}
	if gi, ok := r.table[string(key)]; ok {
		return gi, false
	}
	gi = int32(len(r.times))
	r.table[string(key)] = gi
	return gi, true
}

// resetGroups drops the groups aggregated so far (merged into a window's table).
func (r *runner) resetGroups() {
	if r.table == nil {
		r.table, r.small = map[string]int32{}, map[smallKey]int32{}
	} else {
		clear(r.table)
		clear(r.small)
	}
	if r.dense != nil {
		r.dense.reset(r.slots)
	}
	r.keys, r.slots, r.order, r.times = r.keys[:0], r.slots[:0], r.order[:0], r.times[:0]
	if r.acc == nil {
		r.acc = newAccs(r.metrics)
	} else {
		r.acc.reset()
	}
	r.windowRows = 0
}
