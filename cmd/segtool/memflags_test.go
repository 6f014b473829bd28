package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The runtime's soft memory limit of ingest and gen is twice what ingestion holds and 32 MiB
// more, unless given.
func TestMemoryFlagsSoftLimit(t *testing.T) {
	f := func(maxBytes int64, limitMiB, want int) {
		t.Helper()
		m := memoryFlags{maxBytes: maxBytes, limitMiB: limitMiB}
		require.Equal(t, want, m.softLimitMiB(), "%+v", m)
	}
	f(64<<20, -1, 160)
	f(24<<20, -1, 80)
	f(64<<20+1, -1, 161)
	f(-1, -1, defaultMemoryLimitMiB)
	f(64<<20, 0, 0)
	f(64<<20, 300, 300)
}
