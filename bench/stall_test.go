//go:build linux

package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/writeout/writeout/bench/internal/meminfo"
	"github.com/writeout/writeout/internal/sys"
)

// TestWriteStalls is Cassandra's stall table (issue 12): about 2 GiB written in fixed-size
// Write calls to a fresh file and synced per policy, the producer throttled to a third of the
// disk's measured write rate and unthrottled, while a goroutine samples Dirty+Writeback from
// /proc/meminfo and another reads random 4 KiB blocks with O_DIRECT from a file on the same
// disk. It runs only with WRITEOUT_STALL=1 (minutes of disk traffic); see stallConfig for the
// other variables and RESULTS.md for the command and the figures.
//
// The write path is that of columns' publish: each Write is a write(2) of the whole chunk
// followed by the same sys.Pacer the library uses (trickleWriter: write, then Advance to the
// new end), and the published file's one fdatasync at the end.
func TestWriteStalls(t *testing.T) {
	if os.Getenv("WRITEOUT_STALL") == "" {
		t.Skip("stall harness: set WRITEOUT_STALL=1 to run it (minutes of disk traffic)")
	}
	cfg := stallConfig(t)
	target := "a fresh file per run"
	if cfg.overwrite {
		target = "one cached file overwritten"
	}
	fmt.Printf("stall: dir %s, %d MiB in %d KiB writes to %s, %d runs per cell, trickle every %d MiB, reads in a %d MiB file, settle %s\n",
		cfg.dir, cfg.size>>20, cfg.chunk>>10, target, cfg.reps, cfg.trickle>>20, cfg.readSize>>20, cfg.settle)

	readPath := filepath.Join(cfg.dir, "stall-read")
	require.NoError(t, makeReadFile(readPath, cfg.readSize))
	defer func() { _ = os.Remove(readPath) }()
	defer func() { _ = os.Remove(filepath.Join(cfg.dir, "stall-out")) }()

	rate := cfg.rate
	if rate == 0 {
		var err error
		rate, err = calibrate(filepath.Join(cfg.dir, "stall-calibrate"), cfg.size, cfg.chunk)
		require.NoError(t, err)
	}
	throttles := []struct {
		name string
		rate float64 // bytes a second; 0: as fast as write(2) goes
	}{{fmt.Sprintf("throttled (%.0f MB/s)", rate/3/1e6), rate / 3}, {"unthrottled", 0}}

	type cell struct{ throttle, policy int }
	runs := map[cell][]stallRun{}
	for rep := range cfg.reps {
		for ti, th := range throttles {
			if cfg.only != "" && !strings.HasPrefix(th.name, cfg.only) {
				continue
			}
			for k := range stallPolicies {
				pi := (k + rep) % len(stallPolicies) // rotate the order each repetition
				r, err := runStall(cfg, th.rate, stallPolicies[pi], readPath)
				require.NoError(t, err)
				fmt.Printf("run %d %s %-13s %s\n", rep+1, th.name, stallPolicies[pi], r)
				runs[cell{ti, pi}] = append(runs[cell{ti, pi}], r)
			}
		}
	}

	fmt.Printf("\nmedians of %d runs, %d MiB in %d KiB writes\n\n", cfg.reps, cfg.size>>20, cfg.chunk>>10)
	fmt.Println("| producer | policy | worst Write | p99 Write | final sync | total blocked | total time | peak Dirty+Writeback | read p99 (4 KiB O_DIRECT) | reads | pacer calls |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	med := map[cell]stallRun{}
	for ti, th := range throttles {
		if len(runs[cell{ti, 0}]) == 0 {
			continue
		}
		for pi, pol := range stallPolicies {
			m := medianRun(runs[cell{ti, pi}])
			med[cell{ti, pi}] = m
			fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %d MiB | %s | %d | %d |\n", th.name, pol,
				ms(m.worst), ms(m.p99), ms(m.finalSync), ms(m.blocked), ms(m.total), m.peakDirty>>20,
				ms(m.readP99), m.reads, m.pacerCalls)
		}
	}
	fmt.Println()
	for ti, th := range throttles {
		if len(runs[cell{ti, 0}]) == 0 {
			continue
		}
		none, end := med[cell{ti, 0}], med[cell{ti, 1}]
		for _, pi := range []int{3, 4} {
			tr := med[cell{ti, pi}]
			fmt.Printf("%s, %s: blocked / none blocked = %.3f (bar 3: at most 1.15); final sync / end final sync = %.4f (bar 3: at most 0.05)\n",
				th.name, stallPolicies[pi], float64(tr.blocked)/float64(none.blocked), float64(tr.finalSync)/float64(end.finalSync))
		}
	}
}

