package merger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/crashfs"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/tmpfile"
)

// crashDir is the directory of the inputs and the output in TestMergeCrash.
const crashDir = "/data"

// TestMergeCrash merges 3 inputs on a crash-simulating file system (Options.Fs), cutting the
// power after each mutating file-system operation of the merge in turn, until a run finishes
// without reaching its crash point. Each run is rebooted twice, once dropping every unsynced
// directory change (crashfs Crash) and once keeping them all (CrashKeepingDirs); file data
// always reverts to its last sync. Cases: every durability mode, with and without an old dst
// to Replace, with MaxFanIn 2 (two phases, one intermediate segment; the third input handed
// on) and in one phase, staged in the default medium and in a tmpfile medium on the same file
// system whose small buffers send the parts to its file (more operations to cut). After each
// reboot:
//
//   - SyncOutput, SyncAll: if Merge returned nil, dst is the complete new segment (the bytes
//     of a reference merge). Otherwise dst is absent (no Replace), the complete old segment
//     (Replace), or the complete new one; never anything else.
//   - SyncNone (its doc's promise): dst is absent, the old segment (Replace only), the new
//     one, or, only where directory changes outlived file data, a file that fails to open or
//     to verify with an error wrapping columns.ErrCorrupt; never a file that opens and
//     verifies but is neither.
//   - The inputs are byte for byte what they were.
//   - Every other file in the directory is a temp file columns.IsTempFile recognises, or an
//     empty file of tmpfile's pattern; after columns.SweepTemp and tmpfile.Sweep only the
//     inputs and dst remain.
//
// Before any crash, a run that finished returned nil, left dst the new segment and nothing
// else new in the directory; one that did not returned an error wrapping crashfs.ErrCrashed.
func TestMergeCrash(t *testing.T) {
	ins, old := crashInputs(t)
	want := referenceMerge(t, ins)
	paths := make([]string, len(ins))
	for i := range ins {
		paths[i] = fmt.Sprintf("%s/in%d.seg", crashDir, i)
	}
	dst := crashDir + "/out.seg"

	// The full sweep takes about 15 s; -short drops the one-phase merges staged in the small
	// tmpfile medium (the longest of the one-phase cases, and the least interesting), the race
	// detector (ten times slower) keeps the default medium and replace=true only.
	full := !testing.Short() && !raceEnabled
	points, reboots, violations := 0, 0, 0
	for _, stage := range []bool{false, true} {
		if stage && raceEnabled {
			continue
		}
		for _, fanIn := range []int{2, 0} {
			if stage && fanIn == 0 && !full {
				continue
			}
			for _, mode := range []medium.SyncMode{medium.SyncNone, medium.SyncOutput, medium.SyncAll} {
				for _, replace := range []bool{false, true} {
					if raceEnabled && !replace {
						continue // replace=true, the longer protocol, stands for both under -race
					}
					med := "default"
					if stage {
						med = "tmpfile8k"
					}
					name := fmt.Sprintf("medium=%s/maxfanin=%d/sync=%s/replace=%v", med, fanIn, mode, replace)
					t.Run(name, func(t *testing.T) {
						c := &crashCase{t: t, paths: paths, ins: ins, dst: dst, mode: mode, replace: replace, want: want, stage: stage}
						if replace {
							c.old = old
						}
						c.run(fanIn)
						t.Logf("%s: %d crash points, %d reboots checked, %d violations (dst after reboot: %v)",
							name, c.points, c.reboots, c.violations, c.seen)
						// At least: the staging file created and unlinked; the output's temp file
						// created, written, chmodded, renamed; in two phases the intermediate's
						// name reserved, its temp file created, written, chmodded, renamed over
						// it, and removed.
						require.Greater(t, c.points, map[int]int{0: 6, 2: 12}[fanIn])
						if mode == medium.SyncNone {
							// The model shows the hazard the syncs exist for: named before its
							// data reached the disk, dst is damaged (and caught by the checksums).
							require.Positive(t, c.seen[dstCorrupt], "SyncNone never left a damaged dst: the crash model is not exercised")
						}
						points += c.points
						reboots += c.reboots
						violations += c.violations
					})
				}
			}
		}
	}
	t.Logf("total: %d crash points, %d reboots checked, %d violations", points, reboots, violations)
	require.Zero(t, violations)
}

