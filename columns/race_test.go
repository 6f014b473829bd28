//go:build race

package columns

// raceEnabled: the race detector slows the big tests down about tenfold; they shrink under it.
const raceEnabled = true
