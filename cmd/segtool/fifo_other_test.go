//go:build !unix

package main

import "errors"

// mkfifo: no named pipes in the file system here.
func mkfifo(string) error { return errors.ErrUnsupported }