// stallPolicies are the sync policies compared, in the table's order.
var stallPolicies = []stallPolicy{syncNever, syncAtEnd, syncEvery10, syncTrickleInline, syncTrickle}

type stallPolicy int

const (
	syncNever         stallPolicy = iota // no sync at all
	syncAtEnd                            // one fdatasync at the end
	syncEvery10                          // an fdatasync after every 10 MiB, and one at the end
	syncTrickleInline                    // sys.Pacer every cfg.trickle bytes, its calls made in Write, and one fdatasync at the end
	syncTrickle                          // the same in the background (Pacer.Background: what publish and tmpfile do), Close, one fdatasync
)

func (p stallPolicy) String() string {
	switch p {
	case syncNever:
		return "none"
	case syncAtEnd:
		return "end"
	case syncEvery10:
		return "every10"
	case syncTrickleInline:
		return "trickle-inline"
	case syncTrickle:
		return "trickle"
	}
	return "policy(" + strconv.Itoa(int(p)) + ")"
}

type stallCfg struct {
	dir      string
	size     int64   // bytes written per run
	chunk    int64   // bytes per Write
	trickle  int64   // the pacer's interval
	readSize int64   // size of the file the reader reads
	reps     int     // runs per cell
	rate     float64 // the disk's write rate in bytes a second; 0: measure it
	reader   bool    // run the concurrent O_DIRECT reader
	only     string  // run only this producer (throttled, unthrottled); "": both
	// overwrite writes over a file of cfg.size bytes made once, cached and synced, in place of
	// a fresh file per run: no page is allocated during a run.
	overwrite bool
	// settle is the pause between the sync(2) that starts a run and its first write. On this
	// VM (Firecracker, virtio-balloon free page reporting) memory left free for about 2 s is
	// handed back to the host, and a page cache page allocated from it then costs a host page
	// fault, ~0.8 ms a MiB; a run started at once would reuse the pages the previous run's
	// file just freed, hot or cold by chance. 3 s makes every run start alike, cold.
	settle time.Duration
}

// stallConfig reads the harness's settings: WRITEOUT_STALL_DIR (default a t.TempDir, which
// must be on the disk under test, not a tmpfs), WRITEOUT_STALL_MIB (2048), WRITEOUT_STALL_CHUNK_KIB
// (1024), WRITEOUT_STALL_TRICKLE_MIB (8, segtool's default), WRITEOUT_STALL_READ_MIB (1024),
// WRITEOUT_STALL_REPS (3) and WRITEOUT_STALL_RATE_MBS (the disk's write rate in MB/s; unset:
// measured by calibrate). For diagnosis: WRITEOUT_STALL_READER=0 runs without the reader,
// WRITEOUT_STALL_ONLY=throttled (or unthrottled) runs one producer only. WRITEOUT_STALL_OVERWRITE=1
// overwrites one file, made once and kept in the page cache, instead of writing a fresh file
// per run: the runs then allocate no page cache pages, whose cost on this VM is noise.
// WRITEOUT_STALL_SETTLE_MS (3000) is the pause before each run (see stallCfg.settle).
func stallConfig(t *testing.T) stallCfg {
	num := func(name string, def int64) int64 {
		s := os.Getenv(name)
		if s == "" {
			return def
		}
		v, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err, name)
		require.Positive(t, v, name)
		return v
	}
	cfg := stallCfg{
		dir:       os.Getenv("WRITEOUT_STALL_DIR"),
		size:      num("WRITEOUT_STALL_MIB", 2048) << 20,
		chunk:     num("WRITEOUT_STALL_CHUNK_KIB", 1024) << 10,
		trickle:   num("WRITEOUT_STALL_TRICKLE_MIB", 8) << 20,
		readSize:  num("WRITEOUT_STALL_READ_MIB", 1024) << 20,
		reps:      int(num("WRITEOUT_STALL_REPS", 3)),
		rate:      float64(num("WRITEOUT_STALL_RATE_MBS", 0)) * 1e6,
		reader:    os.Getenv("WRITEOUT_STALL_READER") != "0",
		only:      os.Getenv("WRITEOUT_STALL_ONLY"),
		overwrite: os.Getenv("WRITEOUT_STALL_OVERWRITE") == "1",
	}
	cfg.settle = time.Duration(num("WRITEOUT_STALL_SETTLE_MS", 3000)) * time.Millisecond
	if cfg.dir == "" {
		cfg.dir = t.TempDir()
	} else {
		d, err := os.MkdirTemp(cfg.dir, "stall-*")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(d) })
		cfg.dir = d
	}
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(cfg.dir, &st))
	require.NotEqual(t, int64(unix.TMPFS_MAGIC), st.Type, "stall: %s is a tmpfs; set WRITEOUT_STALL_DIR to a directory on a disk", cfg.dir)
	return cfg
}

