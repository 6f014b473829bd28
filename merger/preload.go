package merger

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/writeout/writeout/merger/internal/source"
)

// Preloads. A long metric task combines a streamed group's rows into its slots (loadSlots)
// when the first batch that names the group reaches it, and writes no row of the batch
// before: the merge, which has gone on to emit the group's slots, waits for it once the
// batches in flight are full, and then the task waits for the merge as it streams the next
// group. Each took turns, on one core of two: a 300 M-row hour rollup of the peers' events
// ran a third of its time on one core.
//
// So each streamed group is combined ahead, on a goroutine, as soon as its cursor starts to
// page its slots out, and the cursor's next group streams meanwhile on another (see
// cursor.streamAhead); the task takes the accumulators when the group's first batch comes.
// A group the merge pages out while as many others as may wait to be taken (see
// preloads.most) is combined by the tasks: what a merge holds of accumulators stays bounded.
// When its keys are read again, the first task that needs it combines it for every task (see
// preloads.claim), else each task combines its own.

// maxPreloads bounds the groups combined ahead and not yet taken by every task (a variable
// for tests; 0 turns preloads off), and the tables a task keeps for them (preloader.pool).
// Four let five overlapping inputs of a 300 M-row hour rollup run 10-20% faster than two.
// Past it, up to one group a source and one more (inputs over the same hours page out a
// group each at once, and one combines early) while the slot tables hold less than their
// share for groups combined ahead (bounds.aheadBytes): with five overlapping inputs, six
// took the 300 M-row hour rollup from 5.10 to 4.63 s.
var maxPreloads = 4

// For tests: claimsOff turns claims off (preloads.claim).
var claimsOff bool

// For tests: preloadsTaken counts the accumulators that tasks took from a preload;
// preloadFault, when set, is called before a group is combined ahead, and an error it returns
// is the preload's.
var (
	preloadsTaken atomic.Int64
	earlyPreloads atomic.Int64 // groups combined as soon as streamed ahead (startEarly)
	claimsTaken   atomic.Int64 // accumulators tasks took from a claim
	splitCombines atomic.Int64 // groups combined on two goroutines (splitCombine)
	preloadFault  func(g *groupAgg) error
)

// preload is one long task's accumulators of one streamed group, combined ahead.
type preload struct {
	done chan struct{} // closed once sa (or err) is set
	sa   slotAccs
	err  error
}

// preloader is what the merge's pre-aggregation needs to combine groups ahead for one long
// task: open makes the preloads' own readers of a source's values (a reader serves one
// goroutine at a time; see readerSet).
type preloader struct {
	ps   *preloads
	t    *longTask
	ti   int         // the task's index in ps.tasks, and of its preloads in a group's
	pool chan accMem // accumulators' memory the task gave back, for later preloads (one each)
	open func(in int) slotSrc
}

// readerSet is what a preload of a source reads through: each task's readers of the source's
// values (srcs, by task index) and the reader of its keys (for a group keyed again), each
// opened on first use. A source has one, handed from one preload of it to the next through a
// channel of one; a group combined early has one of its own (see startEarly).
type readerSet struct {
	srcs []slotSrc
	kr   *keyReader
}

// release gives the readers' buffers back; rs is not used after.
func (rs *readerSet) release() {
	for _, src := range rs.srcs {
		for _, c := range []*source.ChunkCache[int64]{src.vals, src.times} {
			if c != nil {
				releaseReader(c.C)
			}
		}
	}
	rs.kr.release()
}

// slotSrc is where loadSlots reads a source's values: a long task's own readers, or a
// preloader's.
type slotSrc struct {
	vals  *source.ChunkCache[int64]
	times *source.ChunkCache[int64] // first/last only
}

