//go:build race

package merger

// raceEnabled: the race detector slows everything about tenfold; tests shrink and skip
// their timing bounds.
const raceEnabled = true
