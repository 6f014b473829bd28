package backend

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/writeout/writeout/internal/multierr"
)

// Lifecycle is the bookkeeping every backend shares: the closed flag, the OnClose hooks and the
// children. A backend holds one, registers its own release as the first hook (so that it runs
// last, after its children and the caller's hooks) and forwards OnClose and Close to it.
// The zero value is ready to use.
type Lifecycle struct {
	mu     sync.Mutex
	closed atomic.Bool
	hooks  []func() error
}

// Closed reports whether Close has started. It is one atomic load.
func (l *Lifecycle) Closed() bool { return l.closed.Load() }

// OnClose registers fn to run at Close, last registered first. On a closed Lifecycle fn runs at
// once, so that what it releases is not leaked; its error has nobody to go to and is dropped.
func (l *Lifecycle) OnClose(fn func() error) {
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		_ = fn()
		return
	}
	l.hooks = append(l.hooks, fn)
	l.mu.Unlock()
}

// Close marks the Lifecycle closed and runs every hook, last registered first, even when some
// fail. The first error is returned with the later ones joined behind it. A second Close
// returns nil.
func (l *Lifecycle) Close() error {
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return nil
	}
	l.closed.Store(true)
	hooks := l.hooks
	l.hooks = nil
	l.mu.Unlock()

	var errs []error
	for i := len(hooks) - 1; i >= 0; i-- {
		if err := hooks[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return multierr.Join(errs...)
}

// IfOpen runs fn under the Lifecycle's lock unless Close has started, and reports whether it
// ran fn. Backends use it to hand out new Bytes atomically with respect to Close; when it
// reports false they return an error wrapping medium.ErrClosed.
func (l *Lifecycle) IfOpen(fn func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return false
	}
	fn()
	return true
}

// AddChild registers child.Close as a hook of l and reports true, unless Close has started: then
// it reports false and the caller must close the child itself.
func (l *Lifecycle) AddChild(child io.Closer) bool {
	return l.IfOpen(func() { l.hooks = append(l.hooks, child.Close) })
}
