package table

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/crashfs"
)

// TestAppendCrash cuts the power after each mutating file-system operation in turn of a
// workload of two writers on a table at version 2 (one segment of 40 rows), until a run
// finishes without reaching its crash point:
//
//  1. writer B, which read version 2, stores its segment (20 rows) in segments/;
//  2. writer A appends a segment of 30 rows: version 3;
//  3. writer B commits its segment on base 2: version 3 is taken, so it rebases: version 4.
//
// Each run is rebooted twice, dropping every unsynced directory change (crashfs Crash) and
// keeping them all (CrashKeepingDirs); file data always reverts to its last sync. After each
// reboot: Open succeeds; the newest version is 2, 3 or 4, with exactly 40, 70 or 90 rows in
// its live segments, each of which opens, verifies and matches its footer checksum, and so
// does every older version; a writer that returned nil has its rows in the newest version;
// _log/ holds entries and temp files only; and another append commits the next version.
func TestAppendCrash(t *testing.T) {
	ctx := context.Background()
	start := crashfs.New()
	o := Options{Fs: start}
	tb, err := Create(ctx, "/data/t", o)
	require.NoError(t, err)
	require.NoError(t, start.MkdirAll("/in", 0o755))
	put := func(name string, seed uint64, rows int) {
		f, err := start.Create(name)
		require.NoError(t, err)
		_, err = f.Write(segBytes(t, seed, rows, day, false))
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}
	put("/in/old.seg", 1, 40)
	put("/in/a.seg", 2, 30)
	put("/in/more.seg", 4, 5)
	bBytes := segBytes(t, 3, 20, day, false)
	for _, d := range []string{"/in", "/"} {
		f, err := start.Open(d)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}
	v, err := tb.Append(ctx, []string{"/in/old.seg"})
	require.NoError(t, err)
	require.Equal(t, 2, v)
	wantRows := map[int]int64{2: 40, 3: 70, 4: 90}

	points, reboots, violations := 0, 0, 0
	violate := func(format string, args ...any) {
		t.Helper()
		violations++
		if violations <= 10 {
			t.Errorf(format, args...)
		}
	}
	seen := map[int]int{}
	for k := 0; ; k++ {
		require.Less(t, k, 1000, "the workload never finishes")
		fsys := start.Clone()
		fsys.SetCrashAfter(k)
		errA, errB := crashWorkload(fsys, bBytes)
		finished := !fsys.Crashed()
		points++
		for _, err := range []error{errA, errB} {
			if finished && err != nil {
				violate("k=%d: finished without a crash, yet failed: %v", k, err)
			}
			if !finished && err != nil && !errors.Is(err, crashfs.ErrCrashed) {
				violate("k=%d: an error that does not wrap the crash: %v", k, err)
			}
		}
		for _, keepDirs := range []bool{false, true} {
			after := fsys.Clone()
			if keepDirs {
				after.CrashKeepingDirs()
			} else {
				after.Crash()
			}
			reboots++
			at := fmt.Sprintf("k=%d keepdirs=%v", k, keepDirs)
			newest := checkAfterCrash(t, after, at, wantRows, errA == nil, errB == nil, violate)
			seen[newest]++
		}
		if finished {
			break
		}
	}
	t.Logf("%d crash points, %d reboots, newest version after reboot: %v, %d violations", points, reboots, seen, violations)
	require.Zero(t, violations)
	require.Greater(t, points, 15)
	require.Positive(t, seen[2])
	require.Positive(t, seen[3])
	require.Positive(t, seen[4])
}

// crashWorkload runs the two writers of TestAppendCrash on fsys; errA and errB are their
// outcomes (a writer not reached fails with the crash too).
func crashWorkload(fsys *crashfs.FS, bBytes []byte) (errA, errB error) {
	ctx := context.Background()
	tb, err := Open(ctx, "/data/t", Options{Fs: fsys})
	if err != nil {
		return err, err
	}
	bSeg, err := newStaged(ctx, tb, bBytes)
	if err != nil {
		return err, err
	}
	_, errA = tb.Append(ctx, []string{"/in/a.seg"})
	if errA != nil {
		return errA, errA
	}
	schema := testSchema(false)
	_, errB = tb.Commit(ctx, 2, Change{Kind: KindAppend, Added: []Segment{bSeg}, Schema: &schema})
	return errA, errB
}