// crashInputs makes the 3 inputs (a few hundred rows each of the basic schema: dictionary,
// multi-value and raw dimensions, several metrics) and an old output, different from any
// merge of them, and returns their bytes.
func crashInputs(t *testing.T) (ins [][]byte, old []byte) {
	t.Helper()
	dir := t.TempDir()
	for i, rows := range []int{1400, 1000, 1200} {
		seg := genSegment(t, dir, int64(9100+i), rows)
		b, err := os.ReadFile(seg.Name())
		require.NoError(t, err)
		ins = append(ins, b)
	}
	seg := genSegment(t, dir, 9199, 50)
	old, err := os.ReadFile(seg.Name())
	require.NoError(t, err)
	return ins, old
}

// referenceMerge merges the inputs on the OS in one phase and checks that the same merge on
// an afero.MemMapFs, in two phases, gives the same bytes: the Fs changes where files go, not
// what is written. It returns those bytes, a segment that opens and verifies.
func referenceMerge(t *testing.T, ins [][]byte) []byte {
	t.Helper()
	segs := make([]*columns.Segment, len(ins))
	for i, b := range ins {
		seg, err := columns.NewSegment(bytes.NewReader(b), int64(len(b)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = seg.Close() })
		segs[i] = seg
	}
	osDst := filepath.Join(t.TempDir(), "ref.seg")
	mustMerge(t, segs, osDst, Options{Durability: medium.Durability{Sync: medium.SyncNone}})
	want, err := os.ReadFile(osDst)
	require.NoError(t, err)

	mem := afero.NewMemMapFs()
	require.NoError(t, mem.MkdirAll(crashDir, 0o755))
	res := mustMerge(t, segs, crashDir+"/ref.seg", Options{MaxFanIn: 2, Fs: mem})
	require.Equal(t, 2, res.Phases)
	got, err := afero.ReadFile(mem, crashDir+"/ref.seg")
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "the merge on a MemMapFs in 2 phases differs from the one-phase merge on the OS")
	names, err := readDirNames(mem, crashDir)
	require.NoError(t, err)
	require.Equal(t, []string{"ref.seg"}, names, "the merge left files behind")

	seg, err := columns.NewSegment(bytes.NewReader(want), int64(len(want)))
	require.NoError(t, err)
	require.NoError(t, seg.Verify())
	require.NoError(t, seg.Close())
	return want
}

// What dst held after a reboot.
type dstState string

const (
	dstAbsent  dstState = "absent"
	dstOld     dstState = "old"
	dstNew     dstState = "new"
	dstCorrupt dstState = "corrupt" // fails to open or verify with ErrCorrupt
	dstOther   dstState = "other"   // anything else: always a violation
)

// crashCase runs one case of TestMergeCrash.
type crashCase struct {
	t       *testing.T
	paths   []string
	ins     [][]byte
	dst     string
	mode    medium.SyncMode
	replace bool
	old     []byte // the old dst (Replace), else nil
	want    []byte
	// stage: the merge stages in a tmpfile medium on the crashing file system with 8 KiB
	// buffers (so its parts reach the file, many writes, synced under SyncAll), not the default
	// medium (whose buffers hold these small parts in memory).
	stage bool

	points, reboots, violations int
	seen                        map[dstState]int
}

// violate records a violation; the first few are reported in full.
func (c *crashCase) violate(format string, args ...any) {
	c.t.Helper()
	c.violations++
	if c.violations <= 10 {
		c.t.Errorf(format, args...)
	}
}

