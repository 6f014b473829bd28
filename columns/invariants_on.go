//go:build invariants

package columns

// invariants turns on the checks too expensive for every build: see DimWriter.
const invariants = true
