// Package backend is the plumbing that package medium's heap backend and the offheap, tmpfile
// and mmapfile backends share: the Lifecycle of a medium (closed flag, OnClose hooks, children)
// and the steps of ReadAt, ReadFrom and WriteTo that every Bytes takes the same way (IO).
//
// It cannot import medium, which imports it: the sentinels its errors wrap (medium.ErrInvalid)
// are handed in by the backend (IO.Invalid), and Lifecycle reports a closed medium with a bool
// for the backend to turn into an error wrapping medium.ErrClosed.
package backend
