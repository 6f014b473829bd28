package query

import (
	"errors"
	"slices"
	"sync"

	"github.com/writeout/writeout/columns"
)

// pipeline hands the windows a producer goroutine aggregates, combines and sorts (each one
// globalTable) to the goroutine that called RunEach, which lays each window's groups out as a
// part and calls each with it: the next window is read while each has the one before. Two
// tables take turns, so at most two windows' groups are in memory; with reuse every part is
// laid out in the same memory (partBuf), which stays in the cache of the core that writes and
// reads it.
type pipeline struct {
	groupBy []string
	all     bool
	reuse   bool
	// inline: the query is one window, so there is nothing to overlap: produce runs on the
	// caller's goroutine and emit calls each itself.
	inline bool
	parts  chan *globalTable
	free   chan *globalTable
	stop   chan struct{} // closed when each failed (or panicked): the producer gives up
	each   func(Result) error
	buf    *partBuf
}

func newPipeline(metrics []columns.Metric, groupBy []string, all, reuse, inline bool) *pipeline {
	p := &pipeline{groupBy: groupBy, all: all, reuse: reuse, inline: inline,
		parts: make(chan *globalTable, 1), free: make(chan *globalTable, 2), stop: make(chan struct{}), buf: &partBuf{}}
	p.free <- newGlobalTable(metrics, len(groupBy))
	if !inline {
		p.free <- newGlobalTable(metrics, len(groupBy))
	}
	return p
}

// partRows is how many groups a part handed to each holds at most when its memory is reused:
// a window's groups go in parts this size, whose memory (rows, group and aggregated values,
// about 300 bytes a group) stays in the core's cache from one part to the next; a window's
// whole layout (several thousand groups) did not, and writing it missed the cache.
const partRows = 1024

// consume lays g's groups out as parts and calls each with them, at least once.
func (p *pipeline) consume(g *globalTable) error {
	n := len(g.times)
	if !p.reuse {
		p.buf = &partBuf{}
		return p.each(g.result(p.groupBy, p.all, p.buf, 0, n))
	}
	for lo := 0; ; lo += partRows {
		hi := min(n, lo+partRows)
		if err := p.each(g.result(p.groupBy, p.all, p.buf, lo, hi)); err != nil {
			return err
		}
		if hi == n {
			return nil
		}
	}
}

// errStopped is what the producer returns when it gave up because each failed; run returns
// each's error instead.
var errStopped = errors.New("query: stopped")

// table returns an empty table for the producer's next window, once one is free.
func (p *pipeline) table() (*globalTable, error) {
	select {
	case g := <-p.free:
		g.reset()
		return g, nil
	case <-p.stop:
		return nil, errStopped
	}
}

// skip gives back a table that is not handed on.
func (p *pipeline) skip(g *globalTable) { p.free <- g } // never blocks: room for both tables

// emit sorts g's groups in the Result's order and hands g on.
func (p *pipeline) emit(g *globalTable) error {
	g.sort()
	if p.inline {
		err := p.consume(g)
		p.free <- g
		return err
	}
	select {
	case p.parts <- g:
		return nil
	case <-p.stop:
		return errStopped
	}
}

// run runs produce on a goroutine of its own (inline: on the calling one) and calls each with
// the parts it emits, in order, on the calling goroutine. It returns each's first error (the
// producer then stops), else produce's. It returns only once produce has returned, whatever
// each did (an error or a panic): the producer never reads the inputs after the caller has
// them back.
func (p *pipeline) run(produce func() error, each func(Result) error) (err error) {
	p.each = each
	if p.inline {
		return produce()
	}
	var perr error
	go func() {
		defer close(p.parts)
		perr = produce()
	}()
	stop := sync.OnceFunc(func() { close(p.stop) })
	drained := false
	defer func() {
		if !drained { // each panicked: stop the producer and wait for it
			stop()
			for range p.parts {
			}
		}
	}()
	var eerr error
	for g := range p.parts {
		if eerr == nil {
			if eerr = p.consume(g); eerr != nil {
				stop()
			}
		}
		p.free <- g // never blocks: room for both tables
	}
	drained = true
	if eerr != nil {
		return eerr
	}
	return perr
}

// Clone returns a copy of r whose rows (their Groups and Values) share no memory with r's: a
// part RunEach hands on, kept past the call.
func (r Result) Clone() Result {
	out := Result{GroupBy: slices.Clone(r.GroupBy), Metrics: slices.Clone(r.Metrics)}
	if r.Rows == nil {
		return out
	}
	ng, nv := 0, 0
	for _, row := range r.Rows {
		ng += len(row.Groups)
		nv += len(row.Values)
	}
	groups, values := make([]GroupValue, 0, ng), make([]AggValue, 0, nv)
	out.Rows = make([]Row, len(r.Rows))
	for i, row := range r.Rows {
		g, v := len(groups), len(values)
		groups, values = append(groups, row.Groups...), append(values, row.Values...)
		row.Groups, row.Values = groups[g:len(groups):len(groups)], values[v:len(values):len(values)]
		out.Rows[i] = row
	}
	return out
}
