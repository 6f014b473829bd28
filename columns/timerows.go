package columns

import (
	"fmt"
	"sort"
)

// TimeRows returns the rows whose time lies in [start, end) as the range [lo, hi) (lo == hi
// when none does): a segment's rows are in time order, so they are one range, found by binary
// search over the time column (each probe decodes the chunk holding it).
func (s *Segment) TimeRows(start, end int64) (lo, hi int, err error) {
	if end < start {
		return 0, 0, fmt.Errorf("columns: %s: time range [%d, %d) ends before it starts: %w", s.name, start, end, ErrInvalid)
	}
	cur := s.time.Cursor()
	defer cur.Release()
	first := func(t int64) (int, error) {
		var ferr error
		i := sort.Search(s.Rows(), func(row int) bool {
			if ferr != nil {
				return true
			}
			v, err := cur.At(row)
			if err != nil {
				ferr = err
				return true
			}
			return v >= t
		})
		return i, ferr
	}
	if lo, err = first(start); err != nil {
		return 0, 0, err
	}
	if hi, err = first(end); err != nil {
		return 0, 0, err
	}
	return lo, max(lo, hi), nil
}
