//go:build invariants

package columns

// invariants turns on the checks too expensive for every build: see dimWriter.
const invariants = true
