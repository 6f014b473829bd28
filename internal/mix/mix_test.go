package mix

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMix64 pins the function (splitmix64's published finalizer values) and that nearby inputs
// scatter.
func TestMix64(t *testing.T) {
	require.Equal(t, uint64(0), Mix64(0))
	// splitmix64 with seed 0: its first output is Mix64(0x9e3779b97f4a7c15).
	require.Equal(t, uint64(0xe220a8397b1dcdaf), Mix64(0x9e3779b97f4a7c15))
	seen := map[uint64]bool{}
	for i := uint64(0); i < 1000; i++ {
		seen[Mix64(i)>>54] = true
	}
	require.Greater(t, len(seen), 600, "the top 10 bits of 1000 consecutive inputs spread out")
}