// newStaged stores b as a new segment of the table and returns its entry.
func newStaged(ctx context.Context, tb *Table, b []byte) (Segment, error) {
	info, err := columns.ReadInfo(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return Segment{}, err
	}
	s := Segment{Name: newSegmentName(info.Interval.Start), Interval: info.Interval.String(), Rows: int64(info.Rows),
		Bytes: info.Size, Footer: FooterChecksum(info)}
	return s, tb.st.putSegment(ctx, s.Name, bytes.NewReader(b), s.Bytes)
}

// checkAfterCrash checks a rebooted file system (see TestAppendCrash) and returns its newest
// version.
func checkAfterCrash(t *testing.T, fsys *crashfs.FS, at string, wantRows map[int]int64, okA, okB bool, violate func(string, ...any)) int {
	ctx := context.Background()
	tb, err := Open(ctx, "/data/t", Options{Fs: fsys})
	if err != nil {
		violate("%s: open: %v", at, err)
		return -1
	}
	e, err := tb.Snapshot(ctx, 0)
	if err != nil {
		violate("%s: newest version: %v", at, err)
		return -1
	}
	if _, ok := wantRows[e.Version]; !ok {
		violate("%s: newest version %d", at, e.Version)
		return e.Version
	}
	switch {
	case okB && e.Version != 4:
		violate("%s: writer B committed, yet the newest version is %d", at, e.Version)
	case okA && e.Version < 3:
		violate("%s: writer A committed, yet the newest version is %d", at, e.Version)
	}
	for v := 2; v <= e.Version; v++ {
		s, err := tb.Snapshot(ctx, v)
		if err != nil {
			violate("%s: version %d: %v", at, v, err)
			continue
		}
		var rows int64
		for _, seg := range s.Segments {
			cs, closeSeg, err := tb.OpenSegment(ctx, seg)
			if err == nil {
				err = cs.Verify()
				rows += int64(cs.Rows())
				err = errors.Join(err, closeSeg())
			}
			if err != nil {
				violate("%s: version %d: segment %s: %v", at, v, seg.Name, err)
			}
		}
		if rows != wantRows[v] {
			violate("%s: version %d has %d rows in its segments, want %d", at, v, rows, wantRows[v])
		}
	}
	names, err := afero.ReadDir(fsys, "/data/t/_log")
	if err != nil {
		violate("%s: list _log: %v", at, err)
	}
	for _, fi := range names {
		if _, ok := parseEntryName(fi.Name()); !ok && !IsTempName(fi.Name()) {
			violate("%s: _log/%s is neither an entry nor a temp file", at, fi.Name())
		}
	}
	// The table goes on: another append commits the next version.
	v, err := tb.Append(ctx, []string{"/in/more.seg"})
	if err != nil || v != e.Version+1 {
		violate("%s: append after the crash: version %d, %v", at, v, err)
	} else if n := liveRows(t, tb, v); n != wantRows[e.Version]+5 {
		violate("%s: after the append, %d rows", at, n)
	}
	return e.Version
}

// TestCreateCrash cuts the power after each mutating operation of Create on an empty file
// system (every directory missing) and reboots both ways: the location then holds no table
// (and Create succeeds), or the empty table of version 1; and a Create that returned nil
// always left version 1.
func TestCreateCrash(t *testing.T) {
	ctx := context.Background()
	start := crashfs.New()
	points := 0
	for k := 0; ; k++ {
		require.Less(t, k, 1000)
		fsys := start.Clone()
		fsys.SetCrashAfter(k)
		_, err := Create(ctx, "/data/tables/t", Options{Fs: fsys})
		finished := !fsys.Crashed()
		points++
		if finished {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, crashfs.ErrCrashed, "k=%d", k)
		}
		for _, keepDirs := range []bool{false, true} {
			after := fsys.Clone()
			if keepDirs {
				after.CrashKeepingDirs()
			} else {
				after.Crash()
			}
			at := fmt.Sprintf("k=%d keepdirs=%v", k, keepDirs)
			tb, err := Open(ctx, "/data/tables/t", Options{Fs: after})
			if errors.Is(err, ErrNotExist) {
				require.False(t, finished, "%s: Create returned nil, yet no table", at)
				tb, err = Create(ctx, "/data/tables/t", Options{Fs: after})
				require.NoError(t, err, "%s: Create after the crash", at)
			}
			require.NoError(t, err, at)
			e, err := tb.Snapshot(ctx, 0)
			require.NoError(t, err, at)
			require.Equal(t, 1, e.Version, at)
			after.Crash() // what the second Create did is durable too
			_, err = Open(ctx, "/data/tables/t", Options{Fs: after})
			require.NoError(t, err, at)
		}
		if finished {
			break
		}
	}
	// mkdir x4, the temp entry created, written, synced, renamed, directory syncs.
	require.Greater(t, points, 10)
	t.Logf("%d crash points", points)
}

