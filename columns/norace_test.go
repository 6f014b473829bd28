//go:build !race

package columns

const raceEnabled = false
