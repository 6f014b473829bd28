package merger

import (
	"slices"
	"sync"

	"github.com/writeout/writeout/merger/internal/parallel"
)

// pipelineBatches is the most batches in flight: one filled by the merge while the column
// writers write the others. The merge runs ahead of a task that stops for a while: a
// dimension's id log writing a run (a sort and 4 MiB written), or, when the merge
// pre-aggregates, a streamed group's first batch, on which each long metric task combines all
// the group's rows into its slots (loadSlots) before it writes a row. With three batches (48 Ki
// rows) the merge soon waited for the tasks, which then waited for it: merges of the peers' 30
// M events took 1.68-2.76 s (contiguous) and 2.39-2.96 s (overlapping), against 1.41-1.63 and
// 1.73-2.16 s with eight; an hour rollup 0.92-1.21 s, against 0.68-0.77 s. The batches are
// made as the merge first needs them: a batch of 16 Ki rows of a few dimensions is some 700
// KiB.
const pipelineBatches = 8

// preAggPipelineBatches is pipelineBatches for a merge that pre-aggregates: its groups'
// slots are combined ahead (see preloads), so a task no longer stops at a group's first batch
// for long, and fewer batches hold the merge's rows in flight (a batch of a rollup of five
// overlapping inputs holds up to 640 KiB of refs). On a 300 M-row hour rollup of five
// overlapping inputs, 6 held 3-5 MiB less than 8, as fast.
const preAggPipelineBatches = 6

// rawPipelineBatches is pipelineBatches for batches that hold raw dimensions: up to
// rawBatchBytes of raw bytes each.
const rawPipelineBatches = 3

// pipeline carries batches of output rows from the merge to the column tasks. Every task stays
// with one worker goroutine (a column writer takes its batches in order); every worker takes
// every batch; the last worker done with a batch hands it back to free, where the merge takes
// it again. The first error of any task is kept (errs): the workers then skip their tasks, and
// stop returns it.
//
// Use: take a batch, fill it, send it; take the next...; put back a batch not sent; stop once.
type pipeline struct {
	free chan *batch   // batches no worker holds
	work []chan *batch // per worker: the batches sent, in order
	wg   sync.WaitGroup
	errs parallel.FirstError
	// retired: inputs whose cursors were done since the last batch was sent (see
	// batch.retired).
	retired []int32
	// made of most batches so far (the merge makes them as it needs them), each of rows rows
	// of kinds.
	made, most int
	kinds      []dimKind
	rows       int
	rawPerRow  []int
}

// newPipeline starts the workers, at most par, for tasks, with at most most batches of the
// dimensions of kinds that hold rows rows (rawPerRow: the raw dimensions' bytes a row, to
// reserve).
func newPipeline(tasks []colTask, par, most int, kinds []dimKind, rows int, rawPerRow []int) *pipeline {
	p := max(1, min(par, len(tasks)))
	pl := &pipeline{free: make(chan *batch, most), work: make([]chan *batch, p), most: most, kinds: kinds, rows: rows, rawPerRow: rawPerRow}
	for g, mine := range dealTasks(tasks, p) {
		pl.work[g] = make(chan *batch, most)
		pl.wg.Add(1)
		go pl.worker(pl.work[g], mine)
	}
	return pl
}

// dealTasks deals tasks out to p workers by estimated cost (taskCost), the dearest first,
// each to the least loaded worker.
func dealTasks(tasks []colTask, p int) [][]colTask {
	owned := make([][]colTask, p)
	load := make([]int, p)
	order := make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return taskCost(tasks[b]) - taskCost(tasks[a]) })
	for _, t := range order {
		g := slices.Index(load, slices.Min(load))
		owned[g] = append(owned[g], tasks[t])
		load[g] += taskCost(tasks[t])
	}
	return owned
}

// worker writes every batch of work with its tasks, until work is closed.
func (pl *pipeline) worker(work <-chan *batch, mine []colTask) {
	defer pl.wg.Done()
	for b := range work {
		for _, t := range mine {
			if pl.errs.Get() != nil {
				break // the merge failed or was cancelled: skip the rest
			}
			if err := t.write(b); err != nil {
				pl.errs.Report(err)
			}
		}
		if b.pending.Add(-1) == 0 {
			pl.free <- b
		}
	}
}

// take returns a free batch, reset: a new one while fewer than most were made, else waiting
// for the workers to hand one back.
func (pl *pipeline) take() *batch {
	var b *batch
	select {
	case b = <-pl.free:
	default:
		if pl.made < pl.most {
			pl.made++
			b = &batch{keys: newKeys(pl.kinds)}
			b.keys.reserve(pl.rows, pl.rawPerRow)
		} else {
			b = <-pl.free
		}
	}
	b.reset()
	return b
}

// put hands back a batch taken and not sent.
func (pl *pipeline) put(b *batch) { pl.free <- b }

// retire notes that input in's cursor is done: the next batch sent says so.
func (pl *pipeline) retire(in int) { pl.retired = append(pl.retired, int32(in)) }

// send hands b to every worker; b belongs to them until they hand it back.
func (pl *pipeline) send(b *batch) {
	if !b.runsSet {
		b.findRuns()
	}
	b.retired = append(b.retired[:0], pl.retired...)
	pl.retired = pl.retired[:0]
	b.pending.Store(int32(len(pl.work)))
	for _, w := range pl.work {
		w <- b
	}
}

// err returns the first error reported, or nil.
func (pl *pipeline) err() error { return pl.errs.Get() }

// fail reports err, unless an error came first.
func (pl *pipeline) fail(err error) { pl.errs.Report(err) }

// stop waits for the workers to write every batch sent and returns the first error.
func (pl *pipeline) stop() error {
	for _, w := range pl.work {
		close(w)
	}
	pl.wg.Wait()
	return pl.errs.Get()
}
