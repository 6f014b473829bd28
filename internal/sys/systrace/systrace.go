// Package systrace records the durability calls made through a sys.Calls table (sync_file_range,
// fdatasync, fsync), and checks a recorded sequence against the trickle scheme, so that tests
// of every package that writes can pin what was called, on which file, in which order.
package systrace

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/writeout/writeout/internal/sys"
)

// Call is one recorded call.
type Call struct {
	Op    string // "sync_file_range", "fdatasync" or "fsync"
	File  string // the file's name (os.File.Name)
	Off   int64  // sync_file_range only
	Len   int64  // sync_file_range only
	Flags int    // sync_file_range only
	Size  int64  // the file's size when the call was made (-1: unknown)
	// Key tells files apart (two unnamed files in one directory have one name): "f" and the
	// number of the *os.File in the order the Recorder first saw it.
	Key string
}

func (c Call) String() string {
	if c.Op != "sync_file_range" {
		return fmt.Sprintf("%s %s", c.Op, c.File)
	}
	return fmt.Sprintf("%s %s %d+%d %s", c.Op, c.File, c.Off, c.Len, FlagString(c.Flags))
}

// FlagString names sync_file_range flags: "WAIT_BEFORE|WRITE|WAIT_AFTER".
func FlagString(flags int) string {
	var s []string
	for _, f := range []struct {
		bit  int
		name string
	}{{sys.SyncFileRangeWaitBefore, "WAIT_BEFORE"}, {sys.SyncFileRangeWrite, "WRITE"}, {sys.SyncFileRangeWaitAfter, "WAIT_AFTER"}} {
		if flags&f.bit != 0 {
			s = append(s, f.name)
			flags &^= f.bit
		}
	}
	if flags != 0 || len(s) == 0 {
		s = append(s, fmt.Sprintf("%#x", flags))
	}
	return strings.Join(s, "|")
}

// Recorder records the calls made through the table it wraps. It is safe for concurrent use.
type Recorder struct {
	// Log, when set, receives each call as a line of Format as it is made (for a test that
	// reads the calls of another process).
	Log io.Writer

	mu    sync.Mutex
	calls []Call
	keys  map[*os.File]string // keeps the files alive: an address is never reused for another
}

// Wrap edits c so that its SyncFileRange, Fdatasync and Fsync are recorded by r before the
// call c had runs.
func (r *Recorder) Wrap(c *sys.Calls) {
	sfr, fds, fs := c.SyncFileRange, c.Fdatasync, c.Fsync
	c.SyncFileRange = func(f *os.File, off, n int64, flags int) error {
		r.add(f, Call{Op: "sync_file_range", Off: off, Len: n, Flags: flags})
		return sfr(f, off, n, flags)
	}
	c.Fdatasync = func(f *os.File) error {
		r.add(f, Call{Op: "fdatasync"})
		return fds(f)
	}
	c.Fsync = func(f *os.File) error {
		r.add(f, Call{Op: "fsync"})
		return fs(f)
	}
}

func (r *Recorder) add(f *os.File, c Call) {
	c.File, c.Size = f.Name(), -1
	if fi, err := f.Stat(); err == nil {
		c.Size = fi.Size()
	}
	r.mu.Lock()
	if r.keys == nil {
		r.keys = map[*os.File]string{}
	}
	if c.Key = r.keys[f]; c.Key == "" {
		c.Key = "f" + strconv.Itoa(len(r.keys))
		r.keys[f] = c.Key
	}
	r.calls = append(r.calls, c)
	if r.Log != nil {
		_, _ = io.WriteString(r.Log, Format(c)+"\n")
	}
	r.mu.Unlock()
}

// Calls returns a copy of the calls recorded so far.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// ByFile returns the sync_file_range and fdatasync calls grouped per open file (two unnamed
// files in one directory have one name but are two groups), in order of each file's first call.
// Fsync calls (directories) are left out.
func ByFile(calls []Call) [][]Call {
	var out [][]Call
	idx := map[string]int{}
	for _, c := range calls {
		if c.Op == "fsync" {
			continue
		}
		i, ok := idx[c.Key]
		if !ok {
			i = len(out)
			idx[c.Key] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], c)
	}
	return out
}

