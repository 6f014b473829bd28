// Package meminfo samples the kernel's dirty page cache (Dirty plus Writeback in /proc/meminfo)
// for benchmarks that measure how far writes run ahead of the disk. Linux only: elsewhere
// Read returns an error and a Sampler reports nothing.
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

// Read returns Dirty + Writeback from /proc/meminfo, in bytes.
func Read() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("meminfo: %w", err)
	}
	return parse(b)
}

// parse sums the Dirty and Writeback lines ("Dirty:  1234 kB") of a /proc/meminfo text.
func parse(b []byte) (int64, error) {
	var total int64
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 || (string(f[0]) != "Dirty:" && string(f[0]) != "Writeback:") {
			continue
		}
		v, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("meminfo: %s %q: %w", f[0], f[1], err)
		}
		if len(f) > 2 && string(f[2]) == "kB" {
			v <<= 10
		}
		total += v
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("meminfo: want Dirty and Writeback lines, found %d", found)
	}
	return total, nil
}

// Sampler reads a figure (Dirty + Writeback, or StartFunc's) every few milliseconds until
// Stop, keeping the peak.
type Sampler struct {
	read func() (int64, error)
	stop chan struct{}
	done sync.WaitGroup
	peak int64
	err  error
}

// Start starts sampling Dirty + Writeback (Read) every every (5 ms if zero).
func Start(every time.Duration) *Sampler { return StartFunc(every, Read) }

// StartFunc starts sampling read every every (5 ms if zero): any figure whose peak a benchmark
// reports, such as the Go heap's.
func StartFunc(every time.Duration, read func() (int64, error)) *Sampler {
	if every <= 0 {
		every = 5 * time.Millisecond
	}
	s := &Sampler{read: read, stop: make(chan struct{})}
	sampleEvery(every, s.stop, &s.done, s.sample)
	return s
}

// sampleEvery calls sample now, then every every on a goroutine of its own (which done
// counts) until stop is closed, and once more then.
func sampleEvery(every time.Duration, stop <-chan struct{}, done *sync.WaitGroup, sample func()) {
	sample()
	done.Add(1)
	go func() {
		defer done.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	}()
}

func (s *Sampler) sample() {
	v, err := s.read()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.peak = max(s.peak, v)
}

// Stop stops sampling and returns the peak in bytes, and the first error of a read.
func (s *Sampler) Stop() (int64, error) {
	close(s.stop)
	s.done.Wait()
	return s.peak, s.err
}
