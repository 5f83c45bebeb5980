package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/term"

	"github.com/stockbench/stockbench/reports"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/servers"
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
  audit      grade any MySQL (and Redis) in this schema: the reconciliation job; exit 1 on an anomaly
  down       remove leftover stockbench containers (docker backend)
  version    print the version

run 'stockbench <command> -h' for its flags.
`

// Main is the whole CLI; it returns the process exit code. Errors are one
// line on stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "stockbench: %s\n", oneLine(err))
		return code
	}
	// The MySQL driver logs to stderr by default; its lines read like
	// failures. They go to STOCKBENCH_DEBUG_LOG when set, else nowhere.
	driverLog := io.Discard
	if path := os.Getenv("STOCKBENCH_DEBUG_LOG"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fail(exitUsage, fmt.Errorf("STOCKBENCH_DEBUG_LOG: %w", err))
		}
		defer f.Close()
		driverLog = f
	}
	servers.DriverLog(driverLog)
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
	case "audit":
		return cmdAudit(ctx, args[1:], stdout, fail)
	case "version":
		fmt.Fprintln(stdout, "stockbench", runner.ToolVersion())
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	return fail(exitUsage, fmt.Errorf("unknown command %q (want run, sweep, calibrate, report, compare, audit, down or version)", args[0]))
}

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
