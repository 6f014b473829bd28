package merger

// A merge's memory budget (Options.MemoryLimit). What a merge holds apart from its inputs'
// pages (mapped: the kernel takes them back as it needs) falls in two kinds:
//
//   - what grows with the rows, which the merge keeps out of memory past fixed bounds: the id
//     logs of the bitmap indexes (runs on the scratch medium past logIDs ids a dimension),
//     the bitmaps step's counting sort (logSortRows rows a goroutine; a value with more rows
//     is written a piece at a time), the keys of large pre-aggregated groups (kept to
//     maxMemGroupRows rows a cursor, then read again from the inputs, see rekey.go);
//   - what grows with the inputs merged at once: each input's cursor decodes a chunk of each
//     of its columns at a time (inputBytes a column);
//   - the long metrics' slot tables of pre-aggregated groups (one accumulator a distinct key of
//     an input's group, see slottables.go), which are kept from group to group while they fit
//     their share, and given back to the system as they are read once they do not; groups
//     combined ahead past maxPreloads take tables only while they hold less than aheadShare.
//
// The budget sizes both: the bounds of the first shrink, each to its share, when the limit is
// small (never below a floor that keeps runs and passes few), and the inputs of one phase are
// at most what their share holds (more merge in phases, as with Options.MaxFanIn). The
// default budget gives every bound its largest value: the figures of bench/RESULTS.md.
// Dictionaries (merged per dimension, as large as its distinct values), multi-value
// dimensions' row maps (4 bytes an input row) and the Go runtime's own overhead are not
// counted.

// defaultMemoryLimit is Options.MemoryLimit's default.
const defaultMemoryLimit = 256 << 20

// minMemoryLimit is the least Options.MemoryLimit: below it the floors of the bounds alone
// would not fit.
const minMemoryLimit = 16 << 20

// The shares of the budget, in eighths: the id logs and their runs' sort, the bitmaps step's
// sort, the pre-aggregated groups' keys, the inputs' cursors.
const (
	logShare    = 2
	sortShare   = 1
	groupShare  = 1
	inputsShare = 2
)

// aheadShare is the budget's share, in eighths, that slot tables may hold for more groups
// combined ahead than maxPreloads (see preloads.most): the 300 M-row hour rollup of five
// overlapping inputs peaked at 27 MiB of tables with six groups.
const aheadShare = 1

// tableKeep is the part of the budget (1/tableKeep) the slot tables may hold before they give
// the pages of the slots read back, and free the tables of groups done rather than keep them
// for the next groups: the tables in use are what their groups need (an accumulator a
// distinct key of an input's group, at most 2^maxSlotBits). At an eighth (32 MiB by default),
// the 300 M-row hour rollup of five overlapping inputs held its whole share and peaked 13 MiB
// higher than at a 64th, no faster; the 30 M-row rollups, whose tables stay under 12 MiB,
// ran as before.
const tableKeep = 64

// inputBytes is what an input's cursor holds a column, about: a decoded chunk and its
// compressed frame, and the column's chunk index for an input read with ReadAt (a mapped
// input's is read in the mapping). Measured: a merge of 100 inputs of Druid's basic schema (15
// columns) held 1.6 MB an input more than one of 10 inputs in phases.
const inputBytes = 112 << 10

// bounds are one merge's bounds, from its budget.
type bounds struct {
	logIDs       int // ids a log keeps in memory (and a run's rows)
	sortRows     int // rows the bitmaps step sorts at a time, a goroutine
	memGroupRows int // a streamed group's rows whose keys stay in memory, a cursor
	tableBytes   int // what the slot tables may hold before they give read pages back
	aheadBytes   int // what they may hold for more groups combined ahead than maxPreloads
}

// boundsFor returns the bounds of a merge of limit bytes (0: defaultMemoryLimit) writing
// dims single-value dimensions with par goroutines, of fan inputs at once.
func boundsFor(limit int64, dims, par, fan int) bounds {
	if limit == 0 {
		limit = defaultMemoryLimit
	}
	share := func(eighths int, parts int, per int64, floor, ceil int) int {
		n := limit * int64(eighths) / 8 / int64(max(parts, 1)) / per
		return int(min(max(n, int64(floor)), int64(ceil)))
	}
	return bounds{
		// A log id costs up to 4 bytes, and 4 more in its run's sort.
		logIDs:       share(logShare, dims, 8, 1<<16, logRunIDs),
		sortRows:     share(sortShare, par, 4, 1<<16, logSortRows),
		memGroupRows: share(groupShare, fan, 4, 1<<14, maxMemGroupRows),
		tableBytes:   int(limit / tableKeep),
		aheadBytes:   int(limit * aheadShare / 8),
	}
}

// memoryFanIn returns the most inputs of cols columns each that the budget's share for
// inputs holds (at least 2), or 0 when n inputs fit.
func memoryFanIn(limit int64, n, cols int) int {
	if limit == 0 {
		limit = defaultMemoryLimit
	}
	per := int64(max(cols, 1)) * inputBytes
	fan := limit * inputsShare / 8 / per
	if int64(n) <= fan {
		return 0
	}
	return int(max(fan, 2))
}
