package merger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recTask records the batches it writes: their first rows, and whether each batch's rows were
// intact (time r+first at row r) while it wrote them. It fails at its batch failAt (-1: never).
type recTask struct {
	firsts []int64
	bad    []string
	failAt int
	delay  time.Duration
}

var errTask = errors.New("task failed on purpose")

func (t *recTask) write(b *batch) error {
	if t.failAt >= 0 && len(t.firsts) == t.failAt {
		return errTask
	}
	t.firsts = append(t.firsts, b.first)
	time.Sleep(t.delay)
	for r := range b.keys.n {
		if b.keys.time[r] != b.first+int64(r) {
			t.bad = append(t.bad, fmt.Sprintf("batch %d row %d: time %d", b.first, r, b.keys.time[r]))
			break
		}
	}
	return nil
}

// fillBatch makes b hold rows rows from output row first on, whose times are their rows.
func fillBatch(b *batch, first int64, rows int) {
	b.first = first
	for r := range rows {
		b.keys.n++
		b.keys.time = append(b.keys.time, first+int64(r))
	}
}

// within runs f, failing the test when it takes longer than a few seconds (a pipeline that
// deadlocks: its goroutines are left behind).
func within(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the pipeline deadlocked")
	}
}

// stopWithin stops pl, failing the test when it takes longer than a few seconds.
func stopWithin(t *testing.T, pl *pipeline) (err error) {
	t.Helper()
	within(t, func() { err = pl.stop() })
	return err
}

// TestPipelineInOrder sends seeded random numbers of batches through pipelines of random tasks
// and workers: every task writes every batch once, in order, while it is intact (no batch is
// refilled before every worker is done with it); stop returns nil and every batch is free.
func TestPipelineInOrder(t *testing.T) {
	seed := testSeed(t)
	for trial := range 20 {
		rng := rand.New(rand.NewPCG(seed, uint64(trial)))
		tasks := make([]colTask, 1+rng.IntN(6))
		for i := range tasks {
			tasks[i] = &recTask{failAt: -1, delay: time.Duration(rng.IntN(50)) * time.Microsecond}
		}
		pl := newPipeline(tasks, 1+rng.IntN(3), pipelineBatches, nil, 8, nil)
		batches := rng.IntN(40)
		var want []int64
		notReset := 0
		var err error
		within(t, func() {
			for k := range batches {
				b := pl.take()
				if b.keys.n != 0 {
					notReset++
				}
				first := int64(k * 8)
				fillBatch(b, first, 1+rng.IntN(8))
				want = append(want, first)
				pl.send(b)
			}
			err = pl.stop()
		})
		require.NoError(t, err)
		require.Zero(t, notReset, "a batch taken is reset")
		for i, task := range tasks {
			rt := task.(*recTask)
			require.Equal(t, want, rt.firsts, "trial %d task %d", trial, i)
			require.Empty(t, rt.bad, "trial %d task %d", trial, i)
		}
		require.Len(t, pl.free, pl.made, "every batch handed back")
		require.LessOrEqual(t, pl.made, pipelineBatches, "batches made")
	}
}

// TestPipelineError makes a task fail: the tasks after it skip every later batch, the producer
// sees the error, stop returns it and every batch is handed back.
func TestPipelineError(t *testing.T) {
	for failAt := range 5 {
		tasks := []colTask{&recTask{failAt: -1}, &recTask{failAt: failAt}, &recTask{failAt: -1}}
		pl := newPipeline(tasks, 1, pipelineBatches, nil, 4, nil) // one worker: the tasks run in order
		sent := 0
		for k := range 20 {
			if pl.err() != nil {
				break
			}
			b := pl.take()
			fillBatch(b, int64(k*4), 4)
			pl.send(b)
			sent++
			if k > failAt {
				// The failure comes within the batches in flight.
				time.Sleep(time.Millisecond)
			}
		}
		require.Less(t, sent, 20, "failAt %d: the producer saw the error", failAt)
		require.ErrorIs(t, stopWithin(t, pl), errTask, "failAt %d", failAt)
		require.Len(t, pl.free, pl.made)
		require.Len(t, tasks[1].(*recTask).firsts, failAt)
		// The task after the failing one wrote the batches before the failure only.
		require.Len(t, tasks[2].(*recTask).firsts, failAt, "failAt %d", failAt)
		require.GreaterOrEqual(t, len(tasks[0].(*recTask).firsts), failAt+1)
	}
}

// TestPipelineStopEarly stops a pipeline as a cancelled merge does (the batch taken is put
// back unsent, or none is held): stop returns nil, the workers end, every batch is free.
func TestPipelineStopEarly(t *testing.T) {
	for _, held := range []bool{false, true} {
		tasks := []colTask{&recTask{failAt: -1, delay: time.Millisecond}, &recTask{failAt: -1}}
		pl := newPipeline(tasks, 2, pipelineBatches, nil, 4, nil)
		for k := range 5 {
			b := pl.take()
			fillBatch(b, int64(k*4), 4)
			pl.send(b)
		}
		if held {
			pl.put(pl.take())
		}
		require.NoError(t, stopWithin(t, pl))
		require.Len(t, pl.free, pl.made)
		for _, task := range tasks {
			require.Equal(t, []int64{0, 4, 8, 12, 16}, task.(*recTask).firsts)
		}
	}
}

// TestPipelineRetired checks that a batch sent names the inputs retired since the batch
// before it, once.
func TestPipelineRetired(t *testing.T) {
	task := &retiredTask{}
	pl := newPipeline([]colTask{task}, 1, pipelineBatches, nil, 4, nil)
	send := func(retire ...int) {
		for _, in := range retire {
			pl.retire(in)
		}
		b := pl.take()
		fillBatch(b, 0, 1)
		pl.send(b)
	}
	send(2)
	send()
	send(0, 3)
	require.NoError(t, stopWithin(t, pl))
	require.Equal(t, [][]int32{{2}, {}, {0, 3}}, task.got)
}

type retiredTask struct{ got [][]int32 }

func (t *retiredTask) write(b *batch) error {
	t.got = append(t.got, append([]int32{}, b.retired...))
	return nil
}

// TestDealTasks checks that tasks go to the least loaded worker, the dearest first, and that
// every task goes to one worker.
func TestDealTasks(t *testing.T) {
	multi := &dimTask{kind: kindMulti} // cost 6
	single := &dimTask{kind: kindSingle}
	tm := &timeTask{}
	owned := dealTasks([]colTask{tm, single, multi, &timeTask{}}, 2)
	require.Equal(t, []colTask{multi}, owned[0])
	require.Len(t, owned[1], 3)
	require.Same(t, single, owned[1][0])
	require.Len(t, dealTasks([]colTask{tm}, 1)[0], 1)
}
