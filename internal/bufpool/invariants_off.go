//go:build !invariants

package bufpool

// invariants poisons the slices given back (build with -tags invariants).
const invariants = false
