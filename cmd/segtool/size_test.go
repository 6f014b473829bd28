package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/medium"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "0B": 0, "0MiB": 0, "4096": 4096, "4096B": 4096, "512KiB": 512 << 10, "8MiB": 8 << 20,
		"16MiB": 16 << 20, "2GiB": 2 << 30, "007KiB": 7 << 10, "8589934591GiB": 8589934591 << 30,
	} {
		got, err := parseSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{
		"", "B", "MiB", "-1", "+1", "-1MiB", " 8MiB", "8MiB ", "8 MiB", "1.5MiB", "8MB", "8M", "8mib",
		"8Mib", "8KB", "8k", "0x10", "1e3", "8MiBB", "8GiBMiB", "9223372036854775808",
		"8589934592GiB", "99999999999999999999",
	} {
		_, err := parseSize(in)
		require.Error(t, err, "%q", in)
	}
}

// TestTrickleDefault: merge's --trickle default is the library's recommended interval.
func TestTrickleDefault(t *testing.T) {
	fl := newMergeCmd().Flags().Lookup("trickle")
	require.NotNil(t, fl)
	got, err := parseSize(fl.DefValue)
	require.NoError(t, err)
	require.Equal(t, int64(medium.DefaultTrickleBytes), got)
}
