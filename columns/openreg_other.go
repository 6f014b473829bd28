//go:build !unix

package columns

const openNonblock = 0
