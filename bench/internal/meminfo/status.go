package meminfo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Status is a process's memory as /proc/PID/status tells it, in bytes.
type Status struct {
	VmHWM    int64 // peak resident set size, kept by the kernel
	VmRSS    int64 // resident set size now: RssAnon + RssFile + RssShmem
	RssAnon  int64 // resident anonymous pages (Go heap, off-heap chunks, C++ heaps)
	RssFile  int64 // resident file-backed pages mapped by the process (its binary, mapped inputs)
	RssShmem int64 // resident shared memory (shmem, tmpfs mappings)
}

// ReadStatus reads /proc/self/status.
func ReadStatus() (Status, error) {
	r, err := OpenStatus()
	if err != nil {
		return Status{}, err
	}
	st, err := r.Read()
	return st, errors.Join(err, r.Close())
}

// StatusReader reads /proc/self/status again and again without allocating (a pread at
// offset 0 into one buffer, parsed in place), so that sampling it every few milliseconds
// does not add garbage to the Go heap it measures.
type StatusReader struct {
	f   *os.File
	buf []byte
}

// OpenStatus opens /proc/self/status for Read.
func OpenStatus() (*StatusReader, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil, fmt.Errorf("meminfo: %w", err)
	}
	return &StatusReader{f: f, buf: make([]byte, 16<<10)}, nil
}

// Read reads the status afresh.
func (r *StatusReader) Read() (Status, error) {
	n, err := r.f.ReadAt(r.buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return Status{}, fmt.Errorf("meminfo: status: %w", err)
	}
	if n == len(r.buf) {
		return Status{}, fmt.Errorf("meminfo: status: longer than %d bytes", len(r.buf))
	}
	return parseStatus(r.buf[:n])
}

// Close closes the file.
func (r *StatusReader) Close() error { return r.f.Close() }

// parseStatus reads the VmHWM, VmRSS, RssAnon, RssFile and RssShmem lines ("RssAnon:  1234
// kB") of a /proc/PID/status text; each must be there once. It allocates nothing but its
// errors.
func parseStatus(b []byte) (Status, error) {
	var s Status
	var seen [5]bool
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			continue
		}
		k := -1
		var dst *int64
		switch string(line[:colon]) { // no allocation: the compiler compares in place
		case "VmHWM":
			k, dst = 0, &s.VmHWM
		case "VmRSS":
			k, dst = 1, &s.VmRSS
		case "RssAnon":
			k, dst = 2, &s.RssAnon
		case "RssFile":
			k, dst = 3, &s.RssFile
		case "RssShmem":
			k, dst = 4, &s.RssShmem
		}
		if k < 0 {
			continue
		}
		if seen[k] {
			return Status{}, fmt.Errorf("meminfo: status: %s: twice", line[:colon])
		}
		seen[k] = true
		v, unit, err := parseKB(line[colon+1:])
		if err != nil {
			return Status{}, fmt.Errorf("meminfo: status: %s: %q: %w", line[:colon], bytes.TrimSpace(line[colon+1:]), err)
		}
		if unit {
			v <<= 10
		}
		*dst = v
	}
	found := 0
	for _, ok := range seen {
		if ok {
			found++
		}
	}
	if found != len(seen) {
		return Status{}, fmt.Errorf("meminfo: status: want VmHWM, VmRSS, RssAnon, RssFile and RssShmem, found %d of them", found)
	}
	return s, nil
}

var errNumber = errors.New("not a number of kB")

// parseKB parses " 1234 kB" (spaces or tabs around): the number, and whether the kB unit
// follows it.
func parseKB(b []byte) (int64, bool, error) {
	b = bytes.TrimSpace(b)
	var v int64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if v > (1<<62)/10 {
			return 0, false, errNumber
		}
		v = v*10 + int64(b[i]-'0')
	}
	if i == 0 {
		return 0, false, errNumber
	}
	rest := bytes.TrimSpace(b[i:])
	switch string(rest) {
	case "kB":
		return v, true, nil
	case "":
		return v, false, nil
	}
	return 0, false, errNumber
}

// StatusSampler reads a Status (ReadStatus, or StartStatusFunc's reader) every few
// milliseconds until Stop, keeping the peak of each figure on its own: the peaks of RssAnon
// and RssFile may come from different samples, and a peak between two samples is missed
// (VmHWM, the kernel's, misses nothing).
type StatusSampler struct {
	read    func() (Status, error)
	stop    chan struct{}
	done    sync.WaitGroup
	peak    Status
	samples int
	err     error
	close   func() error // StartStatus's reader
}

// StartStatus starts sampling /proc/self/status every every (5 ms if zero), through one
// StatusReader (closed by Stop).
func StartStatus(every time.Duration) (*StatusSampler, error) {
	r, err := OpenStatus()
	if err != nil {
		return nil, err
	}
	s := StartStatusFunc(every, r.Read)
	s.close = r.Close
	return s, nil
}

// StartStatusFunc starts sampling read every every (5 ms if zero).
func StartStatusFunc(every time.Duration, read func() (Status, error)) *StatusSampler {
	if every <= 0 {
		every = 5 * time.Millisecond
	}
	s := &StatusSampler{read: read, stop: make(chan struct{})}
	sampleEvery(every, s.stop, &s.done, s.sample)
	return s
}

func (s *StatusSampler) sample() {
	v, err := s.read()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.samples++
	p := &s.peak
	p.VmHWM, p.VmRSS, p.RssAnon = max(p.VmHWM, v.VmHWM), max(p.VmRSS, v.VmRSS), max(p.RssAnon, v.RssAnon)
	p.RssFile, p.RssShmem = max(p.RssFile, v.RssFile), max(p.RssShmem, v.RssShmem)
}

// Stop stops sampling (after one last sample) and returns the peak of each figure, the number
// of samples taken, and the first error of a read.
func (s *StatusSampler) Stop() (Status, int, error) {
	close(s.stop)
	s.done.Wait()
	err := s.err
	if s.close != nil {
		err = errors.Join(err, s.close())
	}
	return s.peak, s.samples, err
}
