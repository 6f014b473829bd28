//go:build !unix

package bench

func syncAll() {}
