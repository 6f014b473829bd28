//go:build !race

package tmpfile

const raceEnabled = false
