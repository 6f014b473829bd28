//go:build race

package mmapfile

// raceEnabled says the race detector is on: repeated conformance variants shrink under it.
const raceEnabled = true
