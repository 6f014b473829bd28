// Package medium defines where a segment's column parts are staged while the segment is built:
// a Medium hands out Bytes, append-only byte sequences that speak the io vocabulary, and releases
// everything they hold when it is closed.
//
// # Backends
//
// This package has the reference backend on the Go heap ([NewHeap]). Others live beside it:
// offheap (anonymous mappings outside the Go heap), tmpfile (one temp file per medium on an
// afero.Fs) and mmapfile (a file-backed shared mapping). Every backend passes the conformance
// suite in medium/mediumtest, which is the definition of a correct backend.
//
// # Contract
//
//   - Size is a counter: O(1), it never flushes, never makes a system call, never allocates.
//   - Write never retains or modifies p. A failed write makes the Bytes fail every later write
//     with the same error (a sticky first error); bytes written before the failure stay readable.
//   - WriteTo writes every byte written so far, from the start, and may be called any number of
//     times; the Bytes stays appendable afterwards. A failing destination fails that WriteTo
//     only: the Bytes is unchanged and still usable.
//   - ReadAt behaves like os.File.ReadAt: it reads bytes written so far; fewer than len(p) bytes
//     come with io.EOF when the read reaches Size().
//   - After the medium is closed every call on its Bytes, except Size, fails with an error
//     wrapping ErrClosed. Close must not run while another goroutine is inside a call on one of
//     the medium's Bytes.
//   - Close releases every resource on every path. When several cleanups fail, the first error
//     is returned with the others joined behind it. A second Close returns nil.
package medium

import (
	"errors"
	"io"

	"github.com/writeout/writeout/internal/invalid"
)

// Sentinel errors. Backends wrap them with context; match them with errors.Is.
var (
	// ErrClosed is returned by every call on a Medium or Bytes after the Medium was closed.
	ErrClosed = errors.New("medium: closed")
	// ErrSync wraps a failed fsync, fdatasync or msync. Such a failure is never retried.
	ErrSync = errors.New("medium: sync failed")
	// ErrInvalid marks an invalid argument or option (a negative offset, a bad size). It is the
	// root of every package's invalid-argument error: each package's own ErrInvalid (columns,
	// merger, query, ingest, export, objstore) wraps it, so errors.Is(err, ErrInvalid) holds
	// for a bad argument given to any of them.
	ErrInvalid = invalid.Err
)

// Bytes is an append-only byte sequence staged on a Medium. One Bytes is used by one goroutine
// at a time; different Bytes of one Medium may be used concurrently.
type Bytes interface {
	io.Writer
	io.ByteWriter
	io.StringWriter
	io.ReaderFrom // appends everything read from r
	io.WriterTo   // writes every byte written so far, from the start; may be called again; Bytes stays appendable
	io.ReaderAt   // reads back bytes written so far; past Size() it returns io.EOF like os.File
	Size() int64  // bytes written so far: O(1), no flush, no system call, no allocation
}

// Discarder is a Bytes that gives what it holds back before its medium closes. Discard
// releases the storage of the bytes written (a temp file's space and pages, memory), after
// which every call on the Bytes but Size fails with an error wrapping ErrClosed; a second
// Discard does nothing, and one after the medium closed fails like any other call. A writer
// that has copied a Bytes to where it belongs discards it: a segment's publication does, part
// by part, so that the pages a staged part held serve the output file's next ones instead of
// fresh memory.
type Discarder interface {
	Discard() error
}

// PrefixDiscarder is a Bytes that gives back the storage of its first bytes while it is still
// read from there on. DiscardPrefix(n) releases what the backend can of [0, n) (a temp file's
// space and pages up to n); afterwards a read that starts before n, and WriteTo, fail with an
// error wrapping ErrClosed, while reads from n on, Size and writes work as before. An n at or
// below an earlier one does nothing; n past Size fails with an error wrapping ErrInvalid.
// Discard (the Bytes is then a Discarder too) releases the rest. A writer that copies a Bytes
// out front to back gives back what it has copied as it goes: a segment's publication does,
// every few MiB of a part, so that the output file's next pages are the ones the part held a
// moment before, not memory the machine has to hand out afresh.
type PrefixDiscarder interface {
	DiscardPrefix(n int64) error
}

// Medium hands out Bytes and releases everything they hold when it is closed.
// Its methods are safe for concurrent use.
type Medium interface {
	NewBytes() (Bytes, error)
	NewChild() (Medium, error) // same backend and settings; closed by its own Close or by the parent's
	OnClose(fn func() error)   // fn runs at Close, last registered first
	Close() error              // releases all; later calls on its Bytes fail with ErrClosed; a second Close returns nil
}
