package merger

import (
	"runtime"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/internal/fdlimit"
)

// fdReserve is how many descriptors a merge keeps for itself besides its inputs' when it picks
// a fan-in: the staging and scratch media's files, the segment being written, its directory
// (opened to sync it), the Go runtime's poller, connections to object storage, and room to
// spare.
const fdReserve = 16

// fdLimit and fdOpen read the process's descriptor limit and count; tests replace them.
var (
	fdLimit = fdlimit.Limit
	fdOpen  = fdlimit.Open
)

// pickFanIn returns the fan-in of MergeInputs with Options.MaxFanIn 0, for n inputs: 0 (one
// phase, every input open at once) when they fit in the descriptors free, else the most that
// do (at least 2). See the package documentation for the rule.
func pickFanIn(n int, fsys afero.Fs) (int, error) {
	limit, err := fdLimit()
	if err != nil || limit == fdlimit.Unlimited {
		return 0, nil // no limit to fit
	}
	limit = min(limit, 1<<30)
	open, err := fdOpen()
	if err != nil {
		// Not counted cheaply here: leave a quarter of the limit to what is open.
		open = int(max(limit/4, 3))
	}
	free := int(limit) - open - fdReserve
	if n <= free {
		return 0, nil
	}
	fan := max(2, free)
	if !intermediatesMapped(fsys) {
		// Intermediate segments keep a descriptor each until their phase has read them: those
		// of the phase being read and of the next one, about 2n/fan, must fit beside a group.
		for fan > 2 && fan+2*((n+fan-1)/fan) > free {
			fan--
		}
	}
	return fan, nil
}

// intermediatesMapped reports whether a merge's intermediate segments hold no descriptor while
// they wait for their phase: mapped and closed on Linux (see mapIntermediate), named files
// opened again when read on an Options.Fs.
func intermediatesMapped(fsys afero.Fs) bool {
	return fsys != nil || runtime.GOOS == "linux"
}
