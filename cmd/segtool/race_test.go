//go:build race

package main

// raceEnabled: the race detector slows a merge about tenfold; tests shrink their data.
const raceEnabled = true
