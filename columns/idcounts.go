package columns

// idCounts counts the rows holding each id of a dimension (checkDimRows), in idLanes arrays of
// counts: the k-th id of a chunk goes to array k mod idLanes, and an id's count is the sum over
// the arrays. With one array, an id that repeats within a few rows (a small dictionary, a
// sorted dimension's runs) makes each increment wait for the store of the one before; in
// different arrays the increments are independent. A dictionary past idLanesMax ids, whose ids
// seldom repeat that closely, gets one array.
//
// A count is a uint32: a segment has fewer than 2^32 rows (maxRows).
type idCounts struct {
	lanes [idLanes][]uint32 // lanes[1:] nil for one array
}

const (
	idLanes    = 4
	idLanesMax = 1 << 16
)

// newIDCounts returns the counts of the ids below card, all 0.
func newIDCounts(card int) *idCounts {
	c := &idCounts{}
	if card > idLanesMax {
		c.lanes[0] = make([]uint32, card)
		return c
	}
	all := make([]uint32, idLanes*card)
	for i := range c.lanes {
		c.lanes[i] = all[i*card : (i+1)*card : (i+1)*card]
	}
	return c
}

// add counts ids, each below the cardinality (else it panics: the ids' decoder checks them).
func (c *idCounts) add(ids []uint32) {
	l0 := c.lanes[0]
	k := 0
	if l1, l2, l3 := c.lanes[1], c.lanes[2], c.lanes[3]; l1 != nil {
		for ; k+idLanes <= len(ids); k += idLanes {
			l0[ids[k]]++
			l1[ids[k+1]]++
			l2[ids[k+2]]++
			l3[ids[k+3]]++
		}
	}
	for _, id := range ids[k:] {
		l0[id]++
	}
}

// total returns the number of ids equal to id counted.
func (c *idCounts) total(id int) uint64 {
	var n uint64
	for _, l := range c.lanes {
		if l != nil {
			n += uint64(l[id])
		}
	}
	return n
}