// crashTable creates a table at /data/t on a new crash file system and commits the segments
// of data (of schema) as version 2, one append; it returns the file system and the table.
func crashTable(t *testing.T, schema columns.Schema, data ...[]byte) (*crashfs.FS, *Table) {
	t.Helper()
	ctx := context.Background()
	start := crashfs.New()
	tb, err := Create(ctx, "/data/t", Options{Fs: start})
	require.NoError(t, err)
	segs := make([]Segment, len(data))
	for i, b := range data {
		segs[i], err = newStaged(ctx, tb, b)
		require.NoError(t, err)
	}
	v, err := tb.Commit(ctx, 1, Change{Kind: KindAppend, Added: segs, Schema: &schema})
	require.NoError(t, err)
	require.Equal(t, 2, v)
	return start, tb
}

// crashLoop runs work on clones of start that lose power after each mutating file-system
// operation in turn (k = 0, 1, ...) until a run finishes before its crash point: a run that
// crashed must fail wrapping crashfs.ErrCrashed, one that finished must succeed. Each run is
// rebooted both ways (Crash, CrashKeepingDirs) and handed to check, with a label naming the
// point and whether the work finished. It returns the crash points tried.
func crashLoop(t *testing.T, start *crashfs.FS, work func(fsys *crashfs.FS) error, check func(after *crashfs.FS, at string, finished bool)) int {
	t.Helper()
	points := 0
	for k := 0; ; k++ {
		require.Less(t, k, 2000, "the workload never finishes")
		fsys := start.Clone()
		fsys.SetCrashAfter(k)
		err := work(fsys)
		finished := !fsys.Crashed()
		points++
		if finished {
			require.NoError(t, err, "k=%d", k)
		} else {
			require.ErrorIs(t, err, crashfs.ErrCrashed, "k=%d", k)
		}
		for _, keepDirs := range []bool{false, true} {
			after := fsys.Clone()
			if keepDirs {
				after.CrashKeepingDirs()
			} else {
				after.Crash()
			}
			check(after, fmt.Sprintf("k=%d keepdirs=%v", k, keepDirs), finished)
		}
		if finished {
			return points
		}
	}
}

