//go:build !race

package mediumtest

const raceEnabled = false
