//go:build !invariants

package columns

// invariants turns on the checks too expensive for every build (build with -tags invariants):
// see dimWriter.
const invariants = false
