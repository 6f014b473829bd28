//go:build !race

package ingest

// raceEnabled says the race detector is on: the biggest tests shrink under it.
const raceEnabled = false