// preloads holds the merge's preloaders, one a long task (by its index ti), and the
// goroutines they run.
type preloads struct {
	tasks   []*preloader
	wg      sync.WaitGroup
	pending atomic.Int32 // preloads started and not yet taken
	mu      sync.Mutex
	open    map[*preload]struct{} // the preloads not taken (their memory is theirs)
	bufs    chan slotBuf          // the preloads' buffers of slots, for the next
	readers []chan *readerSet     // per source
	aheads  atomic.Int32          // groups streaming ahead (see cursor.streamAhead)
	sources int                   // the merge's sources
	early   atomic.Bool           // a group combines early (startEarly), not taken yet
	// ready is set once every task is added (setReady): the cursors stream groups ahead
	// before, on goroutines of their own, and startEarly reads the tasks.
	ready atomic.Bool
	// par is the merge's Parallelism: above 1, a group's combining is split between two
	// goroutines (see splitCombine).
	par       int
	splitBufs chan [][]int32 // the buffers of split combines (see splitCombine), for the next
	combining atomic.Int32   // groups being combined (combine)
}

// maxAheads bounds the groups that stream ahead at once, each on a goroutine with a window
// and a group's keys of its own (a variable for tests).
var maxAheads = 2

// most returns how many groups may be combined ahead and not yet taken by every task: one a
// source and one more, at least maxPreloads (0: preloads are off).
func (ps *preloads) most() int {
	if maxPreloads == 0 {
		return 0
	}
	return max(maxPreloads, ps.sources+1)
}

// aheadSlot reports whether one more group may stream ahead, and counts it if so.
func (ps *preloads) aheadSlot() bool {
	if ps.aheads.Add(1) > int32(maxAheads) {
		ps.aheads.Add(-1)
		return false
	}
	return true
}

// aheadDone ends a group's streaming ahead.
func (ps *preloads) aheadDone() { ps.aheads.Add(-1) }

// addTask makes t's preloader: open returns new readers of source in's values.
func (ps *preloads) addTask(t *longTask, sources int, open func(in int) slotSrc) {
	ps.sources = sources
	p := &preloader{ps: ps, t: t, ti: len(ps.tasks), pool: make(chan accMem, max(maxPreloads, 1)), open: open}
	t.pre = p
	ps.tasks = append(ps.tasks, p)
	if ps.bufs == nil {
		ps.bufs = make(chan slotBuf, 2)
		ps.splitBufs = make(chan [][]int32, 2)
		ps.readers = make([]chan *readerSet, sources)
		for i := range ps.readers {
			ps.readers[i] = make(chan *readerSet, 1)
			ps.readers[i] <- nil // made on first use
		}
	}
}

// setReady says that every task is added.
func (ps *preloads) setReady() { ps.ready.Store(true) }

// startEarly starts to combine g, a group just streamed ahead, while its cursor's group goes
// out, unless another group combines early already (it is taken once a task takes it): in a
// rollup of inputs that follow one another in time, each group's combining then overlaps the
// last one's, on the other core, through readers of its own (released after). One at a time:
// with overlapping inputs, every input's next group combined early held its tables and its
// readers beside the current group's (8 MiB more at 300 M rows).
func (ps *preloads) startEarly(g *groupAgg) {
	if !ps.ready.Load() || len(ps.tasks) == 0 || !ps.early.CompareAndSwap(false, true) {
		return
	}
	g.early = true
	if !ps.start(g) {
		g.early = false
		ps.early.Store(false)
		return
	}
	earlyPreloads.Add(1)
}

// start combines g ahead for every long task, on a goroutine of its own, unless it is already
// or too many groups wait already, and reports whether it did. The goroutine reads the
// group's slots once for every task. A cursor starts it as it pages the group out, or
// earlier (startEarly).
func (ps *preloads) start(g *groupAgg) bool {
	n := int32(len(ps.tasks))
	if n == 0 || ps.begun(g) {
		return false
	}
	floor, most := int32(maxPreloads)*n, int32(ps.most())*n
	for {
		k := ps.pending.Load()
		if k+n > most || k+n > floor && g.pre.tables.aheadFull() {
			return false
		}
		if ps.pending.CompareAndSwap(k, k+n) {
			break
		}
	}
	loads, ok := ps.setLoads(g, false)
	if !ok { // a task claimed it meanwhile
		ps.pending.Add(-n)
		return false
	}
	ps.wg.Add(1)
	go func() {
		defer ps.wg.Done()
		ps.run(g, loads, g.early)
	}()
	return true
}

