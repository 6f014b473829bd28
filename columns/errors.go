package columns

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrCorrupt marks bytes that do not form a valid segment, column part or encoding: a wrong
	// magic, a failed checksum, an offset past the end, an unsorted dictionary, a bad chunk. The
	// message names the column and part.
	ErrCorrupt = errors.New("corrupt segment")
	// ErrVersion marks a segment written in a format version this package does not read.
	ErrVersion = errors.New("unsupported segment version")
	// ErrSchema marks an invalid schema; the message names the column.
	ErrSchema = errors.New("invalid schema")
	// ErrState marks a call made out of order: a value appended after Finish, a dictionary value
	// added after the first id, a writer used after it failed is reported with its first error.
	ErrState = errors.New("columns: call out of order")
)

// corruptf returns an error wrapping ErrCorrupt.
func corruptf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrCorrupt)...)
}

// partError names the column and the part of a decoding error:
// columns: column "page" part bitmaps: <err>.
func partError(column string, kind PartKind, err error) error {
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