// stallRun is one run's figures.
type stallRun struct {
	worst, p99 time.Duration // of the Write calls, pacing and periodic syncs included
	finalSync  time.Duration // the fdatasync at the end; 0 for none
	blocked    time.Duration // every Write call plus the final sync
	total      time.Duration // first Write to the end of the final sync, throttle sleeps included
	peakDirty  int64         // peak Dirty+Writeback in bytes
	baseDirty  int64         // Dirty+Writeback before the run
	readP99    time.Duration // of the concurrent O_DIRECT reads
	reads      int
	pacerCalls int // sync_file_range calls (trickle) or fdatasyncs (every10, final excluded)
	// Time in the pacer's sync_file_range calls, by kind (part of blocked).
	submit, wait time.Duration
}

func (r stallRun) String() string {
	return fmt.Sprintf("worst %s p99 %s final %s blocked %s total %s peak %d MiB (base %d MiB) read-p99 %s reads %d calls %d (WRITE %s, WAIT_BEFORE %s)",
		ms(r.worst), ms(r.p99), ms(r.finalSync), ms(r.blocked), ms(r.total), r.peakDirty>>20, r.baseDirty>>20,
		ms(r.readP99), r.reads, r.pacerCalls, ms(r.submit), ms(r.wait))
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + " ms" }