// start builds the durable starting state: the inputs and, with Replace, the old dst, every
// file and the directories synced.
func (c *crashCase) start() *crashfs.FS {
	t := c.t
	t.Helper()
	fsys := crashfs.New()
	require.NoError(t, fsys.MkdirAll(crashDir, 0o755))
	files := slices.Clone(c.paths)
	for i, p := range c.paths {
		require.NoError(t, afero.WriteFile(fsys, p, c.ins[i], 0o644))
	}
	if c.old != nil {
		require.NoError(t, afero.WriteFile(fsys, c.dst, c.old, 0o644))
		files = append(files, c.dst)
	}
	for _, n := range append(files, crashDir, "/") {
		f, err := fsys.Open(n)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}
	return fsys
}

func (c *crashCase) run(fanIn int) {
	t := c.t
	start := c.start()
	c.seen = map[dstState]int{}
	for k := 0; ; k++ {
		require.Less(t, k, 100_000, "the merge never finishes")
		fsys := start.Clone()
		fsys.SetCrashAfter(k)
		err := c.merge(fsys, fanIn)
		finished := !fsys.Crashed()
		c.points++
		switch {
		case finished:
			require.NoError(t, err, "k=%d: the merge finished without a crash", k)
			got, rerr := afero.ReadFile(fsys, c.dst)
			require.NoError(t, rerr)
			require.True(t, bytes.Equal(c.want, got), "k=%d: before any crash, dst is not the new segment", k)
			names, rerr := readDirNames(fsys, crashDir)
			require.NoError(t, rerr)
			require.Equal(t, c.expectNames(true), names, "k=%d: the merge left files behind", k)
		case err == nil:
			c.violate("k=%d: the merge returned nil past its crash point", k)
		case !errors.Is(err, crashfs.ErrCrashed):
			c.violate("k=%d: the merge failed with an error that does not wrap the crash: %v", k, err)
		}
		for _, keepDirs := range []bool{false, true} {
			after := fsys.Clone()
			if keepDirs {
				after.CrashKeepingDirs()
			} else {
				after.Crash()
			}
			c.reboots++
			c.check(after, k, err == nil, keepDirs)
		}
		if finished {
			return
		}
	}
}

// merge opens the inputs from fsys and merges them into dst.
func (c *crashCase) merge(fsys *crashfs.FS, fanIn int) error {
	t := c.t
	segs := make([]*columns.Segment, len(c.paths))
	for i, p := range c.paths {
		f, err := fsys.Open(p)
		require.NoError(t, err)
		defer func() { _ = f.Close() }()
		seg, err := columns.NewSegment(f, int64(len(c.ins[i])))
		require.NoError(t, err)
		defer func() { _ = seg.Close() }()
		segs[i] = seg
	}
	opts := Options{MaxFanIn: fanIn, Fs: fsys, Replace: c.replace, Durability: medium.Durability{Sync: c.mode}}
	if c.stage {
		med, err := tmpfile.New(tmpfile.Options{Fs: fsys, Dir: crashDir, MinBufferSize: 8 << 10, BufferSize: 8 << 10,
			Durability: opts.Durability})
		if err != nil {
			return err // crashed creating it
		}
		defer func() { _ = med.Close() }()
		opts.Medium = med
	}
	res, err := Merge(context.Background(), segs, c.dst, opts)
	if err == nil && fanIn == 2 {
		require.Equal(t, 2, res.Phases)
	}
	return err
}

// expectNames lists the directory as it should be: the inputs, and dst if present.
func (c *crashCase) expectNames(withDst bool) []string {
	var names []string
	for _, p := range c.paths {
		names = append(names, filepath.Base(p))
	}
	if withDst {
		names = append(names, filepath.Base(c.dst))
	}
	slices.Sort(names)
	return names
}

