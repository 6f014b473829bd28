//go:build unix

package columns

import "syscall"

const openNonblock = syscall.O_NONBLOCK
