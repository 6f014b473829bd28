package meminfo

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	got, err := parse([]byte("MemTotal:       24684012 kB\nDirty:              1024 kB\nWriteback:            16 kB\nWritebackTmp:          0 kB\n"))
	require.NoError(t, err)
	require.Equal(t, int64(1040<<10), got)
	_, err = parse([]byte("MemTotal: 1 kB\nDirty: 4 kB\n"))
	require.Error(t, err)
	_, err = parse([]byte("Dirty: x kB\nWriteback: 0 kB\n"))
	require.Error(t, err)
}

func TestSampler(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/meminfo is Linux's")
	}
	s := Start(time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	peak, err := s.Stop()
	require.NoError(t, err)
	require.GreaterOrEqual(t, peak, int64(0))
}
