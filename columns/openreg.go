package columns

import (
	"fmt"
	"io/fs"
	"os"
)

// openRegular opens path for reading and returns it with its FileInfo, or fails when it is not a
// regular file. It opens without blocking (O_NONBLOCK where the platform has it), so a named pipe
// given by mistake is refused at once instead of hanging in open(2) until a writer comes: a
// segment is read at random offsets, which only a regular file allows.
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, fmt.Errorf("%s: %s, not a regular file: %w", path, fileKind(fi.Mode()), ErrInvalid)
	}
	return f, fi, nil
}

// fileKind names the type of a file that is not a regular file.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a special file"
}
