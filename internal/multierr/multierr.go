// Package multierr joins the errors of cleanups that all had to run: closing a file after a
// failed write, closing several resources, unmapping several chunks. The first error leads, as
// DESIGN.md's durability rules ask; the later ones are joined behind it.
package multierr

import "errors"

// Join returns nil when every err is nil, the one non-nil error itself when there is one, and
// otherwise the first non-nil error with the others joined behind it (errors.Is matches every
// one of them). Unlike errors.Join it returns a single error unwrapped, so that err == target
// still holds for it.
func Join(errs ...error) error {
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
