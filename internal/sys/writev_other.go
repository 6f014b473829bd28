//go:build !(linux || darwin || openbsd)

package sys

import "os"

// Writev writes every byte of bufs to f at its current position, one Write per buffer (this
// platform has no writev through x/sys). bufs is not modified.
func Writev(f *os.File, bufs [][]byte) (int64, error) {
	var total int64
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		n, err := f.Write(b)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
