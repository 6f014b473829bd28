package merger

import (
	"fmt"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/internal/source"
)

// Groups keyed again. A streamed group of more than memGroupRows rows (an hour of a large
// input) keeps no key of its rows: whoever combines its rows (a long task, or a preload for
// every task) reads their ids again, through readers of its own of the input's dimensions,
// packs them as the cursor did and ranks them among the group's keys (its bitmap, kept with
// the group). The keys were staged on the merge's medium before, 4 bytes a row written and
// read back: in the 300 M-row hour rollup of five overlapping inputs, the writes, the reads
// and their buffers took a fifth of the merge's CPU, where decoding the ids again takes about
// a tenth, and hold no memory a row.

// keyReader reads the packed keys of an input's rows: readers of its dimensions' ids (one a
// consumer: a reader serves one goroutine), their maps to merged ids, and the packing.
type keyReader struct {
	in       int32
	name     string             // the input's, for errors
	dimNames []string           // the output dimensions'
	ids      []source.IDChunker // per dimension; nil: the input lacks it (its rows null, id 0)
	maps     [][]uint32         // per dimension: the input's id -> merged id
	bits     []uint8            // per dimension: its bits in a packed key (cursor.packBits)
	keys     []uint64           // keysAt's memory
}

// openKeys returns a keyReader of input in of c (the merge's readers of its dimensions).
func (c *core) openKeys(in int32, bits []uint8) *keyReader {
	kr := &keyReader{in: in, name: c.names[in], dimNames: c.dimNames(), bits: bits,
		ids: make([]source.IDChunker, len(c.dims)), maps: make([][]uint32, len(c.dims))}
	for d := range c.dims {
		if ds := c.dims[d][in]; ds != nil {
			kr.ids[d], kr.maps[d] = ds.Cursor(), c.maps[d][in]
		}
	}
	return kr
}

// release gives the readers' buffers back (the source releases them again at the merge's
// end, which does nothing more); kr is not used after.
func (kr *keyReader) release() {
	if kr == nil {
		return
	}
	for _, r := range kr.ids {
		releaseReader(r)
	}
	kr.keys = nil
}

// releaseReader gives back the buffers of r, a reader of a source, when it has any (a
// columns cursor); r is not used after.
func releaseReader(r any) {
	if rel, ok := r.(interface{ Release() }); ok {
		rel.Release()
	}
}

// keysAt returns the packed keys of the input's rows [r, r+n) (valid until the next call):
// each dimension's ids, mapped to merged ids, folded in most significant first.
func (kr *keyReader) keysAt(r, n int) ([]uint64, error) {
	keys := sized(kr.keys, n)
	kr.keys = keys
	for j, ic := range kr.ids {
		b := kr.bits[j]
		if ic == nil { // null: id 0
			if j == 0 {
				clear(keys)
			} else {
				for i := range keys {
					keys[i] <<= b
				}
			}
			continue
		}
		m := kr.maps[j]
		for q := r; q < r+n; {
			first, ids, offs, err := ic.Chunk(q)
			if err != nil {
				return nil, fmt.Errorf("merger: %s: dimension %q: %w", kr.name, kr.dimNames[j], err)
			}
			rows := len(ids)
			if offs != nil {
				rows = len(offs) - 1
			}
			if k := q - first; k < 0 || k >= rows {
				return nil, fmt.Errorf("merger: %s: dimension %q: chunk at %d does not hold row %d: %w", kr.name, kr.dimNames[j], first, q, columns.ErrCorrupt)
			}
			end := min(r+n, first+rows)
			out := keys[q-r : end-r]
			if offs == nil {
				if err := kr.fold(j, out, ids[q-first:end-first], m, b); err != nil {
					return nil, err
				}
				q = end
				continue
			}
			for i := range out {
				lo, hi := offs[q-first+i], offs[q-first+i+1]
				if hi != lo+1 || int(hi) > len(ids) {
					return nil, fmt.Errorf("merger: internal error: %s: row %d holds %d ids in a single-value dimension", kr.name, q+i, int(hi)-int(lo))
				}
				if err := kr.fold(j, out[i:i+1], ids[lo:hi], m, b); err != nil {
					return nil, err
				}
			}
			q = end
		}
	}
	return keys, nil
}

// fold folds ids, source ids of dimension j, mapped through m, into keys (b bits each; the
// first dimension sets them).
func (kr *keyReader) fold(j int, keys []uint64, ids []uint32, m []uint32, b uint8) error {
	ids = ids[:len(keys)]
	if j == 0 {
		for i, id := range ids {
			if int(id) >= len(m) {
				return badID(kr.name, kr.dimNames[j], id, len(m))
			}
			keys[i] = uint64(m[id])
		}
		return nil
	}
	for i, id := range ids {
		if int(id) >= len(m) {
			return badID(kr.name, kr.dimNames[j], id, len(m))
		}
		keys[i] = keys[i]<<b | uint64(m[id])
	}
	return nil
}
