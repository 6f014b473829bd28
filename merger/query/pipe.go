package query

import (
	"errors"
	"slices"
	"sync"
)

// pipeline hands the parts a producer goroutine makes (aggregated, combined and sorted
// windows) to the goroutine that called RunEach, which calls each with them: the next window
// is read while each has the one before. With reuse, two parts' memory (partBuf) take turns,
// so at most two parts are in memory; without, every part has its own.
type pipeline struct {
	parts chan part
	free  chan *partBuf
	stop  chan struct{} // closed when each failed (or panicked): the producer gives up
	reuse bool
}

type part struct {
	res Result
	buf *partBuf
}

// errStopped is what the producer returns when it gave up because each failed; runPipeline
// returns each's error instead.
var errStopped = errors.New("query: stopped")

// emit lays g's groups out as a part and hands it on.
func (p *pipeline) emit(g *globalTable, groupBy []string, all bool) error {
	buf := &partBuf{}
	if p.reuse {
		select {
		case buf = <-p.free:
		case <-p.stop:
			return errStopped
		}
	}
	res := g.result(groupBy, all, buf)
	select {
	case p.parts <- part{res: res, buf: buf}:
		return nil
	case <-p.stop:
		return errStopped
	}
}

// runPipeline runs produce on a goroutine of its own and calls each with the parts it emits,
// in order, on the calling goroutine. It returns each's first error (the producer then
// stops), else produce's. It returns only once produce has returned, whatever each did (an
// error or a panic): the producer never reads the inputs after the caller has them back.
func runPipeline(reuse bool, produce func(*pipeline) error, each func(Result) error) (err error) {
	p := &pipeline{parts: make(chan part, 1), stop: make(chan struct{}), reuse: reuse}
	if reuse {
		p.free = make(chan *partBuf, 2)
		p.free <- &partBuf{}
		p.free <- &partBuf{}
	}
	var perr error
	go func() {
		defer close(p.parts)
		perr = produce(p)
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
	for pt := range p.parts {
		if eerr == nil {
			if eerr = each(pt.res); eerr != nil {
				stop()
			}
		}
		if reuse {
			p.free <- pt.buf // never blocks: there are two buffers and room for two
		}
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
