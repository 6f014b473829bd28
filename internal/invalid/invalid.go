// Package invalid holds writeout's one sentinel for an invalid argument or option, Err, which
// medium exports as medium.ErrInvalid. Every package's invalid-argument sentinel wraps it, so
// errors.Is(err, medium.ErrInvalid) holds for a bad argument given to any package, including
// the ones below medium (internal/gen) that cannot import it.
package invalid

import "errors"

// Err marks an invalid argument or option. It is medium.ErrInvalid.
var Err = errors.New("invalid argument")

// Sentinel returns a package's own invalid-argument sentinel: its message is msg, and
// errors.Is matches both it and Err.
func Sentinel(msg string) error { return &sentinel{msg: msg} }

type sentinel struct{ msg string }

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return Err }