// claim combines g for every long task now, on the calling task's goroutine, unless a preload
// of it was started or another task claimed it: the task that first needs a group keyed again
// that was not combined ahead reads its keys once for every task, which then take their
// accumulators as they would a preload's, where each read the keys again itself (a third of
// the CPU of a 300 M-row overlapping rollup's loads went to that). Claims do not count
// against maxPreloads: the group's tables are the ones the tasks would have made. Task ti's
// accumulators are made in mem, the memory of its last group's, when claim reports that it
// claimed g.
func (ps *preloads) claim(g *groupAgg, ti int, mem accMem) bool {
	if len(ps.tasks) == 0 || claimsOff {
		return false
	}
	loads, ok := ps.setLoads(g, true)
	if ok {
		loads[ti].sa.mem = mem
		ps.run(g, loads, false)
	}
	return ok
}

// begun reports whether g's loads were set (by start or claim).
func (ps *preloads) begun(g *groupAgg) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return g.loads != nil
}

// setLoads makes g's loads, one a task, unless they are made already (ok false).
func (ps *preloads) setLoads(g *groupAgg, claimed bool) (loads []*preload, ok bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if g.loads != nil {
		return nil, false
	}
	done := make(chan struct{})
	loads = make([]*preload, len(ps.tasks))
	if ps.open == nil {
		ps.open = make(map[*preload]struct{})
	}
	for i := range loads {
		loads[i] = &preload{done: done}
		ps.open[loads[i]] = struct{}{}
	}
	g.loads = slices.Clone(loads) // the tasks clear theirs as they take them
	g.claimed = claimed
	return loads, true
}

// run combines g into loads and closes their done. It reads through the source's readerSet,
// or, when own is set or another holds the source's, through readers of its own, released
// after.
func (ps *preloads) run(g *groupAgg, loads []*preload, own bool) {
	defer close(loads[0].done)
	var rs *readerSet
	if own {
		rs = &readerSet{}
	} else if g.claimed { // a task does not wait for a preload's readers
		select {
		case rs = <-ps.readers[g.in]:
		default:
			own, rs = true, &readerSet{}
		}
	} else {
		rs = <-ps.readers[g.in]
	}
	if rs == nil {
		rs = &readerSet{}
	}
	if rs.srcs == nil {
		rs.srcs = make([]slotSrc, len(ps.tasks))
	}
	for i, p := range ps.tasks {
		if rs.srcs[i].vals == nil && rs.srcs[i].times == nil {
			rs.srcs[i] = p.open(int(g.in))
		}
		if loads[i].sa.mem.bytes() > 0 { // a claimer's own
			continue
		}
		select {
		case loads[i].sa.mem = <-p.pool:
		default:
		}
	}
	err := ps.combine(g, loads, rs)
	for i := range loads {
		loads[i].err = err
	}
	if own {
		rs.release()
	} else {
		ps.readers[g.in] <- rs
	}
}

