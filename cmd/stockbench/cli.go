package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"golang.org/x/term"

	"github.com/stockbench/stockbench/reports"
	"github.com/stockbench/stockbench/runner"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1 // the run itself failed
	exitUsage       = 2 // bad input or unreachable servers: nothing ran
	exitInterrupted = 130
)

const usage = `usage: stockbench <command> [flags]

commands:
  run        run a scenario against strategies and write a report
  calibrate  measure the raw ceilings of the stores (hot-row UPDATE, FOR UPDATE txn, EVALSHA)
  sweep      run a grid: --param NAME=V1,V2,… over any run flag; sweep charts
  report     re-render summary.md, CSV, charts and index.html from DIR/results.json
  compare    OLD.json NEW.json: side-by-side table, non-zero exit on a regression (for CI)
  down       remove leftover stockbench containers, and data dirs of killed local runs
  version    print the version

run 'stockbench <command> -h' for its flags.
`

// Main is the whole CLI; it returns the process exit code. Errors are one
// line on stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	quietDrivers()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "stockbench: %s\n", oneLine(err))
		return code
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr, fail)
	case "calibrate":
		return cmdCalibrate(ctx, args[1:], stdout, fail)
	case "report":
		return cmdReport(args[1:], stdout, fail)
	case "compare":
		return cmdCompare(args[1:], stdout, fail)
	case "down":
		return cmdDown(args[1:], stdout, fail)
	case "sweep":
		return cmdSweep(ctx, args[1:], stdout, stderr, fail)
	case "version":
		fmt.Fprintln(stdout, "stockbench", runner.ToolVersion())
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	return fail(exitUsage, fmt.Errorf("unknown command %q (want run, sweep, calibrate, report, compare, down or version)", args[0]))
}

// quietDrivers stops the MySQL and Redis drivers from logging to stderr on
// their own (a refused dial, a connection the server closed): the CLI
// reports what matters as its one line, and counts errors in the results.
func quietDrivers() {
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	redis.SetLogger(discardLogger{})
}

// discardLogger is a go-redis logger that drops everything.
type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// parseFlags parses args into fs; -h prints the flags on stdout. done is
// true when the command should return code right away. Positional
// arguments are an error.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer, fail func(int, error) int) (code int, done bool) {
	if code, done := parseFlagsAllowArgs(fs, args, stdout, fail); done {
		return code, true
	}
	if fs.NArg() > 0 {
		return fail(exitUsage, fmt.Errorf("unexpected argument %q", fs.Arg(0))), true
	}
	return 0, false
}

// parseFlagsAllowArgs is parseFlags leaving positional arguments in fs.Args().
func parseFlagsAllowArgs(fs *flag.FlagSet, args []string, stdout io.Writer, fail func(int, error) int) (code int, done bool) {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintf(stdout, "usage: stockbench %s [flags]\n", fs.Name())
			fs.PrintDefaults()
			return exitOK, true
		}
		return fail(exitUsage, err), true
	}
	return 0, false
}

// isTerminal reports whether w is a terminal (progress lines go only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func cmdReport(args []string, stdout io.Writer, fail func(int, error) int) int {
	if len(args) != 1 {
		return fail(exitUsage, errors.New("usage: stockbench report DIR"))
	}
	res, err := reports.ReadJSON(filepath.Join(args[0], "results.json"))
	if err != nil {
		return fail(exitUsage, err)
	}
	if err := reports.Render(args[0], res); err != nil {
		return fail(exitFailed, err)
	}
	reports.Table(stdout, res)
	return exitOK
}
