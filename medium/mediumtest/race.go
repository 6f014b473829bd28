//go:build race

package mediumtest

// raceEnabled scales the random cases down under -race, where every copied byte is checked.
const raceEnabled = true
