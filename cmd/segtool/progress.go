package main

// Progress bars: one place decides whether a command shows one on standard error (--progress,
// --quiet, whether the streams are terminals), one type draws it.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// progressBatch is how many rows a command's own loop (dump's) handles between two updates of
// its bar.
const progressBatch = 1 << 16

// addProgressFlag adds --progress to cmd. A command whose results go to standard output
// (resultsOnStdout: dump, query) shows the bar under auto only when standard output is not a
// terminal too, so that the bar is not drawn among the rows.
func addProgressFlag(cmd *cobra.Command, mode *string, resultsOnStdout bool) {
	usage := "progress bar on standard error: auto (when it is a terminal), always or never"
	if resultsOnStdout {
		usage = "progress bar on standard error: auto (when it is a terminal and standard output is not), always or never"
	}
	cmd.Flags().StringVar(mode, "progress", "auto", usage)
}

// checkProgress checks the value of --progress.
func checkProgress(mode string) error {
	switch mode {
	case "auto", "always", "never":
		return nil
	}
	return usagef("--progress %q: want auto, always or never", mode)
}

// wantProgress reports whether a command shows a progress bar on stderr: never with quiet or
// --progress never, always with --progress always; under auto when stderr is a terminal and,
// for a command writing its results to stdout (stdout not nil), stdout is not one.
func wantProgress(mode string, quiet bool, stderr, stdout io.Writer) bool {
	switch {
	case quiet || mode == "never":
		return false
	case mode == "always":
		return true
	}
	return isTerminal(stderr) && (stdout == nil || !isTerminal(stdout))
}

// newCommandProgress checks mode and returns the bar a command shows on stderr, or nil (every
// method of a nil *progressBar does nothing) when wantProgress says none.
func newCommandProgress(mode string, quiet bool, stderr, stdout io.Writer) (*progressBar, error) {
	if err := checkProgress(mode); err != nil {
		return nil, err
	}
	if !wantProgress(mode, quiet, stderr, stdout) {
		return nil, nil
	}
	return newProgressBar(stderr), nil
}

// isTerminal reports whether w is a terminal (standard output through its checkedWriter
// included).
func isTerminal(w io.Writer) bool {
	if c, ok := w.(*checkedWriter); ok {
		w = c.w
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressUnit is what a bar counts.
type progressUnit int

const (
	unitRows progressUnit = iota
	unitBytes
)

// progressBar draws one progress bar at a time on a line of standard error, stage after stage
// (a merge's phases; ingest's reading, then writing). A stage of known total ends at 100%: its
// last frame is drawn full, then the line is cleared, so that whatever follows on the terminal
// (the next stage, a summary on standard output, an error) starts on a clean line. A stage of
// unknown total (a stream's bytes) shows a count and no percentage. All methods are safe for
// concurrent use; those of a nil *progressBar do nothing.
type progressBar struct {
	w *lineWriter

	mu       sync.Mutex
	bar      *progressbar.ProgressBar // nil: no stage, or the bar's stage is complete
	total    int64                    // of the stage; -1: unknown
	done     int64                    // the most set so far in the stage
	complete bool                     // the stage reached its total: drawn at 100% and cleared
	status   int                      // the width of the status line describe wrote after completion
	ended    bool                     // finish ran

	stopFollow chan struct{} // closed by finish to end follow's goroutine
	followDone sync.WaitGroup
	counter    *atomic.Int64 // followRows's, read once more by finish
}

func newProgressBar(w io.Writer) *progressBar {
	return &progressBar{w: &lineWriter{w: w}, stopFollow: make(chan struct{})}
}

// stage starts a stage named desc counting unit up to total (-1: unknown). The stage before,
// if any, ends: its line is cleared, and with keep a new line follows (merge's phases).
func (p *progressBar) stage(desc string, total int64, unit progressUnit, keep bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	if p.bar != nil || p.complete {
		p.endStage()
		if keep {
			fmt.Fprintln(p.w)
		}
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionSetWidth(30),
		// No goroutine of the bar's own redraws a spinner: nothing draws once finish has run.
		progressbar.OptionSetSpinnerChangeInterval(0),
	}
	if unit == unitBytes {
		opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionUseIECUnits(true))
	} else {
		opts = append(opts, progressbar.OptionShowIts(), progressbar.OptionSetItsString("rows"))
	}
	if total <= 0 && total != -1 {
		total = 0
	}
	p.total, p.done, p.complete, p.status = total, 0, false, 0
	if total == 0 {
		// Nothing to count (an empty input): the stage is complete at once.
		p.complete = true
		return
	}
	p.bar = progressbar.NewOptions64(total, opts...)
}

// set sets the stage's count to done; a count below the last set is ignored (counts from
// several goroutines may come out of order). Reaching the total completes the stage.
func (p *progressBar) set(done int64) {
	if p == nil {
		return
	}
	if testHookProgressSet != nil {
		testHookProgressSet(done)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLocked(done)
}

// testHookProgressSet, when set, is called with the count of each set: what the work
// reported, before finish sets a stage to its total.
var testHookProgressSet func(done int64)

func (p *progressBar) setLocked(done int64) {
	if p.bar == nil || done < p.done {
		return
	}
	if p.total > 0 && done > p.total {
		done = p.total
	}
	p.done = done
	_ = p.bar.Set64(done)
	if p.total > 0 && done == p.total {
		// The bar drew its 100% frame (progressbar draws the last one whatever its throttle).
		p.complete = true
		p.clear()
		p.bar = nil
	}
}

// describe sets the stage's description. Once the stage is complete, the description goes on a
// status line of its own, overwritten in place (a merge's upload after its rows).
func (p *progressBar) describe(d string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.ended:
	case p.bar != nil:
		p.bar.Describe(d)
	case p.complete:
		fmt.Fprintf(p.w, "\r%-*s", p.status, d)
		p.status = max(p.status, utf8.RuneCountInString(d))
	}
}

// follow sets the stage's count from c about every 100 ms until finish: for work that counts
// on several goroutines at once (a query's inputs).
func (p *progressBar) follow(c *atomic.Int64) {
	if p == nil {
		return
	}
	p.followDone.Add(1)
	go func() {
		defer p.followDone.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stopFollow:
				return
			case <-t.C:
				p.set(c.Load())
			}
		}
	}()
}

