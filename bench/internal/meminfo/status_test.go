package meminfo

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const statusText = "Name:\tpeerjob\nVmPeak:\t 3060 kB\nVmHWM:\t    9000 kB\nVmRSS:\t    1764 kB\n" +
	"RssAnon:\t     112 kB\nRssFile:\t    1652 kB\nRssShmem:\t       0 kB\nVmSwap:\t0 kB\n"

func TestParseStatus(t *testing.T) {
	got, err := parseStatus([]byte(statusText))
	require.NoError(t, err)
	require.Equal(t, Status{VmHWM: 9000 << 10, VmRSS: 1764 << 10, RssAnon: 112 << 10, RssFile: 1652 << 10}, got)

	f := func(text, want string) {
		t.Helper()
		_, err := parseStatus([]byte(text))
		require.ErrorContains(t, err, want)
	}
	f("VmHWM: 1 kB\nVmRSS: 1 kB\nRssAnon: 1 kB\nRssFile: 1 kB\n", "found 4 of them")
	f(statusText+"RssAnon: 1 kB\n", "RssAnon: twice")
	f("VmHWM: x kB\n", `VmHWM: "x kB"`)
	f("VmHWM: 12 MB\n", `VmHWM: "12 MB"`)
	f("VmHWM: 99999999999999999999 kB\n", "not a number")
	f("VmHWM:\n", "not a number")
	// A figure without a unit is taken as bytes.
	got, err = parseStatus([]byte("VmHWM: 7\nVmRSS: 1 kB\nRssAnon: 1 kB\nRssFile: 1 kB\nRssShmem: 0 kB"))
	require.NoError(t, err)
	require.Equal(t, int64(7), got.VmHWM)
}

func TestStatusReaderDoesNotAllocate(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/self/status is Linux's")
	}
	r, err := OpenStatus()
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	var st Status
	allocs := testing.AllocsPerRun(100, func() {
		st, err = r.Read()
	})
	require.NoError(t, err)
	require.Positive(t, st.VmRSS)
	require.Zero(t, allocs, "allocations per Read")
}

func TestStatusSamplerKeepsEachPeak(t *testing.T) {
	// The peaks of RssAnon and RssFile come from different samples.
	readings := []Status{{RssAnon: 5, RssFile: 1, VmRSS: 6}, {RssAnon: 1, RssFile: 7, VmRSS: 8}, {RssAnon: 2, RssFile: 2, VmRSS: 4, VmHWM: 9}}
	i := 0
	s := StartStatusFunc(time.Millisecond, func() (Status, error) {
		if i >= len(readings) {
			return Status{}, errors.New("no more")
		}
		i++
		return readings[i-1], nil
	})
	time.Sleep(10 * time.Millisecond)
	peak, n, err := s.Stop()
	require.ErrorContains(t, err, "no more")
	require.Equal(t, 3, n)
	require.Equal(t, Status{RssAnon: 5, RssFile: 7, VmRSS: 8, VmHWM: 9}, peak)
}

func TestStatusSamplerSeesGrowth(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/self/status is Linux's")
	}
	before, err := ReadStatus()
	require.NoError(t, err)
	s, err := StartStatus(time.Millisecond)
	require.NoError(t, err)
	// 64 MiB of fresh anonymous memory, touched page by page.
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += os.Getpagesize() {
		buf[i] = 1
	}
	time.Sleep(5 * time.Millisecond)
	peak, n, err := s.Stop()
	runtime.KeepAlive(buf)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 2)
	require.GreaterOrEqual(t, peak.RssAnon, before.RssAnon+48<<20)
	require.GreaterOrEqual(t, peak.VmHWM, peak.VmRSS)
}
