package merger

import (
	"fmt"

	"github.com/writeout/writeout/merger/internal/source"
)

// releaseRows is how many rows the row merge takes from an input between two releases of its
// mapped pages (releaseInputs): at the ~16 bytes a row of the peers' event table, about 2 MiB
// of the input's bytes.
const releaseRows = 1 << 17

// releaseBitmapRows is how many source rows the bitmap rebuild of one dimension reads from its
// inputs' bitmaps between two releases: at the ~2 bytes a row of a dimension's bitmaps in the
// peers' table, about 2 MiB.
const releaseBitmapRows = 1 << 20

// releaseInputs takes the pages of the mapped segments among the sources out of the process's
// resident set (columns.Segment.ReleasePages). A merge reads each part of its inputs once, in
// turn: the checksums (every byte), the dictionaries, the rows (times, ids, metrics), then the
// bitmaps. Released between and within those steps, the mapped inputs count in the merge's
// RSS by what it read since the last release, not by their whole size (46 MiB for the peers'
// 3,000,000 rows). The bytes stay in the page cache; what is read again faults back in.
// Builder sources and segments read with ReadAt have no mapping and are skipped, but for the
// intermediate segments of a merge in phases, read with ReadAt over a mapping of the merge's
// own (see source.OfSegmentPages).
func releaseInputs(srcs []source.Source, names []string) error {
	for i, s := range srcs {
		if err := source.ReleasePages(s); err != nil {
			return fmt.Errorf("merger: %s: %w", names[i], err)
		}
	}
	return nil
}
