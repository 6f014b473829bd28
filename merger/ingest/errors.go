package ingest

import (
	"errors"

	"github.com/writeout/writeout/internal/invalid"
)

// Sentinels, matched with errors.Is.
var (
	// ErrSpec marks an ingestion spec that does not decode or validate (ParseSpec, Spec.Validate).
	ErrSpec = errors.New("ingest: invalid spec")
	// ErrRow marks a row that does not parse: a *RowError. Reading can go on after it.
	ErrRow = errors.New("ingest: row does not parse")
	// ErrInput marks an input that cannot be read as its format at all (a CSV header that
	// lacks a field the spec needs, a line too long): reading it stops.
	ErrInput = errors.New("ingest: unreadable input")
	// ErrInvalid marks invalid options or inputs given to Run. It wraps medium.ErrInvalid.
	ErrInvalid = invalid.Sentinel("ingest: invalid argument")
)

// wrapped is an error whose message is its own text and which also matches the sentinel kind
// (and the cause, when there is one): the messages of ingestion name files, lines and spec keys
// and read as they are, without a package prefix.
type wrapped struct {
	msg   string
	kind  error
	cause error
}

func (e *wrapped) Error() string { return e.msg }

func (e *wrapped) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// specErr marks err as an invalid spec, keeping its message.
func specErr(err error) error {
	if err == nil {
		return nil
	}
	return &wrapped{msg: err.Error(), kind: ErrSpec, cause: err}
}

// asRowError returns the *RowError err is or wraps, or nil. Its variable escapes to the heap
// (errors.As takes it as an interface), so it is allocated only when there is an error: a
// caller asking for each row must not declare one itself (3,000,000 rows made 3,000,000
// allocations of a pointer).
func asRowError(err error) *RowError {
	if err == nil {
		return nil
	}
	var re *RowError
	if errors.As(err, &re) {
		return re
	}
	return nil
}
