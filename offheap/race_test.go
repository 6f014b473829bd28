//go:build race

package offheap

// raceEnabled: the big memory tests shrink under -race, where the race detector's shadow memory
// also makes resident-memory figures meaningless.
const raceEnabled = true
