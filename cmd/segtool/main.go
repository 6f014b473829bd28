// Command segtool builds, merges, inspects, verifies and queries writeout segments.
//
//	segtool demo                                   the main job, no set-up
//	segtool gen --schema basic --rows N --out DIR  generated segments
//	segtool ingest --spec SPEC.json --out SEG.seg FILE...
//	segtool merge --out SEG.seg SEG...
//	segtool inspect [--json] SEG
//	segtool verify SEG...
//	segtool dump [--format csv|ndjson] [--columns a,b] SEG
//	segtool export --format parquet --out FILE [--spec-out SPEC.json] SEG
//	segtool query [--filter EXPR] [--group-by a,b] SEG...
//	segtool sweep DIR
//	segtool table create|append|log|segments TABLE ...
//
// Results go to standard output, so they pipe; errors go to standard error as one line that
// names the file and the cause. The exit status is 0 on success, 1 on a failure and 2 on a
// usage error (an unknown command or flag, a missing or malformed argument).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/writeout/writeout/internal/suggest"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Main runs segtool with args (without the program name) and returns the exit status. The first
// SIGINT or SIGTERM cancels the command's context: a merge stops, removes its temp files and
// leaves no output; a second signal kills the process the usual way.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // restore the default action, so a second signal ends the process at once
	}()
	return run(ctx, args, stdin, stdout, stderr)
}

// run is Main without the signal handling: tests call it directly.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root, stopProfile := newRoot()
	out := &checkedWriter{w: stdout}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(out)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if out.err != nil {
		// Results that did not reach standard output are a failure, whatever the command did
		// (> /dev/full, a closed pipe): a script must not take a lost answer for a good one.
		fmt.Fprintln(stderr, "segtool: write standard output: "+oneLine(out.err.Error()))
		if err == nil {
			return exitFailure
		}
	}
	if perr := stopProfile(); perr != nil {
		// Printed here rather than joined to err, which may be a reportedError that prints nothing.
		fmt.Fprintln(stderr, "segtool: "+oneLine(perr.Error()))
		if err == nil {
			return exitFailure
		}
	}
	if err == nil {
		return exitOK
	}
	var rep reportedError
	if errors.As(err, &rep) {
		return exitFailure
	}
	fmt.Fprintln(stderr, "segtool: "+oneLine(err.Error()))
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	return exitFailure
}

// checkedWriter keeps the first error of writes to w and fails every later write with it, so a
// command that ignores an error of fmt.Fprintf still ends in a failure.
type checkedWriter struct {
	w   io.Writer
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	c.err = err
	return n, err
}

// oneLine folds a multi-line message (errors.Join puts one error per line) into one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}

// reportedError is a failure whose messages were printed already (one line per failed file).
type reportedError struct{ failed, total int }

func (r reportedError) Error() string { return fmt.Sprintf("%d of %d failed", r.failed, r.total) }

// usageError marks a mistake in the command line: exit status 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// usageArgs wraps a cobra argument check so that its error is a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{withCommand(cmd, err)}
		}
		return nil
	}
}

// withCommand prefixes err with the subcommand's name (none for the root command).
func withCommand(cmd *cobra.Command, err error) error {
	if !cmd.HasParent() {
		return err
	}
	return fmt.Errorf("%s: %w", strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), err)
}

// newRoot returns the root command and a function to call once it has run: it stops the CPU
// profile --cpuprofile started, if any, and closes the profile's file.
func newRoot() (*cobra.Command, func() error) {
	root := &cobra.Command{
		Use:   "segtool",
		Short: "Build, merge, inspect, verify and query writeout segments",
		Long: `segtool builds columnar segments from CSV, NDJSON or Parquet files, merges them through
a write-out medium (heap, offheap, tmpfile, mmapfile), and inspects, verifies, dumps, queries
and exports them (as Parquet), on local disks or s3:// object storage. Start with
'segtool demo'.

Results go to standard output; errors go to standard error as one line naming the file and
the cause. Exit status: 0 success, 1 failure, 2 usage error.`,
		Example: `  segtool demo
  segtool ingest --spec spec.json --out events.seg events.csv
  segtool merge --out all.seg day1.seg day2.seg
  segtool query --filter "language = 'fr'" --group-by page all.seg`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			var names []string
			for _, c := range cmd.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, c.Name())
				}
			}
			return usageError{fmt.Errorf("unknown command %q (see 'segtool --help')%s", args[0], suggest.Hint(args[0], names))}
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("no command given (see 'segtool --help')")
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	var cpuProfile string
	var profile *os.File // while the CPU profile runs
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile to this file")
	if err := root.PersistentFlags().MarkHidden("cpuprofile"); err != nil {
		panic(err) // only if the flag just defined were missing
	}
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return err
		}
		profile = f
		return nil
	}
	stopProfile := func() error {
		if profile == nil {
			return nil
		}
		pprof.StopCPUProfile()
		f := profile
		profile = nil
		if err := f.Close(); err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		return nil
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{withCommand(cmd, flagHint(cmd, err))}
	})
	root.AddCommand(
		newDemoCmd(),
		newGenCmd(),
		newIngestCmd(),
		newMergeCmd(),
		newInspectCmd(),
		newVerifyCmd(),
		newDumpCmd(),
		newExportCmd(),
		newQueryCmd(),
		newSweepCmd(),
		newTableCmd(),
	)
	return root, stopProfile
}

// flagHint adds to pflag's error for an unknown flag the nearest flag cmd has, if one is near:
// "unknown flag: --granulrity; did you mean --granularity?".
func flagHint(cmd *cobra.Command, err error) error {
	const prefix = "unknown flag: --"
	name, ok := strings.CutPrefix(err.Error(), prefix)
	if !ok {
		return err
	}
	name, _, _ = strings.Cut(name, "=")
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if c := suggest.Closest(name, names); c != "" {
		return fmt.Errorf("%w; did you mean --%s?", err, c)
	}
	return err
}