// check checks the rebooted file system after a crash at point k; returned: Merge returned nil.
func (c *crashCase) check(fsys *crashfs.FS, k int, returned, keepDirs bool) {
	at := fmt.Sprintf("k=%d keepdirs=%v", k, keepDirs)
	for i, p := range c.paths {
		got, err := afero.ReadFile(fsys, p)
		if err != nil || !bytes.Equal(got, c.ins[i]) {
			c.violate("%s: input %s changed (%d bytes of %d, err %v)", at, p, len(got), len(c.ins[i]), err)
		}
	}

	state := c.classify(fsys, at)
	c.seen[state]++
	switch c.mode {
	case medium.SyncOutput, medium.SyncAll:
		switch {
		case returned && state != dstNew:
			c.violate("%s: Merge returned nil, yet after the crash dst is %s", at, state)
		case state == dstNew:
		case c.replace && state != dstOld:
			c.violate("%s: with Replace, dst is %s: neither the old segment nor the new", at, state)
		case !c.replace && state != dstAbsent:
			c.violate("%s: dst is %s: neither absent nor the new segment", at, state)
		}
	case medium.SyncNone:
		switch state {
		case dstAbsent, dstNew:
		case dstOld:
			if !c.replace {
				c.violate("%s: dst is an old segment there was none of", at)
			}
		case dstCorrupt:
			if !keepDirs {
				c.violate("%s: dst is damaged, though directory changes were dropped with the data", at)
			}
		case dstOther:
			c.violate("%s: dst opens and verifies, but is neither the old segment nor the new", at)
		}
	}

	// Leftovers: temp files a sweep recognises, and nothing else.
	names, err := readDirNames(fsys, crashDir)
	if err != nil {
		c.violate("%s: list %s: %v", at, crashDir, err)
		return
	}
	for _, n := range names {
		path := crashDir + "/" + n
		if n == filepath.Base(c.dst) || slices.Contains(c.paths, path) {
			continue
		}
		ours, err := columns.IsTempFile(fsys, path)
		if !ours && tmpfile.IsTempName(n) {
			fi, serr := fsys.Stat(path)
			ours, err = serr == nil && fi.Mode().IsRegular() && fi.Size() == 0, serr
		}
		if err != nil || !ours {
			c.violate("%s: %s left behind, not a temp file a sweep removes (err %v)", at, n, err)
		}
	}
	if _, err := columns.SweepTemp(fsys, crashDir); err != nil {
		c.violate("%s: columns.SweepTemp: %v", at, err)
	}
	if _, err := tmpfile.Sweep(fsys, crashDir); err != nil {
		c.violate("%s: tmpfile.Sweep: %v", at, err)
	}
	names, err = readDirNames(fsys, crashDir)
	if err != nil {
		c.violate("%s: list %s: %v", at, crashDir, err)
		return
	}
	if wantNames := c.expectNames(state != dstAbsent); !slices.Equal(wantNames, names) {
		c.violate("%s: after the sweeps the directory holds %v, want %v", at, names, wantNames)
	}
}

// classify says what dst holds.
func (c *crashCase) classify(fsys afero.Fs, at string) dstState {
	got, err := afero.ReadFile(fsys, c.dst)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return dstAbsent
	case err != nil:
		c.violate("%s: read dst: %v", at, err)
		return dstOther
	case bytes.Equal(got, c.want):
		return dstNew
	case c.old != nil && bytes.Equal(got, c.old):
		return dstOld
	}
	seg, err := columns.NewSegment(bytes.NewReader(got), int64(len(got)))
	if err == nil {
		err = seg.Verify()
		_ = seg.Close()
	}
	if errors.Is(err, columns.ErrCorrupt) {
		return dstCorrupt
	}
	return dstOther
}

// readDirNames lists a directory of fsys, sorted.
func readDirNames(fsys afero.Fs, dir string) ([]string, error) {
	infos, err := afero.ReadDir(fsys, dir)
	names := make([]string, len(infos))
	for i, fi := range infos {
		names[i] = fi.Name()
	}
	return names, err
}
