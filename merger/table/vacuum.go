package table

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/writeout/writeout/columns/objstore"
)

// VacuumOptions configure Vacuum. The zero value keeps only the newest version, and removes
// files no version lists once they are DefaultPendingAge old.
type VacuumOptions struct {
	// Retain is how long a version stays readable once a newer one replaced it: a version
	// is retained while the entry of the next version is younger than Retain (its time, as
	// the log says). The newest version is always retained. 0 retains only the newest.
	Retain time.Duration
	// PendingAge is how old a file that no version of the log lists must be (its
	// modification time) before it is removed: a segment copied by an append or written by a
	// compaction that has not committed yet is such a file, as is a temp file in progress,
	// and removing one would fail that writer (an append would then commit a segment that is
	// gone). 0 means DefaultPendingAge; a negative value removes them at once, which is safe
	// only when no writer is running.
	PendingAge time.Duration
}

// DefaultPendingAge is the PendingAge of VacuumOptions' zero value.
const DefaultPendingAge = time.Hour

// VacuumResult is what Vacuum removed.
type VacuumResult struct {
	Newest   int      // the newest version, which Vacuum kept
	Retained []int    // the versions kept, newest included
	Segments []string // segment files removed (names in the table)
	Entries  []string // log entries removed
	Temp     []string // temp files and files no version listed, removed
	// Uploads are the keys of the pending multipart uploads aborted and the upload markers
	// removed (S3).
	Uploads []string
}

// Vacuum removes what no retained version needs: the segments no retained version lists,
// the log entries of versions not retained, and temp files and files that no version lists
// once PendingAge old. The newest version and every segment it lists are always kept, so the
// table stays readable and writable throughout; versions not retained may become
// unreadable (ErrNotExist, or a segment missing) as Vacuum goes.
//
// The order makes a crash harmless: segments first, then the entries of versions not
// retained (oldest first, so the versions left are the newest ones, consecutive), then
// unlisted and temp files, and on S3 pending multipart uploads of segments (aborted) and
// the markers of uploads no longer pending. A crash between leaves at worst an entry not retained that lists
// removed segments, which the next Vacuum removes.
//
// Writers and Vacuum may run at once, provided PendingAge exceeds the time a writer takes
// from storing a segment to committing it. A writer whose base version Vacuum removed fails
// (ErrNotExist) and must start again.
func (t *Table) Vacuum(ctx context.Context, o VacuumOptions) (*VacuumResult, error) {
	if o.Retain < 0 {
		return nil, fmt.Errorf("%w: %s: vacuum: retention %s", ErrInvalid, t, o.Retain)
	}
	if o.PendingAge == 0 {
		o.PendingAge = DefaultPendingAge
	}
	now := t.opts.Now()
	log, err := t.Log(ctx)
	if err != nil {
		return nil, err
	}
	res := &VacuumResult{Newest: log[len(log)-1].Version}
	keep := map[string]bool{}   // segments of retained versions
	listed := map[string]bool{} // segments of any version
	var drop []int
	for i, e := range log {
		retained := i == len(log)-1 || now.Sub(log[i+1].Time) < o.Retain
		for _, s := range e.Segments {
			listed[s.Name] = true
			if retained {
				keep[s.Name] = true
			}
		}
		if retained {
			res.Retained = append(res.Retained, e.Version)
		} else {
			drop = append(drop, e.Version)
		}
	}
	files, err := t.st.listInfo(ctx, segmentsDir)
	if err != nil {
		return res, err
	}
	old := func(f fileInfo) bool { return o.PendingAge < 0 || now.Sub(f.mod) >= o.PendingAge }
	var pending []string
	for _, f := range files {
		name := segmentsDir + "/" + f.name
		switch {
		case strings.Contains(f.name, objstore.MarkerInfix):
			// An upload's marker: sweepUploads removes it once its upload is not pending.
		case keep[name]:
		case listed[name]:
			if err := t.st.remove(ctx, name); err != nil {
				return res, err
			}
			res.Segments = append(res.Segments, name)
		case old(f):
			pending = append(pending, name)
		}
	}
	for _, v := range drop {
		if err := t.st.remove(ctx, entryName(v)); err != nil {
			return res, err
		}
		res.Entries = append(res.Entries, entryName(v))
	}
	logFiles, err := t.st.listInfo(ctx, logDir)
	if err != nil {
		return res, err
	}
	for _, f := range logFiles {
		if _, ok := parseEntryName(f.name); !ok && IsTempName(f.name) && old(f) {
			pending = append(pending, logDir+"/"+f.name)
		}
	}
	for _, name := range pending {
		if err := t.st.remove(ctx, name); err != nil {
			return res, err
		}
		res.Temp = append(res.Temp, name)
	}
	if sw, ok := t.st.(uploadSweeper); ok {
		ups, err := sw.sweepUploads(ctx, func(start time.Time) bool { return now.Sub(start) >= o.PendingAge }, o.PendingAge < 0)
		res.Uploads = ups
		if err != nil {
			return res, err
		}
	}
	return res, nil
}