// followRows starts a stage named desc of total rows whose count follows the counter it
// returns (nil for a nil bar): for query.Spec.Progress.
func (p *progressBar) followRows(desc string, total int64) *atomic.Int64 {
	if p == nil {
		return nil
	}
	c := new(atomic.Int64)
	p.stage(desc, total, unitRows, false)
	p.follow(c)
	p.counter = c
	return c
}

// above returns a writer for messages to w (a warning) that clears the bar's line first: the
// bar is drawn again below the message at its next update.
func (p *progressBar) above(w io.Writer) io.Writer {
	if p == nil {
		return w
	}
	return aboveWriter{p: p, w: w}
}

type aboveWriter struct {
	p *progressBar
	w io.Writer
}

func (a aboveWriter) Write(b []byte) (int, error) {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	if !a.p.ended {
		a.p.clear()
	}
	return a.w.Write(b)
}

// finish ends the bar, before the command writes its results or its error. With ok (the work
// succeeded) a stage of known total is set to its total, so that it ends at 100%. The line is
// cleared either way; nothing is drawn after finish.
func (p *progressBar) finish(ok bool) {
	if p == nil {
		return
	}
	close(p.stopFollow)
	p.followDone.Wait()
	if p.counter != nil {
		p.set(p.counter.Load()) // the count at the end, however long since the last tick
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	if ok && p.bar != nil && p.total > 0 {
		p.setLocked(p.total)
	}
	p.endStage()
	p.ended = true
}

// endStage ends the stage: its line (the bar, or the status line) is cleared. p.mu is held.
func (p *progressBar) endStage() {
	if p.bar != nil {
		_ = p.bar.Exit()
		p.bar = nil
	}
	p.clear()
	p.complete = false
}

// clear blanks the line the bar draws on and puts the cursor at its start. p.mu is held.
func (p *progressBar) clear() {
	if n := p.w.widest; n > 0 {
		fmt.Fprintf(p.w.w, "\r%s\r", strings.Repeat(" ", n))
	}
	p.w.widest, p.w.cur = 0, 0
}

// lineWriter passes writes on to w, noting the widest line written since the last clear (in
// runes: the bar's blocks are one column each), so that clear blanks all of it and no more (a
// longer line of spaces would wrap on a narrow terminal).
type lineWriter struct {
	w           io.Writer
	cur, widest int
}

func (l *lineWriter) Write(b []byte) (int, error) {
	for rest := b; len(rest) > 0; {
		i := bytes.IndexAny(rest, "\r\n")
		seg := rest
		if i >= 0 {
			seg = rest[:i]
		}
		l.cur += utf8.RuneCount(seg)
		l.widest = max(l.widest, l.cur)
		if i < 0 {
			break
		}
		l.cur = 0
		if rest[i] == '\n' {
			l.widest = 0 // the line is done: what follows starts another
		}
		rest = rest[i+1:]
	}
	return l.w.Write(b)
}