// medianRun takes the median of each figure separately.
func medianRun(rs []stallRun) stallRun {
	pick := func(f func(stallRun) int64) int64 {
		v := make([]int64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return stallRun{
		worst:      time.Duration(pick(func(r stallRun) int64 { return int64(r.worst) })),
		p99:        time.Duration(pick(func(r stallRun) int64 { return int64(r.p99) })),
		finalSync:  time.Duration(pick(func(r stallRun) int64 { return int64(r.finalSync) })),
		blocked:    time.Duration(pick(func(r stallRun) int64 { return int64(r.blocked) })),
		total:      time.Duration(pick(func(r stallRun) int64 { return int64(r.total) })),
		peakDirty:  pick(func(r stallRun) int64 { return r.peakDirty }),
		baseDirty:  pick(func(r stallRun) int64 { return r.baseDirty }),
		readP99:    time.Duration(pick(func(r stallRun) int64 { return int64(r.readP99) })),
		reads:      int(pick(func(r stallRun) int64 { return int64(r.reads) })),
		pacerCalls: int(pick(func(r stallRun) int64 { return int64(r.pacerCalls) })),
		submit:     time.Duration(pick(func(r stallRun) int64 { return int64(r.submit) })),
		wait:       time.Duration(pick(func(r stallRun) int64 { return int64(r.wait) })),
	}
}

// p99 returns the 99th percentile (nearest rank) of d, sorting it.
func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := (len(d)*99+99)/100 - 1
	return d[i]
}

// runStall writes cfg.size bytes to a fresh file per policy, at rate bytes a second if rate is
// positive, and measures it.
func runStall(cfg stallCfg, rate float64, pol stallPolicy, readPath string) (res stallRun, err error) {
	path := filepath.Join(cfg.dir, "stall-out")
	flags := os.O_WRONLY
	if cfg.overwrite {
		// The file stays from one run to the next (made by the first), clean and cached.
		if fi, err := os.Stat(path); err != nil || fi.Size() != cfg.size {
			if err := makeReadFile(path, cfg.size); err != nil {
				return res, err
			}
		}
	} else {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return res, err
		}
		flags |= os.O_CREATE | os.O_TRUNC
	}
	syncAll() // no run pays for the one before
	time.Sleep(cfg.settle)

	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return res, err
	}
	defer func() {
		err = errors.Join(err, f.Close())
		if !cfg.overwrite {
			err = errors.Join(err, os.Remove(path))
		}
	}()

	base, err := meminfo.Read()
	if err != nil {
		return res, err
	}
	res.baseDirty = base
	stop := make(chan struct{})
	var wg sync.WaitGroup
	sampler := meminfo.Start(5 * time.Millisecond)
	var readLat []time.Duration
	var readErr error
	if cfg.reader {
		wg.Go(func() { readLat, readErr = readRandom(readPath, cfg.readSize, stop) })
	}

	calls := sys.Default
	// The library's call, timed per kind: the WRITE submissions and the WAIT_BEFORE waits.
	srf := calls.SyncFileRange
	calls.SyncFileRange = func(f *os.File, off, n int64, flags int) error {
		start := time.Now()
		err := srf(f, off, n, flags)
		if flags == sys.SyncFileRangeWrite {
			res.submit += time.Since(start)
		} else {
			res.wait += time.Since(start)
		}
		return err
	}
	pacer := &sys.Pacer{Calls: &calls, File: f}
	switch pol {
	case syncTrickleInline:
		pacer.Every = cfg.trickle
	case syncTrickle:
		pacer.Every, pacer.Background = cfg.trickle, true
	case syncNever, syncAtEnd, syncEvery10:
	}
	fail := func(err error) (stallRun, error) {
		err = errors.Join(err, pacer.Close())
		_, _ = sampler.Stop()
		close(stop)
		wg.Wait()
		return res, err
	}
	const every10 = 10 << 20
	buf := make([]byte, cfg.chunk)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range buf {
		buf[i] = byte(rnd.Uint32())
	}
	lat := make([]time.Duration, 0, cfg.size/cfg.chunk+1)
	var off, nextSync int64 = 0, every10
	syncs := 0
	t0 := time.Now()
	for off < cfg.size {
		if rate > 0 {
			due := t0.Add(time.Duration(float64(off) / rate * 1e9))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		p := buf[:min(cfg.chunk, cfg.size-off)]
		start := time.Now()
		n, err := f.Write(p)
		off += int64(n)
		if err == nil {
			switch pol {
			case syncTrickle, syncTrickleInline:
				err = pacer.Advance(off)
			case syncEvery10:
				if off >= nextSync {
					syncs++
					err = calls.Fdatasync(f)
					nextSync += every10
				}
			case syncNever, syncAtEnd:
			}
		}
		d := time.Since(start)
		if err != nil {
			return fail(err)
		}
		lat = append(lat, d)
		res.blocked += d
	}
	if pol != syncNever {
		start := time.Now()
		err := pacer.Close()
		if err == nil {
			err = calls.Fdatasync(f)
		}
		res.finalSync = time.Since(start)
		if err != nil {
			return fail(err)
		}
		res.blocked += res.finalSync
	}
	res.total = time.Since(t0)
	peak, samplerErr := sampler.Stop()
	close(stop)
	wg.Wait()
	if err := errors.Join(samplerErr, readErr); err != nil {
		return res, err
	}
	res.worst = slices.Max(lat)
	res.p99 = p99(lat)
	res.peakDirty = peak
	res.readP99 = p99(readLat)
	res.reads = len(readLat)
	trickles, fallback := pacer.Counts()
	if fallback != 0 {
		return res, fmt.Errorf("stall: the pacer fell back to fdatasync (%d)", fallback)
	}
	res.pacerCalls = trickles + syncs
	return res, nil
}

