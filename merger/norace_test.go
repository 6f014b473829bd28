//go:build !race

package merger

const raceEnabled = false
