package ingest

import (
	"context"
	"fmt"
	"io"

	"github.com/writeout/writeout/columns"
)

// Read-ahead: an input's rows are parsed on a goroutine of their own, a batch of rows at a
// time, while Run's goroutine adds the rows parsed before to the Builder, so that parsing
// (about a third of an ingestion's CPU time for CSV) overlaps building and persisting.
// Everything the reader reports reaches Run's goroutine in the order it happened: each
// row's warnings, then the row or its *RowError; after the last row, the error that ended
// the input (io.EOF at its end). At most aheadBatches batches of aheadRows rows are parsed
// and not yet added, so the memory it takes is small and bounded: 16,384 rows (with the CSV
// blocks their strings point into, about 1 MB of the peers' table). Fewer, 1,024 in 4
// batches, left both goroutines waiting for each other a third of the time (an execution
// trace of the peers' CSV ingestion: 1.2-1.5 of 2 cores busy while parsing, 1.5-1.9 now).
const (
	aheadRows    = 1024
	aheadBatches = 16
)

// aheadItem is what reading one row gave, besides the row.
type aheadItem struct {
	warns []Warning // the reader's warnings since the row before, in order
	err   error     // nil, or the *RowError of a row that does not parse
}

// aheadBatch is a batch of rows parsed ahead: rows[:n] with their items, then, when end is
// set, the end of the input.
type aheadBatch struct {
	seq     uint64 // blockReuser: the block the strings of its last row point into, at most
	rows    []columns.Row
	items   []aheadItem
	n       int
	end     error     // io.EOF or the error that ends the input; nil when more rows follow
	endWarn []Warning // warnings after the last row
}

// blockReuser is a Reader that can recycle the memory its rows' strings point into (the CSV
// reader's blocks) once told they are no longer used (see CSVReader.reuseBlocks). Batches go
// back to the reading goroutine in the order they were filled, after every row in them is
// used; so when a batch comes back, every row read before its last is used, and the blocks
// before the one its last row came from (which rows after it may share) can be overwritten.
type blockReuser interface {
	reuseBlocks()
	blockSeq() uint64
	releaseBefore(seq uint64)
}

// readAhead runs a Reader on its own goroutine. Batches go to full and come back on free;
// stop tells the goroutine to end, done says it has.
type readAhead struct {
	full, free chan *aheadBatch
	stop, done chan struct{}
	warns      []Warning // the reader's warnings not yet put in an item (reader goroutine only)
}

// newReadAhead returns a readAhead whose batches have rows shaped by sp. Its warn method is
// the OnWarning of the reader it will run: start it before anything reads.
func newReadAhead(sp *Spec) *readAhead {
	a := &readAhead{
		full: make(chan *aheadBatch, aheadBatches),
		free: make(chan *aheadBatch, aheadBatches),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	for range aheadBatches {
		b := &aheadBatch{rows: make([]columns.Row, aheadRows), items: make([]aheadItem, aheadRows)}
		for i := range b.rows {
			b.rows[i] = sp.newRow()
		}
		a.free <- b
	}
	return a
}

// warn collects a warning of the reader for the next item (or the end).
func (a *readAhead) warn(w Warning) { a.warns = append(a.warns, w) }

func (a *readAhead) takeWarns() []Warning {
	w := a.warns
	a.warns = nil
	return w
}

// start reads rr on a new goroutine until the input ends, ctx is done or close is called.
// With reuse, a reader that can (blockReuser) recycles the memory of its rows' strings once
// their batch is recycled: the user must copy any string it keeps past recycle.
func (a *readAhead) start(ctx context.Context, rr reader, reuse bool) {
	ru, _ := rr.(blockReuser)
	if ru != nil && reuse {
		ru.reuseBlocks()
	} else {
		ru = nil
	}
	go func() {
		defer close(a.done)
		for n := 0; ; {
			var b *aheadBatch
			select {
			case b = <-a.free:
			case <-a.stop:
				return
			}
			if ru != nil {
				ru.releaseBefore(b.seq) // b's rows, and all before, are used
			}
			clear(b.items[:b.n]) // items are written only for rows with warnings or errors
			b.n, b.end, b.endWarn = 0, nil, nil
			for b.n < len(b.rows) {
				if n&1023 == 0 {
					if err := ctx.Err(); err != nil {
						b.end = fmt.Errorf("ingest: %w", err)
						break
					}
				}
				n++
				err := rr.Read(&b.rows[b.n])
				if err != nil && asRowError(err) == nil {
					b.end = err
					break
				}
				if err != nil || a.warns != nil {
					b.items[b.n] = aheadItem{warns: a.takeWarns(), err: err}
				}
				b.n++
			}
			if b.end != nil {
				b.endWarn = a.takeWarns()
			}
			if ru != nil {
				b.seq = ru.blockSeq()
			}
			select {
			case a.full <- b:
			case <-a.stop:
				return
			}
			if b.end != nil {
				return
			}
		}
	}()
}

// next returns the next batch; recycle hands it back once its rows are used.
func (a *readAhead) next() *aheadBatch { return <-a.full }

func (a *readAhead) recycle(b *aheadBatch) { a.free <- b }

// close stops the reading goroutine and waits for it: after close, the reader is not in use.
// A Read under way finishes first.
func (a *readAhead) close() {
	close(a.stop)
	<-a.done
}

// isEnd reports whether err, the end of a batch, is the input's normal end.
func isEnd(err error) bool { return err == io.EOF }