// readRandom reads random aligned 4 KiB blocks of the file at path (size bytes) with O_DIRECT,
// one at a time, until stop is closed, and returns each read's latency.
func readRandom(path string, size int64, stop <-chan struct{}) (lat []time.Duration, err error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("stall: open %s O_DIRECT: %w", path, err)
	}
	defer func() { err = errors.Join(err, unix.Close(fd)) }()
	const block = 4096
	buf, err := unix.Mmap(-1, 0, block, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // page-aligned
	if err != nil {
		return nil, fmt.Errorf("stall: mmap read buffer: %w", err)
	}
	defer func() { err = errors.Join(err, unix.Munmap(buf)) }()
	rnd := rand.New(rand.NewPCG(3, 4))
	blocks := size / block
	for {
		select {
		case <-stop:
			return lat, nil
		default:
		}
		off := rnd.Int64N(blocks) * block
		start := time.Now()
		n, err := unix.Pread(fd, buf, off)
		d := time.Since(start)
		if err != nil {
			return lat, fmt.Errorf("stall: pread %s at %d: %w", path, off, err)
		}
		if n != block {
			return lat, fmt.Errorf("stall: pread %s at %d: %d bytes", path, off, n)
		}
		lat = append(lat, d)
	}
}

// makeReadFile writes a file of size bytes of random data (the reader's, or the one the
// overwrite mode overwrites) and syncs it.
func makeReadFile(path string, size int64) (err error) {
	if fi, err := os.Stat(path); err == nil && fi.Size() == size {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	buf := make([]byte, 1<<20)
	rnd := rand.New(rand.NewPCG(5, 6))
	for off := int64(0); off < size; off += int64(len(buf)) {
		for i := range buf {
			buf[i] = byte(rnd.Uint32())
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), size-off)]); err != nil {
			return err
		}
	}
	return f.Sync()
}

// calibrate measures the disk's sustained write rate three times and returns the median: size
// bytes written with O_DIRECT in chunk-sized write(2) calls to a fresh file, then one
// fdatasync, timed from the first write to the end of the sync. O_DIRECT keeps the page cache
// out of it: on this VM a page cache write into freshly allocated pages costs up to ~1 ms a MiB
// of host page faults (see RESULTS.md), which is no property of the disk.
func calibrate(path string, size, chunk int64) (float64, error) {
	var rates []float64
	for range 3 {
		r, err := calibrateOnce(path, size, chunk)
		if err != nil {
			return 0, err
		}
		rates = append(rates, r)
	}
	slices.Sort(rates)
	fmt.Printf("calibrate: disk write rate %.0f MB/s (median of 3); producer throttled to a third, %.0f MB/s\n", rates[1]/1e6, rates[1]/3/1e6)
	return rates[1], nil
}

func calibrateOnce(path string, size, chunk int64) (rate float64, err error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	syncAll()
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_DIRECT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("stall: open %s O_DIRECT: %w", path, err)
	}
	defer func() { err = errors.Join(err, unix.Close(fd), os.Remove(path)) }()
	buf, err := unix.Mmap(-1, 0, int(chunk), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // page-aligned
	if err != nil {
		return 0, fmt.Errorf("stall: mmap write buffer: %w", err)
	}
	defer func() { err = errors.Join(err, unix.Munmap(buf)) }()
	rnd := rand.New(rand.NewPCG(7, 8))
	for i := range buf {
		buf[i] = byte(rnd.Uint32())
	}
	t0 := time.Now()
	for off := int64(0); off < size; off += chunk {
		if _, err := unix.Write(fd, buf); err != nil {
			return 0, fmt.Errorf("stall: write %s O_DIRECT: %w", path, err)
		}
	}
	if err := unix.Fdatasync(fd); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	rate = float64(size) / d.Seconds()
	fmt.Printf("calibrate: %d MiB written with O_DIRECT and fdatasynced in %s: %.0f MB/s\n", size>>20, ms(d), rate/1e6)
	return rate, nil
}
