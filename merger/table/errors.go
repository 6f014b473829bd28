package table

import (
	"errors"
	"io/fs"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/invalid"
)

// Sentinel errors, matched with errors.Is. Every error this package returns starts with
// "table: " and names the table and the version or segment it is about.
var (
	// ErrConflict marks a commit that lost: the version it would create was taken by another
	// writer (the error wraps fs.ErrExist too) and could not be rebased, because a segment it
	// removes is no longer live (the error names it).
	ErrConflict = errors.New("table: conflict")
	// ErrCorrupt marks a log entry that fails its checksum or does not decode, or a segment
	// whose footer is not the one the log lists. It matches columns.ErrCorrupt too.
	ErrCorrupt = newSentinel("table: corrupt", columns.ErrCorrupt)
	// ErrVersion marks a log entry of a newer format than this package reads. It matches
	// columns.ErrVersion too.
	ErrVersion = newSentinel("table: unsupported log format", columns.ErrVersion)
	// ErrNotExist marks a location that holds no table, or a version the log does not hold.
	// It matches fs.ErrNotExist too.
	ErrNotExist = newSentinel("table: does not exist", fs.ErrNotExist)
	// ErrExist marks a Create where a table exists. It matches fs.ErrExist too.
	ErrExist = newSentinel("table: exists", fs.ErrExist)
	// ErrSchema marks segments whose schema differs from the table's (or from each other's).
	// It matches columns.ErrSchema too.
	ErrSchema = newSentinel("table: schema mismatch", columns.ErrSchema)
	// ErrInvalid marks a bad argument: a malformed location, an unknown kind, a bad segment
	// name. It matches medium.ErrInvalid.
	ErrInvalid = invalid.Sentinel("table: invalid argument")
	// ErrUnsupported marks a store that lacks what a commit needs: a file system with no
	// rename that refuses to replace (RenameNoReplacer), or an S3 service that does not honour
	// conditional writes (unless Options.SingleWriter).
	ErrUnsupported = errors.New("table: unsupported store")
)

// sentinel is a sentinel error with its own message that also matches others under errors.Is.
type sentinel struct {
	msg string
	is  []error
}

func newSentinel(msg string, is ...error) error { return &sentinel{msg: msg, is: is} }

func (e *sentinel) Error() string   { return e.msg }
func (e *sentinel) Unwrap() []error { return e.is }
