package columns

import (
	"fmt"

	"github.com/writeout/writeout/internal/slicesx"
)

// dimRowsState is what checkDimRows gathers from a dimension's ids, read a chunk at a time in
// row order: the keyed sum of the rows holding the null id, and with a bitmap index, the
// number of rows holding each id.
type dimRowsState struct {
	c        *DimColumn
	hasNull  bool
	nullRows pairSums
	counts   *idCounts // nil without a bitmap index
	scratch  []uint32
}

func newDimRows(c *DimColumn) *dimRowsState {
	dr := &dimRowsState{c: c, hasNull: c.dict.hasNull}
	if c.bms != nil {
		dr.counts = newIDCounts(c.bms.count)
	}
	return dr
}

// chunk adds the ids of the chunk starting at row first (offs as DimCursor.Chunk gives them),
// the chunk after the one chunk saw last (row 0 for the first). The ids are below the
// cardinality: the cursor's decoder checks them.
func (dr *dimRowsState) chunk(first int, ids, offs []uint32) {
	seed := dr.c.seg.pairSeed
	if offs == nil {
		if dr.counts != nil {
			dr.counts.add(ids)
		}
		if dr.hasNull {
			var nsum, ncount uint64
			for k, id := range ids {
				if id == 0 {
					nsum += rowKey(seed, uint32(first+k))
					ncount++
				}
			}
			dr.nullRows.sum += nsum
			dr.nullRows.count += ncount
		}
		return
	}
	for k := 0; k+1 < len(offs); k++ {
		row := ids[offs[k]:offs[k+1]]
		if dr.hasNull && row[0] == 0 {
			dr.nullRows.sum += rowKey(seed, uint32(first+k))
			dr.nullRows.count++
		}
		if dr.counts == nil {
			continue
		}
		row, dr.scratch = slicesx.Distinct(row, dr.scratch)
		dr.counts.add(row)
	}
}

// judge compares, once chunk saw every row, the null rows with the rows holding the null id,
// and each bitmap's count with the rows holding its id. The nulls' and bitmaps' CRCs are
// checked (checkDimRows checked them before reading the ids).
func (dr *dimRowsState) judge() error {
	c := dr.c
	s := c.seg
	got, err := s.nullRowSums(c)
	if err != nil {
		return err
	}
	if got != dr.nullRows {
		return s.fileError(c.nulls.part, corruptf("%d null rows, %d rows hold the null id (or other rows)", got.count, dr.nullRows.count))
	}
	if dr.counts == nil {
		return nil
	}
	if err := c.bms.chk.checkCRC(); err != nil {
		return err
	}
	hs := c.bms.headers()
	for id := 0; id < c.bms.count; id++ {
		want := dr.counts.total(id)
		n, err := hs.count(id)
		if err != nil {
			return s.fileError(c.bms.part, fmt.Errorf("bitmap %d: %w", id, err))
		}
		if n != want {
			return s.fileError(c.bms.part, corruptf("bitmap %d holds %d rows, %d rows hold id %d", id, n, want, id))
		}
	}
	return nil
}

// nullRowSums returns the keyed sum (rowKey) and the count of a dictionary dimension's null
// rows (its nulls part, CRC checked).
func (s *Segment) nullRowSums(c *DimColumn) (pairSums, error) {
	nulls, err := s.decodeNulls(c.dim.Name, c.nulls)
	if err != nil {
		return pairSums{}, s.inFile(err)
	}
	var got pairSums
	for it := nulls.Iterator(); it.HasNext(); {
		got.sum += rowKey(s.pairSeed, it.Next())
		got.count++
	}
	return got, nil
}
