package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/require"
)

// TestMain makes the test binary double as segtool: testscript copies it into a directory on
// PATH under the name segtool, and tests that need a real process (signals) run that copy.
// segtool-test is segtool with the test settings of testSettings (see hooks_test.go).
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"segtool":      func() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
		"segtool-test": func() { testSettings(); os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs testdata/script/*.txtar against the segtool binary.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			if err := setupS3(env); err != nil {
				return err
			}
			// The README's tour data, so that tour.txtar runs exactly what the README shows.
			return os.CopyFS(filepath.Join(env.WorkDir, "tour"), os.DirFS("testdata/tour"))
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"flipbyte": cmdFlipByte,
			"pqdump":   cmdPQDump,
			"s3put":    cmdS3Put,
			"s3get":    cmdS3Get,
			"smaller":  cmdSmaller,
		},
	})
}

// cmdFlipByte corrupts a segment: flipbyte SEG COLUMN KIND flips one bit in the middle of the
// named part.
func cmdFlipByte(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: flipbyte SEG COLUMN KIND")
	}
	path := ts.MkAbs(args[0])
	rep, err := inspect(path)
	ts.Check(err)
	for _, c := range rep.Columns {
		if c.Name != args[1] {
			continue
		}
		for _, p := range c.Parts {
			if p.Kind != args[2] {
				continue
			}
			data, err := os.ReadFile(path)
			ts.Check(err)
			data[p.Offset+p.Bytes/2] ^= 0x10
			ts.Check(os.WriteFile(path, data, 0o644))
			return
		}
	}
	ts.Fatalf("%s: no part %s of column %s", args[0], args[2], args[1])
}

// TestEveryCommandHasAnExample checks the --help convention.
func TestEveryCommandHasAnExample(t *testing.T) {
	root, _ := newRoot()
	require.NotEmpty(t, root.Example)
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			continue
		}
		require.NotEmpty(t, c.Example, "command %s has no example", c.Name())
		require.NotEmpty(t, c.Short, "command %s has no short help", c.Name())
	}
}

// cmdSmaller checks file sizes: smaller A B passes when A has fewer bytes than B.
func cmdSmaller(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: smaller A B")
	}
	a, err := os.Stat(ts.MkAbs(args[0]))
	ts.Check(err)
	b, err := os.Stat(ts.MkAbs(args[1]))
	ts.Check(err)
	if (a.Size() < b.Size()) == neg {
		ts.Fatalf("%s has %d bytes, %s %d", args[0], a.Size(), args[1], b.Size())
	}
	ts.Logf("%s: %d bytes, %s: %d bytes", args[0], a.Size(), args[1], b.Size())
}
