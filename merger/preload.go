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
// A group the merge pages out while maxPreloads others wait to be taken is combined by the
// tasks as before: what a merge holds of accumulators stays bounded.

// maxPreloads bounds the groups combined ahead and not yet taken by every task (a variable
// for tests; 0 turns preloads off), and the tables a task keeps for them (preloader.pool).
// Four let five overlapping inputs of a 300 M-row hour rollup run 10-20% faster than two.
var maxPreloads = 4

// For tests: preloadsTaken counts the accumulators that tasks took from a preload;
// preloadFault, when set, is called before a group is combined ahead, and an error it returns
// is the preload's.
var (
	preloadsTaken atomic.Int64
	preloadFault  func(g *groupAgg) error
)

// preload is one long task's accumulators of one streamed group, combined ahead.
type preload struct {
	done chan struct{} // closed once sa (or err) is set
	sa   slotAccs
	err  error
}

// preloader is what the merge's pre-aggregation needs to combine groups ahead for one long
// task: its own readers of every source (a reader serves one goroutine at a time), handed
// from one preload of a source to the next through a channel of one.
type preloader struct {
	ps      *preloads
	t       *longTask
	ti      int            // the task's index in ps.tasks, and of its preloads in a group's
	readers []chan slotSrc // per source
	pool    chan accMem    // accumulators' memory the task gave back, for later preloads (one each)
	open    func(in int) slotSrc
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
	aheads  atomic.Int32          // groups streaming ahead (see cursor.streamAhead)
}

// maxAheads bounds the groups that stream ahead at once, each on a goroutine with a window
// and a group's keys of its own (a variable for tests).
var maxAheads = 2

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
	p := &preloader{ps: ps, t: t, ti: len(ps.tasks), readers: make([]chan slotSrc, sources), pool: make(chan accMem, max(maxPreloads, 1)), open: open}
	for i := range p.readers {
		p.readers[i] = make(chan slotSrc, 1)
		p.readers[i] <- slotSrc{} // opened on first use
	}
	t.pre = p
	ps.tasks = append(ps.tasks, p)
	if ps.bufs == nil {
		ps.bufs = make(chan slotBuf, 2)
	}
}

// start combines g ahead for every long task, on a goroutine of its own, unless too many
// groups wait already. The goroutine reads the group's slots once for every task.
func (ps *preloads) start(g *groupAgg) {
	n := int32(len(ps.tasks))
	if n == 0 || ps.pending.Load()+n > int32(maxPreloads)*n {
		return
	}
	ps.pending.Add(n)
	done := make(chan struct{})
	loads := make([]*preload, n)
	ps.mu.Lock()
	if ps.open == nil {
		ps.open = make(map[*preload]struct{})
	}
	for i := range loads {
		loads[i] = &preload{done: done}
		ps.open[loads[i]] = struct{}{}
	}
	ps.mu.Unlock()
	g.loads = slices.Clone(loads) // the tasks clear theirs as they take them
	ps.wg.Add(1)
	go func() {
		defer ps.wg.Done()
		defer close(done)
		srcs := make([]slotSrc, n)
		for i, p := range ps.tasks { // every preload takes them in this order
			if srcs[i] = <-p.readers[g.in]; srcs[i].vals == nil && srcs[i].times == nil {
				srcs[i] = p.open(int(g.in))
			}
			select {
			case loads[i].sa.mem = <-p.pool:
			default:
			}
		}
		err := ps.combine(g, loads, srcs)
		for i, p := range ps.tasks {
			loads[i].err = err
			p.readers[g.in] <- srcs[i]
		}
	}()
}

// combine combines g's rows into the accumulators of loads, one a task, reading the values
// through srcs.
func (ps *preloads) combine(g *groupAgg, loads []*preload, srcs []slotSrc) error {
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
	defer func() {
		select {
		case ps.bufs <- slotBuf{kb: sb.kb[:0], kg: sb.kg[:0]}:
		default:
		}
	}()
	released := int(g.lo)
	for r := int(g.lo); r < int(g.hi); {
		if err := g.pre.releaseEvery(g.in, r, &released); err != nil {
			return err
		}
		gid, err := g.slotsAt(r, min(stagedReadRows, int(g.hi)-r), &sb)
		if err != nil {
			return ps.tasks[0].t.failIn(g.in, err)
		}
		for i, p := range ps.tasks {
			if err := p.t.addSlots(&loads[i].sa, r, gid, srcs[i]); err != nil {
				return err
			}
		}
		r += len(gid)
	}
	g.rowsRead(int32(len(ps.tasks)))
	return nil
}

// take returns the task's preload of g, waiting for it, or nil when g was not combined ahead
// (or p is nil: the merge has no preloads).
func (p *preloader) take(g *groupAgg) (*preload, error) {
	if p == nil || g.loads == nil || g.loads[p.ti] == nil {
		return nil, nil
	}
	l := g.loads[p.ti]
	g.loads[p.ti] = nil
	<-l.done
	p.ps.pending.Add(-1)
	p.ps.mu.Lock()
	delete(p.ps.open, l)
	p.ps.mu.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	preloadsTaken.Add(1)
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
	for _, p := range ps.tasks {
		t := p.t
		for i := range t.slots {
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
