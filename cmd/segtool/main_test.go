package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/require"
)

// TestMain makes the test binary double as segtool: testscript copies it into a directory on
// PATH under the name segtool, and tests that need a real process (signals) run that copy.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"segtool": func() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs testdata/script/*.txtar against the segtool binary.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
	})
}

// TestEveryCommandHasAnExample checks the --help convention.
func TestEveryCommandHasAnExample(t *testing.T) {
	root := newRoot()
	require.NotEmpty(t, root.Example)
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			continue
		}
		require.NotEmpty(t, c.Example, "command %s has no example", c.Name())
		require.NotEmpty(t, c.Short, "command %s has no short help", c.Name())
	}
}