// Expected returns the trickle sequence on a file of size bytes written with interval every:
// for each full range N (offset N*every, length every), sync_file_range WRITE on N (submit it,
// without waiting), then, from the second range on, WAIT_BEFORE on N-1 (wait only for the
// range submitted one interval earlier: a lag of exactly one interval); after the last byte,
// one fdatasync when synced. The ranges are contiguous from offset 0 and cover every full
// interval of the file; the tail shorter than every is left to the fdatasync.
func Expected(size, every int64, synced bool) []Call {
	var out []Call
	for n := int64(0); (n+1)*every <= size; n++ {
		out = append(out, Call{Op: "sync_file_range", Off: n * every, Len: every, Flags: sys.SyncFileRangeWrite})
		if n > 0 {
			out = append(out, Call{Op: "sync_file_range", Off: (n - 1) * every, Len: every, Flags: sys.SyncFileRangeWaitBefore})
		}
	}
	if synced {
		out = append(out, Call{Op: "fdatasync"})
	}
	return out
}

// Check compares the calls on one file (one group of ByFile) with Expected(size, every,
// synced), comparing the call, range and flags, and returns an error naming the first call
// that differs, or nil. A negative size takes the file's size from the last call recorded,
// rounded down to whole intervals (for a file never synced, written to its end before its last
// sync_file_range): the shape is checked, not that the ranges reach the file's end.
func Check(calls []Call, size, every int64, synced bool) error {
	name := ""
	if len(calls) > 0 {
		name = calls[0].File
	}
	if size < 0 {
		var last int64
		for _, c := range calls {
			if c.Op == "sync_file_range" && c.Flags == sys.SyncFileRangeWrite {
				last = max(last, c.Off+c.Len)
			}
		}
		size = last
	}
	want := Expected(size, every, synced)
	same := func(a, b Call) bool { return a.Op == b.Op && a.Off == b.Off && a.Len == b.Len && a.Flags == b.Flags }
	for i := range max(len(calls), len(want)) {
		switch {
		case i >= len(calls):
			return fmt.Errorf("trickle %s (%d bytes every %d): call %d missing: want %v", name, size, every, i, want[i])
		case i >= len(want):
			return fmt.Errorf("trickle %s (%d bytes every %d): call %d unexpected: %v", name, size, every, i, calls[i])
		case !same(calls[i], want[i]):
			return fmt.Errorf("trickle %s (%d bytes every %d): call %d is %v, want %v", name, size, every, i, calls[i], want[i])
		}
	}
	return nil
}

// Format returns c as one line: op, key, offset, length, flags, size and the file's name.
func Format(c Call) string {
	return fmt.Sprintf("%s %s %d %d %d %d %s", c.Op, c.Key, c.Off, c.Len, c.Flags, c.Size, c.File)
}

// Parse parses lines of Format, one call a line; empty lines are skipped.
func Parse(text string) ([]Call, error) {
	var out []Call
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue
		}
		f := strings.SplitN(line, " ", 7)
		if len(f) != 7 {
			return nil, fmt.Errorf("systrace: bad line %q", line)
		}
		c := Call{Op: f[0], Key: f[1], File: f[6]}
		var err error
		for i, p := range []*int64{&c.Off, &c.Len, &c.Size} {
			if *p, err = strconv.ParseInt(f[[]int{2, 3, 5}[i]], 10, 64); err != nil {
				return nil, fmt.Errorf("systrace: bad line %q: %w", line, err)
			}
		}
		if c.Flags, err = strconv.Atoi(f[4]); err != nil {
			return nil, fmt.Errorf("systrace: bad line %q: %w", line, err)
		}
		out = append(out, c)
	}
	return out, nil
}
