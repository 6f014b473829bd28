package columns

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/internal/multierr"
)

// IsTempName reports whether a file name (without directory) has the pattern of the temp files
// of a publication (TempPattern: ".writeout-" + decimal digits + ".tmp") or of a merge's
// intermediate segments (".writeout-" + a lowercase word + "-" + digits + ".tmp", such as
// merger.IntermediatePattern).
func IsTempName(name string) bool {
	prefix, suffix, _ := strings.Cut(TempPattern, "*")
	mid, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	if mid, ok = strings.CutSuffix(mid, suffix); !ok {
		return false
	}
	if word, rest, found := strings.Cut(mid, "-"); found {
		if word == "" || strings.Trim(word, "abcdefghijklmnopqrstuvwxyz") != "" {
			return false
		}
		mid = rest
	}
	return mid != "" && strings.Trim(mid, "0123456789") == ""
}

// IsTempFile reports whether path is a temp file that a publication or a merge of this module
// made and a killed process left: its name has the pattern IsTempName accepts, it is a regular
// file (not a link, a directory or a FIFO), and it is empty (created, nothing written yet) or
// begins with a segment's magic. Anything else is not provably ours, and a sweep keeps it.
func IsTempFile(fsys afero.Fs, path string) (bool, error) {
	if fsys == nil {
		fsys = afero.NewOsFs()
	}
	if !IsTempName(filepath.Base(path)) {
		return false, nil
	}
	return isRegularWithMagic(fsys, path, true)
}

// isRegularWithMagic reports whether path is a regular file that begins with a segment's magic
// (or, with empty, holds no byte).
func isRegularWithMagic(fsys afero.Fs, path string, empty bool) (bool, error) {
	var fi fs.FileInfo
	var err error
	if l, ok := fsys.(afero.Lstater); ok {
		fi, _, err = l.LstatIfPossible(path)
	} else {
		fi, err = fsys.Stat(path)
	}
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() {
		return false, nil
	}
	if fi.Size() == 0 {
		return empty, nil
	}
	f, err := fsys.Open(path)
	if err != nil {
		return false, err
	}
	ok, err := beginsWithMagic(f, empty)
	if cerr := f.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return ok && err == nil, err
}

func beginsWithMagic(f afero.File, empty bool) (bool, error) {
	// The name could have changed hands since the Lstat: check what was opened.
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return false, err
	}
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(f, head); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fi.Size() == 0 && empty, nil
		}
		return false, err
	}
	return string(head) == magic, nil
}

// SweepTemp removes from dir the temp files that a publication or a merge left when its process
// died: those IsTempFile recognises, and nothing else (a file of the pattern that is not
// provably ours is kept). On Linux with the OS file system a publication writes an unnamed
// file, so only a publication with Replace, killed between its two last system calls, or one
// on a file system without O_TMPFILE, leaves one. Run it only while no writer publishes into
// dir: it would remove that writer's temp file too. It returns the paths removed; every removal
// is attempted, the first error is returned with later ones joined.
func SweepTemp(fsys afero.Fs, dir string) ([]string, error) {
	if fsys == nil {
		fsys = afero.NewOsFs()
	}
	infos, err := afero.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("columns: sweep %s: %w", dir, err)
	}
	var removed []string
	var errs []error
	for _, fi := range infos {
		if !IsTempName(fi.Name()) {
			continue
		}
		path := filepath.Join(dir, fi.Name())
		ours, err := IsTempFile(fsys, path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("columns: sweep %q: %w", path, err))
			continue
		}
		if !ours {
			continue
		}
		if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("columns: sweep %q: %w", path, err))
			continue
		}
		removed = append(removed, path)
	}
	return removed, multierr.Join(errs...)
}
