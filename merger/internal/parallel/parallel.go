// Package parallel runs a merge's or a query's independent tasks on several goroutines.
package parallel

import (
	"sync"
	"sync/atomic"
)

// Run calls fn(i) for every i in [0, n) on at most p goroutines and returns the first
// error; after an error no new call starts.
func Run(n, p int, fn func(i int) error) error {
	if p > n {
		p = n
	}
	if p <= 1 {
		for i := 0; i < n; i++ {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		next   atomic.Int64
		failed atomic.Bool
		mu     sync.Mutex
		first  error
		wg     sync.WaitGroup
	)
	for g := 0; g < p; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// FirstError keeps the first error reported by several goroutines.
type FirstError struct {
	mu  sync.Mutex
	err error
	set atomic.Bool
}

// Report keeps err if it is the first non-nil error reported.
func (f *FirstError) Report(err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	if f.err == nil {
		f.err = err
		f.set.Store(true)
	}
	f.mu.Unlock()
}

// Get returns the first error reported, or nil.
func (f *FirstError) Get() error {
	if !f.set.Load() {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
