package columns

import (
	"flag"
	"os"
	"testing"
)

// TestMain shortens the fuzzer's minimization: every input that reaches new code is minimized
// for -test.fuzzminimizetime (60s by default), calling the fuzz function for each try, and
// FuzzOpen's function opens, verifies and reads a whole segment: with the default the fuzzer
// spends most of its time minimizing. An explicit -fuzzminimizetime still wins.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.fuzzminimizetime" })
	if !set {
		if err := flag.Set("test.fuzzminimizetime", "2s"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
