// Package testhook holds the points where tests stop the library between two steps to force
// an interleaving that timing alone would rarely produce, such as two publications of one
// name racing past their checks. Only tests set them (the test binaries of this module); unset,
// each costs one atomic load.
package testhook

import "sync/atomic"

var beforePublish, outputCreated atomic.Pointer[func(dst string)]

// SetBeforePublish sets fn as the hook columns' publication calls after every check that dst
// is free and just before the call that gives the new file the name dst (linkat, renameat2,
// link or rename), or nil to unset it. It returns a function that restores the previous hook.
func SetBeforePublish(fn func(dst string)) (restore func()) {
	var p *func(string)
	if fn != nil {
		p = &fn
	}
	old := beforePublish.Swap(p)
	return func() { beforePublish.Store(old) }
}

// BeforePublish runs the hook set by SetBeforePublish, if any.
func BeforePublish(dst string) {
	if fn := beforePublish.Load(); fn != nil {
		(*fn)(dst)
	}
}

// SetOutputCreated sets fn as the hook columns' publication calls once it has created the file
// it will write the segment to (before the first byte), or nil to unset it. It returns a
// function that restores the previous hook.
func SetOutputCreated(fn func(dst string)) (restore func()) {
	var p *func(string)
	if fn != nil {
		p = &fn
	}
	old := outputCreated.Swap(p)
	return func() { outputCreated.Store(old) }
}

// OutputCreated runs the hook set by SetOutputCreated, if any.
func OutputCreated(dst string) {
	if fn := outputCreated.Load(); fn != nil {
		(*fn)(dst)
	}
}
