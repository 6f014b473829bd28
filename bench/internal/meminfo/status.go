package meminfo

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
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
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return Status{}, fmt.Errorf("meminfo: %w", err)
	}
	return parseStatus(b)
}

// parseStatus reads the VmHWM, VmRSS, RssAnon, RssFile and RssShmem lines ("RssAnon:  1234
// kB") of a /proc/PID/status text; each must be there once.
func parseStatus(b []byte) (Status, error) {
	var s Status
	fields := map[string]*int64{"VmHWM:": &s.VmHWM, "VmRSS:": &s.VmRSS, "RssAnon:": &s.RssAnon,
		"RssFile:": &s.RssFile, "RssShmem:": &s.RssShmem}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 {
			continue
		}
		dst, ok := fields[string(f[0])]
		if !ok {
			continue
		}
		if seen[string(f[0])] {
			return Status{}, fmt.Errorf("meminfo: status: %s twice", f[0])
		}
		seen[string(f[0])] = true
		v, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			return Status{}, fmt.Errorf("meminfo: status: %s %q: %w", f[0], f[1], err)
		}
		if len(f) > 2 && string(f[2]) == "kB" {
			v <<= 10
		}
		*dst = v
	}
	if err := sc.Err(); err != nil {
		return Status{}, fmt.Errorf("meminfo: status: %w", err)
	}
	if len(seen) != len(fields) {
		return Status{}, fmt.Errorf("meminfo: status: want VmHWM, VmRSS, RssAnon, RssFile and RssShmem, found %d of them", len(seen))
	}
	return s, nil
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
}

// StartStatus starts sampling /proc/self/status every every (5 ms if zero).
func StartStatus(every time.Duration) *StatusSampler {
	return StartStatusFunc(every, ReadStatus)
}

// StartStatusFunc starts sampling read every every (5 ms if zero).
func StartStatusFunc(every time.Duration, read func() (Status, error)) *StatusSampler {
	if every <= 0 {
		every = 5 * time.Millisecond
	}
	s := &StatusSampler{read: read, stop: make(chan struct{})}
	s.sample()
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				s.sample()
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
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
	return s.peak, s.samples, s.err
}
