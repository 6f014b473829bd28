package columns

import (
	"errors"
	"fmt"

	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
)

// Sentinel errors, matched with errors.Is. Every error this package returns starts with
// "columns: "; one for a bad argument or option wraps ErrInvalid (or ErrSchema, for a schema or
// a column name), one for a call out of order wraps ErrState, one for bad bytes wraps
// ErrCorrupt or ErrVersion.
var (
	// ErrCorrupt marks bytes that do not form a valid segment, column part or encoding: a wrong
	// magic, a failed checksum, an offset past the end, an unsorted dictionary, a bad chunk. The
	// message names the column and part.
	ErrCorrupt = errors.New("columns: corrupt segment")
	// ErrVersion marks a segment written in a format version this package does not read.
	ErrVersion = errors.New("columns: unsupported segment version")
	// ErrSchema marks an invalid schema, or a column the schema does not have; the message
	// names the column.
	ErrSchema = errors.New("columns: invalid schema")
	// ErrState marks a call made out of order: a value appended after Finish, a dictionary value
	// added after the first id, a read from a closed segment (that error matches
	// medium.ErrClosed too); a writer used after it failed is reported with its first error.
	ErrState = errors.New("columns: call out of order")
	// ErrInvalid marks an invalid argument or option: a value or row count over a limit, an id
	// or row out of range, rows out of time order, an unknown compression. It wraps
	// medium.ErrInvalid: errors.Is holds for both.
	ErrInvalid = newSentinel("columns: invalid argument", medium.ErrInvalid)
)

// errClosed marks a read from a closed segment: it matches medium.ErrClosed, as everything
// closed in writeout does, and ErrState.
var errClosed = newSentinel("segment closed", medium.ErrClosed, ErrState)

// sentinel is a sentinel error with its own message that also matches others under errors.Is.
type sentinel struct {
	msg string
	is  []error
}

// newSentinel returns a sentinel error with the message msg that also matches each of is.
func newSentinel(msg string, is ...error) error { return &sentinel{msg: msg, is: is} }

func (e *sentinel) Error() string   { return e.msg }
func (e *sentinel) Unwrap() []error { return e.is }

// corruptf returns an error wrapping ErrCorrupt.
func corruptf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrCorrupt)...)
}

// partError names the column and the part of a decoding error:
// columns: column "page" part bitmaps: <err>.
func partError(column string, kind segfmt.PartKind, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("columns: column %q part %s: %w", column, kind, err)
}

// safely runs fn and turns a panic inside a third-party decoder (roaring, hyperloglog, zstd) into
// an error wrapping ErrCorrupt. Our own decoders bounds-check everything and never rely on it;
// it is a last line of defence for code we do not own, so that bad bytes can never crash a
// reader.
func safely(what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = corruptf("%s: decoder panicked: %v", what, r)
		}
	}()
	return fn()
}
