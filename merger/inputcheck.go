package merger

import (
	"fmt"
	"slices"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/mix"
	"github.com/writeout/writeout/internal/slicesx"
)

// What a merge checks of its inputs (every source of every phase, intermediate segments
// included), so that it never publishes an output that fails columns.Segment.Verify, even
// from an input whose bytes agree with their CRCs (a writer bug would make one):
//   - the readers' own checks: chunk bounds and encodings, ids below the cardinality, the null
//     id alone in a multi-value row, bitmap rows below the row count, value sizes;
//   - dictionaries strictly sorted, holding as many values as their cardinality (dicts.go);
//   - times in order, within the input's interval and within [columns.MinTime,
//     columns.MaxTime] (cursor.go);
//   - every sketch decodes, the ones copied as they are included (metrics.go);
//   - the bitmap index written holds exactly the (row, id) pairs of the ids written: the sum
//     of a keyed hash over the pairs, computed as the ids are written and again as the
//     bitmaps are, must agree (core.go); when it does not, checkInputBitmaps finds the input
//     whose bitmaps disagree with its ids and names it.
//   - the read path's structural checks of the times and of each dimension's ids (columns,
//     structure.go), put off to the merge's own reads (source.DeferChecks, columns.Deferral):
//     computed from the chunks the merge decodes, so that each is read and decoded once, and
//     judged before the merge publishes (core.judgeInputs), or after it failed (judgeAfter).
// An input's fault is an error wrapping columns.ErrCorrupt that names the input.

// pairHash mixes a (row, id) pair into 64 bits under a key (the splitmix64 finalizer of the
// pair xor the key). The key is random for each merge, so that no input can be made whose
// wrong bitmaps sum to the hash of the right ones: two different sets of pairs have equal sums
// with a probability of about 2^-64.
func pairHash(seed uint64, row, id uint32) uint64 {
	return mix.Mix64((uint64(row)<<32 | uint64(id)) ^ seed)
}

// distinctIDs returns the distinct ids of a row: ids itself when they are distinct (the
// usual case), else a sorted, compacted copy in scratch. An empty row is null: the null id.
func distinctIDs(ids, scratch []uint32) ([]uint32, []uint32) {
	if len(ids) == 0 {
		return append(scratch[:0], 0), scratch
	}
	return slicesx.Distinct(ids, scratch)
}

// addDistinctPairs adds to h the pairHash of (row, id) for every distinct id of the row.
func addDistinctPairs(h, seed uint64, row uint32, ids, scratch []uint32) (uint64, []uint32) {
	if len(ids) <= 16 && len(ids) > 0 {
		// Short rows (the usual ones) skip an id seen earlier in the row: no copy, no sort.
		for k, id := range ids {
			if !slices.Contains(ids[:k], id) {
				h += pairHash(seed, row, id)
			}
		}
		return h, scratch
	}
	d, scratch := distinctIDs(ids, scratch)
	for _, id := range d {
		h += pairHash(seed, row, id)
	}
	return h, scratch
}

// checkInputBitmaps looks for the input whose bitmap index of output dimension d disagrees
// with its ids, reading each input's ids and bitmaps whole: it runs only once a merge found
// that the bitmaps it wrote disagree with the ids, to name the input. It returns an error
// naming the first such input and id (the caller names the dimension), wrapping
// columns.ErrCorrupt, or nil when every input agrees (or the dimension has no bitmaps).
func (c *core) checkInputBitmaps(d int) error {
	var scratch []uint32
	buf := make([]uint32, 4096)
	for i, ds := range c.dims[d] {
		if ds == nil || !ds.HasBitmaps() {
			continue
		}
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%s: %s: %w", c.names[i], fmt.Sprintf(format, args...), columns.ErrCorrupt)
		}
		card := ds.Cardinality()
		rowHash, rowCount := make([]uint64, card), make([]uint64, card)
		n := c.srcs[i].Rows()
		cur := ds.Cursor()
		for r := 0; r < n; {
			first, ids, offs, err := cur.Chunk(r)
			if err != nil {
				return fmt.Errorf("%s: %w", c.names[i], err)
			}
			rows := len(ids)
			if offs != nil {
				rows = len(offs) - 1
			}
			if r < first || r >= first+rows {
				return fail("chunk at %d does not hold row %d", first, r)
			}
			for k := r - first; k < rows; k++ {
				row := ids[k : k+1]
				if offs != nil {
					row = ids[offs[k]:offs[k+1]]
				}
				var dist []uint32
				dist, scratch = distinctIDs(row, scratch)
				for _, id := range dist {
					if int(id) >= card {
						return fail("row %d: id %d not below the cardinality %d", first+k, id, card)
					}
					rowHash[id] += pairHash(c.seed, uint32(first+k), id)
					rowCount[id]++
				}
			}
			r = first + rows
		}
		for id := range card {
			sink := &hashSink{seed: c.seed, id: uint32(id)}
			if err := ds.EachRows(uint32(id), buf, sink); err != nil {
				return fmt.Errorf("%s: %w", c.names[i], err)
			}
			if sink.hash == rowHash[id] && sink.count == rowCount[id] {
				continue
			}
			what := fmt.Sprintf("id %d", id)
			if v, null, err := ds.Value(uint32(id)); err == nil && null {
				what += " (null)"
			} else if err == nil {
				what += fmt.Sprintf(" (%.40q)", v)
			}
			if sink.count != rowCount[id] {
				return fail("the bitmap of %s holds %d rows, %d rows hold the id", what, sink.count, rowCount[id])
			}
			return fail("the bitmap of %s holds other rows than those holding the id", what)
		}
	}
	return nil
}

// hashSink sums the pairHash of one id's bitmap rows (a source.RowSink).
type hashSink struct {
	seed        uint64
	id          uint32
	hash, count uint64
}

func (s *hashSink) Rows(rs []uint32) error {
	for _, r := range rs {
		s.hash += pairHash(s.seed, r, s.id)
	}
	s.count += uint64(len(rs))
	return nil
}

// namesWith returns the names of the sources holding output dimension d.
func (c *core) namesWith(d int) []string {
	var out []string
	for i, ds := range c.dims[d] {
		if ds != nil {
			out = append(out, c.names[i])
		}
	}
	return out
}
