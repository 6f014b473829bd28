package medium

import "fmt"

// SyncMode says which files are synced to stable storage.
type SyncMode uint8

const (
	// SyncOutput fdatasyncs the published file once, renames it into place and fsyncs the
	// directory. Stages are never synced. It is the zero value and the default.
	SyncOutput SyncMode = iota
	// SyncNone makes no syncs at all: scratch output and tests. After a crash the output may
	// be absent, the old file (with Replace), the complete new file, or a file named before its
	// data reached the disk, which fails to open or to verify with an error wrapping
	// columns.ErrCorrupt (with Replace the old file is then lost); never a file that opens and
	// verifies but holds other rows.
	SyncNone
	// SyncAll is SyncOutput, and before the synced file is named it is read back from the
	// device (its cached pages dropped first, on Linux) and every checksum checked: a write the
	// device lost or misplaced fails the publish instead of becoming the output. It costs a
	// read of the output. Stages are never synced in any mode: they are unnamed scratch files,
	// which nothing can find after a crash.
	SyncAll
)

// String returns the mode's name as the CLI spells it.
func (m SyncMode) String() string {
	switch m {
	case SyncOutput:
		return "output"
	case SyncNone:
		return "none"
	case SyncAll:
		return "all"
	}
	return fmt.Sprintf("SyncMode(%d)", uint8(m))
}

// ParseSyncMode parses "none", "output" or "all".
func ParseSyncMode(s string) (SyncMode, error) {
	switch s {
	case "output", "":
		return SyncOutput, nil
	case "none":
		return SyncNone, nil
	case "all":
		return SyncAll, nil
	}
	return 0, fmt.Errorf("%w: unknown durability %q (want none, output or all)", ErrInvalid, s)
}

// Durability says what is synced when files are written. Its zero value is the safe default:
// sync the output once, never the stages.
type Durability struct {
	Sync SyncMode
	// TrickleBytes, when positive, paces writeback while a file is written: every TrickleBytes
	// bytes the new range is submitted for writeback (sync_file_range WRITE) and only the range
	// before it is waited for. The final fdatasync still runs where Sync asks for it. Zero is
	// off; DefaultTrickleBytes is the interval we recommend, and segtool's default.
	TrickleBytes int64
}

// DefaultTrickleBytes is the recommended TrickleBytes, and segtool's default: 8 MiB, one
// sync_file_range call per 8 MiB written. It keeps the file's dirty and writeback pages in the
// page cache to a few intervals while the file is written, so the final fdatasync finds almost
// nothing left to write; bench/RESULTS.md has the measurements.
const DefaultTrickleBytes = 8 << 20

// Validate reports an invalid setting.
func (d Durability) Validate() error {
	if d.Sync > SyncAll {
		return fmt.Errorf("%w: durability: unknown sync mode %d", ErrInvalid, d.Sync)
	}
	if d.TrickleBytes < 0 {
		return fmt.Errorf("%w: durability: negative TrickleBytes %d", ErrInvalid, d.TrickleBytes)
	}
	return nil
}

// SyncsOutput reports whether the published file and its directory are synced.
func (d Durability) SyncsOutput() bool { return d.Sync == SyncOutput || d.Sync == SyncAll }