// combine combines g's rows into the accumulators of loads, one a task, reading the values
// and the keys of a group keyed again through rs (its reader of the keys opened when nil).
func (ps *preloads) combine(g *groupAgg, loads []*preload, rs *readerSet) error {
	if preloadFault != nil {
		if err := preloadFault(g); err != nil {
			return err
		}
	}
	for i, p := range ps.tasks {
		if err := p.t.startSlots(&loads[i].sa, g); err != nil {
			return err
		}
	}
	var sb slotBuf
	select {
	case sb = <-ps.bufs:
	default:
	}
	sb.kr = rs.kr
	defer func() {
		rs.kr = sb.kr
		select {
		case ps.bufs <- slotBuf{kg: sb.kg[:0]}:
		default:
		}
	}()
	own := ps.tasks // the tasks this goroutine combines; a helper has the others
	var help *splitCombine
	alone := ps.combining.Add(1) == 1
	defer ps.combining.Add(-1)
	if alone && ps.par > 1 && len(ps.tasks) > 1 {
		h := len(ps.tasks) / 2
		own, help = ps.tasks[:h], ps.startSplit(loads, rs, h)
		splitCombines.Add(1)
		kg := sb.kg
		defer func() { sb.kg = kg }() // the pool's buffer goes back to it, the helper's to theirs
	}
	piece, err := ps.combineRows(g, loads, own, rs, &sb, help)
	if help != nil {
		err = help.stop(piece, err)
	}
	if err != nil {
		return err
	}
	g.rowsRead(int32(len(ps.tasks)))
	return nil
}

// combineRows combines g's rows, a slotsReadRows piece at a time, into the accumulators of
// loads for the tasks own (ps.tasks[:len(own)]), reading the values through rs and the
// pieces' slots through sb, and hands each piece to help (nil: none) for the other tasks. On
// failure it returns the piece that failed.
func (ps *preloads) combineRows(g *groupAgg, loads []*preload, own []*preloader, rs *readerSet, sb *slotBuf, help *splitCombine) (int, error) {
	released := int(g.lo)
	piece := 0
	for r := int(g.lo); r < int(g.hi); piece++ {
		if err := g.pre.releaseEvery(g.in, r, &released); err != nil {
			return piece, err
		}
		if help != nil {
			sb.kg = <-help.free // a buffer the helper is done with
		}
		gid, err := g.slotsAt(r, min(slotsReadRows, int(g.hi)-r), sb)
		if err != nil {
			return piece, ps.tasks[0].t.failIn(g.in, err)
		}
		help.give(splitJob{piece: piece, r: r, gid: gid, buf: sb.kg})
		for i, p := range own {
			if err := p.t.addSlots(&loads[i].sa, r, gid, rs.srcs[i]); err != nil {
				return piece, err
			}
		}
		r += len(gid)
	}
	return piece, nil
}

// splitCombine combines a group's rows for the tasks from on, on a goroutine of its own,
// while the preload's goroutine reads the rows' slots and combines them for the tasks before.
// A group's combining was the longest step of a 300 M-row hour rollup of inputs that follow
// one another in time (4.0 s of goroutine time against the cursors' 2.2 s), and ran on one
// core while the other had little to do.
//
// The rows go a slotsReadRows piece at a time, their slots in one of splitBuffers buffers:
// the preload's goroutine may read up to splitBuffers-1 pieces ahead of the helper, so that
// neither waits for the other at each piece when a third goroutine (a cursor streaming the
// next group) shares the cores. The combining of each task is in row order, as on one
// goroutine, and the error returned is the one of the first piece that failed.
type splitCombine struct {
	jobs chan splitJob
	free chan []int32 // the buffers of slots no one reads
	done chan struct{}
	pool chan [][]int32
	// errPiece is the first piece the helper failed on, err its error (set by the helper,
	// read once done is closed).
	errPiece int
	err      error
}

// splitJob is a piece of rows for the helper: rows r.., their slots gid (in buf, or in the
// group's own array).
type splitJob struct {
	piece, r int
	gid, buf []int32
}

// splitBuffers is how many buffers of slots a split combine reads through.
const splitBuffers = 4

