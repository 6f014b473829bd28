package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/mmapfile"
	"github.com/writeout/writeout/offheap"
	"github.com/writeout/writeout/tmpfile"
)

// mediumNames lists the staging media, in the order demo runs them.
var mediumNames = []string{"heap", "offheap", "tmpfile", "mmapfile"}

// mmapfileAvailable reports whether this platform has the mmapfile medium.
func mmapfileAvailable() bool { return runtime.GOOS == "linux" }

// openMedium opens the named medium; the file-backed ones keep their temp file in dir.
func openMedium(name, dir string, d medium.Durability) (medium.Medium, error) {
	switch name {
	case "heap":
		return medium.NewHeap(), nil
	case "offheap":
		return offheap.New(offheap.Options{})
	case "tmpfile":
		return tmpfile.New(tmpfile.Options{Dir: dir, Durability: d})
	case "mmapfile":
		return mmapfile.New(mmapfile.Options{Dir: dir, Durability: d})
	}
	return nil, usagef("unknown medium %q (want %s)", name, strings.Join(mediumNames, ", "))
}

// defaultMemoryLimitMiB is the Go runtime's soft memory limit of ingest and gen with
// --max-bytes-in-memory -1 (merge's is its --memory-limit): the garbage collector works harder
// near it instead of letting the heap double, so peak memory follows what is live.
const defaultMemoryLimitMiB = 192

// setMemoryLimit sets the runtime's soft memory limit to limit bytes unless GOMEMLIMIT says
// otherwise.
func setMemoryLimit(limit int64) {
	if limit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(limit)
	}
}

// compressionHelp is the --compression flag's usage text.
const compressionHelp = "codec of the segment's chunks: none, s2 (fast to read) or zstd (smaller; also enables the size-oriented encodings)"

// addCompressionFlag adds --compression to cmd, s2 by default.
func addCompressionFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "compression", "s2", compressionHelp)
}

// parseCompression parses --compression: a usage error names the flag and the values allowed.
func parseCompression(s string) (columns.Compression, error) {
	c, err := columns.ParseCompression(s)
	if err != nil || s == "" || strings.EqualFold(s, "default") {
		return 0, usagef("--compression %q: want %s", s, columns.CompressionNames)
	}
	return c, nil
}

// parseDurability parses --durability.
func parseDurability(s string) (medium.Durability, error) {
	switch s {
	case "none":
		return medium.Durability{Sync: medium.SyncNone}, nil
	case "", "output":
		return medium.Durability{Sync: medium.SyncOutput}, nil
	case "all":
		return medium.Durability{Sync: medium.SyncAll}, nil
	}
	return medium.Durability{}, usagef("unknown durability %q (want none, output or all)", s)
}

// checkOutput fails when dst exists and replace is false, or when dst is a directory. It creates
// nothing: makeOutputDir does, once the command has checked everything else.
func checkOutput(dst string, replace bool) error {
	if dst == "" {
		return usagef("--out is required")
	}
	fi, err := os.Stat(dst)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the directory may be missing too: makeOutputDir creates it
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s: is a directory", dst)
	}
	if !replace {
		return fmt.Errorf("%s: output exists (use --replace to overwrite it)", dst)
	}
	return nil
}

// makeOutputDir creates dir and its missing parents. Unless durability is none, it fsyncs the
// parent of each directory it created, so that the new entries, and the output published into
// them, survive a crash. The returned undo removes the directories it created, deepest first,
// each only while empty: a command that fails after this leaves no empty directories behind.
func makeOutputDir(dir string, d medium.Durability) (undo func(), err error) {
	var created []string // deepest first
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return nil, fmt.Errorf("%s: not a directory", p)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		created = append(created, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	undo = func() {
		for _, p := range created {
			_ = os.Remove(p) // fails, and keeps p, once anything else has been put in it
		}
	}
	if len(created) == 0 {
		return undo, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		undo()
		return nil, err
	}
	if d.Sync != medium.SyncNone {
		for _, p := range created {
			if err := syncDir(filepath.Dir(p)); err != nil {
				undo()
				return nil, err
			}
		}
	}
	return undo, nil
}

// syncDir fsyncs a directory, making the entries created in it durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, errors.ErrUnsupported) && runtime.GOOS != "windows" {
		return fmt.Errorf("fsync directory %s: %w: %w", dir, medium.ErrSync, err)
	}
	return nil
}

// requireFlag is a usage error for a missing required flag.
func requireFlag(cmd *cobra.Command, name string) error {
	if !cmd.Flags().Changed(name) {
		return usageError{withCommand(cmd, fmt.Errorf("flag --%s is required", name))}
	}
	return nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// humanBytes formats a byte count with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// humanDuration rounds a duration for a summary.
func humanDuration(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(100 * time.Microsecond).String()
	}
}

// rate formats rows per second.
func rate(rows int64, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	r := float64(rows) / d.Seconds()
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.2fM rows/s", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.1fk rows/s", r/1e3)
	}
	return fmt.Sprintf("%.0f rows/s", r)
}

// makeTmpDir makes --tmp-dir dir when it is missing, as the temp directory of a command (one
// level: its parent must exist), and returns what removes it again once the command is done,
// if it made it and it is empty. dir "" (the default place) makes nothing. Errors name the
// flag.
func makeTmpDir(dir string) (remove func(), err error) {
	nothing := func() {}
	if dir == "" {
		return nothing, nil
	}
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nothing, nil
	case err == nil:
		return nil, usagef("--tmp-dir %s: not a directory", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("--tmp-dir %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--tmp-dir %s: %w", dir, err)
	}
	return func() { _ = os.Remove(dir) }, nil // not when something is left in it
}
