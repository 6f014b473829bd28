package medium

import (
	"errors"
	"sync"
	"sync/atomic"
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
	return JoinErrors(errs...)
}

// Do runs fn under the Lifecycle's lock unless it is closed, in which case it returns ErrClosed
// without running fn. Backends use it to hand out new Bytes and children atomically with respect
// to Close.
func (l *Lifecycle) Do(fn func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	return fn()
}

// AddChild registers child.Close as a hook of l, unless l is closed, in which case it returns
// ErrClosed and the caller must close the child itself.
func (l *Lifecycle) AddChild(child Medium) error {
	return l.Do(func() error {
		l.hooks = append(l.hooks, child.Close)
		return nil
	})
}

// JoinErrors returns nil for no errors, the error itself for one, and otherwise the first error
// with the others joined behind it (errors.Is matches every one of them).
func JoinErrors(errs ...error) error {
	var first error
	var rest []error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if first == nil {
			first = err
			continue
		}
		rest = append(rest, err)
	}
	if len(rest) == 0 {
		return first
	}
	return errors.Join(append([]error{first}, rest...)...)
}