// TestCompactCrash cuts the power after each mutating file-system operation in turn of a
// compaction of a table at version 2 (three segments of one day: 40, 30 and 20 rows) into one
// segment, until a run finishes without reaching its crash point, and reboots each run both
// ways (Crash, CrashKeepingDirs). After each reboot: the newest version is 2 (the three
// inputs) or 3 (one output of 90 rows, kind replace), never both nor neither; its segments
// open, verify and hold exactly the inputs' rows and sum of metric added; a Compact that
// returned nil left version 3; and another Compact ends at one segment with the same totals.
func TestCompactCrash(t *testing.T) {
	ctx := context.Background()
	start, tb := crashTable(t, testSchema(false),
		segBytes(t, 20, 40, day, false), segBytes(t, 21, 30, day+3600_000, false), segBytes(t, 22, 20, day+2*3600_000, false))
	want := tableTotals(t, tb)
	require.Equal(t, int64(90), want.rows)

	seen := map[int]int{}
	points := crashLoop(t, start, func(fsys *crashfs.FS) error {
		run, err := Open(ctx, "/data/t", Options{Fs: fsys})
		require.NoError(t, err)
		_, err = run.Compact(ctx, CompactOptions{})
		return err
	}, func(after *crashfs.FS, at string, finished bool) {
		tb, err := Open(ctx, "/data/t", Options{Fs: after})
		require.NoError(t, err, at)
		e, err := tb.Snapshot(ctx, 0)
		require.NoError(t, err, at)
		seen[e.Version]++
		switch e.Version {
		case 2:
			require.False(t, finished, "%s: Compact returned nil, yet version 2 is the newest", at)
			require.Len(t, e.Segments, 3, at)
		case 3:
			require.Equal(t, KindReplace, e.Operation.Kind, at)
			require.Len(t, e.Segments, 1, at)
		default:
			require.Failf(t, "newest version", "%s: %d", at, e.Version)
		}
		require.Equal(t, want, tableTotals(t, tb), at)
		_, err = tb.Compact(ctx, CompactOptions{})
		require.NoError(t, err, at)
		e, err = tb.Snapshot(ctx, 0)
		require.NoError(t, err, at)
		require.Len(t, e.Segments, 1, at)
		require.Equal(t, want, tableTotals(t, tb), at)
	})
	t.Logf("%d crash points, newest version after reboot: %v", points, seen)
	require.Greater(t, points, 10)
	require.Positive(t, seen[2])
	require.Positive(t, seen[3])
}

// TestCompactRollupCrash is TestCompactCrash for a compaction that rolls a raw table up at
// hour (three raw segments of one day: 400, 300 and 200 rows into one rolled-up output). After
// each reboot the newest version is 2 (the raw inputs) or 3 (one output rolled up at hour,
// recording it), and the counts, sums and hourly sums are exact in either; another
// compaction with rollup ends at that one output.
func TestCompactRollupCrash(t *testing.T) {
	ctx := context.Background()
	start, tb := crashTable(t, countSchema(raw), countSegBytes(t, 30, 400, day, 5000, raw),
		countSegBytes(t, 31, 300, day+3600_000, 5000, raw), countSegBytes(t, 32, 200, day+2*3600_000, 5000, raw))
	want, rows, _ := readHourTotals(t, tb)
	require.Equal(t, int64(900), rows)
	ro := CompactOptions{Rollup: true, RollupGranularity: columns.GranularityHour}

	seen := map[int]int{}
	points := crashLoop(t, start, func(fsys *crashfs.FS) error {
		run, err := Open(ctx, "/data/t", Options{Fs: fsys})
		require.NoError(t, err)
		_, err = run.Compact(ctx, ro)
		return err
	}, func(after *crashfs.FS, at string, finished bool) {
		tb, err := Open(ctx, "/data/t", Options{Fs: after})
		require.NoError(t, err, at)
		e, err := tb.Snapshot(ctx, 0)
		require.NoError(t, err, at)
		seen[e.Version]++
		got, _, classes := readHourTotals(t, tb)
		require.Equal(t, want, got, at)
		switch e.Version {
		case 2:
			require.False(t, finished, "%s: Compact returned nil, yet version 2 is the newest", at)
			require.Equal(t, map[class]int{raw: 3}, classes, at)
		case 3:
			require.Equal(t, KindReplace, e.Operation.Kind, at)
			require.Equal(t, map[class]int{byHour: 1}, classes, at)
			require.Equal(t, byHour, e.Segments[0].classIn(e.Schema), at)
		default:
			require.Failf(t, "newest version", "%s: %d", at, e.Version)
		}
		_, err = tb.Compact(ctx, ro)
		require.NoError(t, err, at)
		got, _, classes = readHourTotals(t, tb)
		require.Equal(t, want, got, at)
		require.Equal(t, map[class]int{byHour: 1}, classes, at)
	})
	t.Logf("%d crash points, newest version after reboot: %v", points, seen)
	require.Greater(t, points, 10)
	require.Positive(t, seen[2])
	require.Positive(t, seen[3])
}