// startSplit starts the helper of tasks from.. of a combine into loads through rs.
func (ps *preloads) startSplit(loads []*preload, rs *readerSet, from int) *splitCombine {
	s := &splitCombine{jobs: make(chan splitJob, splitBuffers), free: make(chan []int32, splitBuffers),
		done: make(chan struct{}), pool: ps.splitBufs}
	var bufs [][]int32
	select {
	case bufs = <-ps.splitBufs:
	default:
		bufs = make([][]int32, splitBuffers)
	}
	for _, b := range bufs {
		s.free <- b
	}
	go func() {
		defer close(s.done)
		for j := range s.jobs {
			for i := from; i < len(ps.tasks) && s.err == nil; i++ {
				if err := ps.tasks[i].t.addSlots(&loads[i].sa, j.r, j.gid, rs.srcs[i]); err != nil {
					s.errPiece, s.err = j.piece, err
				}
			}
			s.free <- j.buf
		}
	}()
	return s
}

// give hands the helper a piece (no-op when s is nil: no helper).
func (s *splitCombine) give(j splitJob) {
	if s != nil {
		s.jobs <- j
	}
}

// stop waits for the helper to combine the pieces it was given and returns the error of the
// first piece that failed: the helper's, or err, the preload goroutine's on piece piece (on
// the same piece, err: its tasks come first). The buffers go back to the pool.
func (s *splitCombine) stop(piece int, err error) error {
	close(s.jobs)
	<-s.done
	bufs := make([][]int32, 0, splitBuffers)
	for len(s.free) > 0 {
		bufs = append(bufs, <-s.free)
	}
	select {
	case s.pool <- bufs:
	default:
	}
	if s.err != nil && (err == nil || s.errPiece < piece) {
		return s.err
	}
	return err
}

// take returns the task's preload of g, waiting for it, or nil when g was not combined ahead
// (or p is nil: the merge has no preloads).
func (p *preloader) take(g *groupAgg) (*preload, error) {
	if p == nil {
		return nil, nil
	}
	p.ps.mu.Lock()
	if g.loads == nil || g.loads[p.ti] == nil {
		p.ps.mu.Unlock()
		return nil, nil
	}
	l := g.loads[p.ti]
	g.loads[p.ti] = nil
	p.ps.mu.Unlock()
	<-l.done
	if !g.claimed {
		p.ps.pending.Add(-1)
	}
	if g.early {
		p.ps.early.Store(false) // another group may combine early
	}
	p.ps.mu.Lock()
	delete(p.ps.open, l)
	p.ps.mu.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	if g.claimed {
		claimsTaken.Add(1)
	} else {
		preloadsTaken.Add(1)
	}
	return l, nil
}

// giveBack keeps m for a later preload of the task when there is room and the merge's slot
// tables hold no more than their share, else frees it.
func (p *preloader) giveBack(m accMem) {
	if m.bytes() == 0 {
		return
	}
	if m.tables.over() {
		p.t.freeErr = errors.Join(p.t.freeErr, m.free())
		return
	}
	select {
	case p.pool <- m:
		return
	default:
	}
	p.t.freeErr = errors.Join(p.t.freeErr, m.free())
}

// close waits for the preloads and frees every accumulator table of the merge: the tasks',
// their spares, the preloaders' pools, and those of preloads no task took (the merge failed).
// It returns the first error.
func (ps *preloads) close() error {
	ps.wg.Wait()
	var err error
	for l := range ps.open {
		err = errors.Join(err, l.sa.mem.free())
	}
	ps.open = nil
	for _, ch := range ps.readers {
		if rs := <-ch; rs != nil {
			rs.release()
		}
	}
	ps.readers = nil
	for _, p := range ps.tasks {
		t := p.t
		for i := range t.slots {
			t.slots[i].buf.kr.release()
			err = errors.Join(err, t.slots[i].mem.free())
			t.slots[i] = slotAccs{}
		}
		err = errors.Join(err, t.freeErr, t.spareAccs.free())
		t.freeErr = nil
		for len(p.pool) > 0 {
			m := <-p.pool
			err = errors.Join(err, m.free())
		}
	}
	return err
}