// TestVacuumCrash cuts the power after each mutating operation of a Vacuum (Retain 0, pending
// files at once) of a table compacted from three segments into one, with a stray segment no
// version lists, and reboots both ways: the newest version always reads whole with the same
// rows, and a second Vacuum leaves only the newest entry and the segment it lists.
func TestVacuumCrash(t *testing.T) {
	ctx := context.Background()
	start, tb := crashTable(t, testSchema(false),
		segBytes(t, 30, 40, day, false), segBytes(t, 31, 30, day+3600_000, false), segBytes(t, 32, 20, day+2*3600_000, false))
	_, err := tb.Compact(ctx, CompactOptions{})
	require.NoError(t, err)
	_, err = newStaged(ctx, tb, segBytes(t, 40, 5, day, false))
	require.NoError(t, err)
	want := tableTotals(t, tb)
	newest, err := tb.Newest(ctx)
	require.NoError(t, err)

	points := crashLoop(t, start, func(fsys *crashfs.FS) error {
		run, err := Open(ctx, "/data/t", Options{Fs: fsys})
		require.NoError(t, err)
		_, err = run.Vacuum(ctx, VacuumOptions{PendingAge: -1})
		return err
	}, func(after *crashfs.FS, at string, finished bool) {
		tb, err := Open(ctx, "/data/t", Options{Fs: after})
		require.NoError(t, err, at)
		v, err := tb.Newest(ctx)
		require.NoError(t, err, at)
		require.Equal(t, newest, v, at)
		require.Equal(t, want, tableTotals(t, tb), at)
		_, err = tb.Vacuum(ctx, VacuumOptions{PendingAge: -1})
		require.NoError(t, err, at)
		e, err := tb.Snapshot(ctx, 0)
		require.NoError(t, err, at)
		require.Len(t, e.Segments, 1, at)
		require.Equal(t, []string{e.Segments[0].Name[len(segmentsDir)+1:]}, listSegments(t, tb), at)
		names, err := tb.st.list(ctx, logDir)
		require.NoError(t, err, at)
		require.Equal(t, []string{entryName(newest)[len(logDir)+1:]}, names, at)
	})
	t.Logf("%d crash points", points)
	require.Greater(t, points, 5)
}

// TestSplitCrash cuts the power after each mutating file-system operation of a compaction that
// splits: a segment crossing midnight (30 rows before, 20 after) and a segment of the first day
// (10 rows), target 100 rows: the split commits version 3 (three segments), then the first
// day's two merge into version 4. After each reboot (both ways) the newest version is 2, 3 or
// 4, its segments hold exactly the rows of version 2, a Compact that returned nil left
// version 4, and another Compact ends compacted with the same rows.
func TestSplitCrash(t *testing.T) {
	ctx := context.Background()
	start, tb := crashTable(t, testSchema(false),
		segBytesStep(t, 50, 50, day+24*3600_000-30*60_000, 60_000, false), // 23:30 to 00:19
		segBytes(t, 51, 10, day+3600_000, false))
	want := tableRows(t, tb)
	require.Len(t, want, 60)
	o := CompactOptions{TargetRows: 100}

	seen := map[int]int{}
	points := crashLoop(t, start, func(fsys *crashfs.FS) error {
		run, err := Open(ctx, "/data/t", Options{Fs: fsys})
		require.NoError(t, err)
		_, err = run.Compact(ctx, o)
		return err
	}, func(after *crashfs.FS, at string, finished bool) {
		tb, err := Open(ctx, "/data/t", Options{Fs: after})
		require.NoError(t, err, at)
		e, err := tb.Snapshot(ctx, 0)
		require.NoError(t, err, at)
		seen[e.Version]++
		require.Contains(t, []int{2, 3, 4}, e.Version, at)
		if finished {
			require.Equal(t, 4, e.Version, "%s: Compact returned nil", at)
		}
		require.Equal(t, want, tableRows(t, tb), at)
		_, err = tb.Compact(ctx, o)
		require.NoError(t, err, at)
		require.Equal(t, want, tableRows(t, tb), at)
		requireCompacted(t, tb, o.TargetRows)
	})
	t.Logf("%d crash points, newest version after reboot: %v", points, seen)
	require.Positive(t, seen[2])
	require.Positive(t, seen[3])
	require.Positive(t, seen[4])
}
