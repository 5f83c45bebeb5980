package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/term"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/internal/version"
	"github.com/stockbench/stockbench/reports"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the run itself failed
	exitUsage  = 2 // bad input or unreachable servers: nothing ran
	// exitIncomplete: a phase did not finish — a run's settle or audit
	// (its load figures are written), or an audit that could not read
	// the stores: no verdict.
	exitIncomplete  = 3
	exitInterrupted = 130
)

const usage = `usage: stockbench <command> [flags]

commands:
  run        run a scenario against strategies and write a report
  calibrate  measure the raw ceilings of the stores (hot-row UPDATE, FOR UPDATE txn, EVALSHA)
  sweep      run a grid: --param NAME=V1,V2,… over any run flag; sweep charts
  curve      open loop at rising rates: each strategy's highest rate under --slo p99=50ms
  faults     every strategy under each standard fault (Redis/MySQL pause, restart, latency, app-crash): the fault matrix
  report     re-render summary.md, CSV, charts and index.html from DIR/results.json
  compare    OLD NEW (files or report dirs): side-by-side table, exit 1 on a regression (the CI gate)
  project    RESULTS --deploy SPEC: each run's measured costs carried to a stated deployment
  prepare    reset and load external stores for generators started elsewhere (run --shard I/N --no-reset)
  merge      OUT DIR…: one report from several generators' results.json (histograms merged exactly)
  serve      one service instance of one strategy behind the order API (HTTP/JSON, docs/api.md)
  audit      grade any MySQL (and Redis) in this schema: the reconciliation job; exit 1 on an anomaly
  down       remove leftover stockbench containers, and data dirs of killed local runs
  version    print the version

run 'stockbench <command> -h' (or 'stockbench help <command>') for its arguments, flags and an example.
`

// Main is the whole CLI; it returns the process exit code. Errors are one
// line on stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	fail := func(code int, err error) int {
		// Every problem of a validation on its own line.
		var ps problems
		if errors.As(err, &ps) {
			for _, e := range ps {
				fmt.Fprintf(stderr, "stockbench: %s\n", oneLine(e))
			}
			return code
		}
		fmt.Fprintf(stderr, "stockbench: %s\n", oneLine(err))
		return code
	}
	// The MySQL and Redis drivers log to stderr by default (a refused dial,
	// a connection the server closed); their lines read like failures. The
	// CLI reports what matters as its one line and counts errors in the
	// results; the drivers' lines go to STOCKBENCH_DEBUG_LOG when set, else
	// nowhere.
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
	watchLifeline(stderr)
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr, fail)
	case "calibrate":
		return cmdCalibrate(ctx, args[1:], stdout, stderr, fail)
	case "report":
		return cmdReport(args[1:], stdout, fail)
	case "compare":
		return cmdCompare(args[1:], stdout, fail)
	case "project":
		return cmdProject(args[1:], stdout, fail)
	case "merge":
		return cmdMerge(args[1:], stdout, fail)
	case "prepare":
		return cmdPrepare(ctx, args[1:], stdout, stderr, fail)
	case "down":
		return cmdDown(args[1:], stdout, fail)
	case "sweep":
		return cmdSweep(ctx, args[1:], stdout, stderr, fail)
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr, fail)
	case "audit":
		return cmdAudit(ctx, args[1:], stdout, fail)
	case "curve":
		return cmdCurve(ctx, args[1:], stdout, stderr, fail)
	case "faults":
		return cmdFaults(ctx, args[1:], stdout, stderr, fail)
	case "version":
		fs := flag.NewFlagSet("version", flag.ContinueOnError)
		if code, done := parseFlags(fs, args[1:], stdout, fail); done {
			return code
		}
		fmt.Fprintln(stdout, "stockbench", version.Tool())
		return exitOK
	case "help", "-h", "--help":
		if len(args) > 1 && args[0] == "help" && args[1] != "help" {
			// `stockbench help run` is `stockbench run -h`, as `go help
			// build` is; an unknown name gets the unknown-command error.
			return Main(ctx, []string{args[1], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	return fail(exitUsage, fmt.Errorf("unknown command %q (want run, sweep, curve, faults, calibrate, report, compare, prepare, merge, serve, audit, down or version)", args[0]))
}

func oneLine(err error) string {
	return flagNames.Replace(strings.Join(strings.Fields(err.Error()), " "))
}

// flagNames turns the settings that library errors name (fields of
// servers.Options and runner.Options: the libraries speak their own API,
// not this CLI) into the flags that set them.
var flagNames = strings.NewReplacer(
	"RedisPersistence", "--redis-persistence",
	"CausalReads", "--mysql-causal-reads",
	"RedisCluster", "--redis-cluster",
	"MySQLCluster", "--mysql-cluster",
	"MySQLDSN", "--mysql-dsn",
	"RedisAddr", "--redis-addr",
	"RedisURL", "--redis-url",
	"Backend ", "--backend ",
	"Pool ", "--pool ",
)

// knobFlags are the flags of the scenario knobs (scenarios.Params fields)
// that only some scenarios read (Scenario.Reads); TestKnobFlags checks it
// names every one.
var knobFlags = map[string]string{
	"Duration": "duration", "Warmup": "warmup", "SKUs": "skus", "Skew": "skew",
	"Mix": "mix", "NoRestock": "no-restock", "Rate": "rate",
	"LimitPerBuyer": "limit-per-buyer", "RepeatBuyers": "repeat-buyers", "RepeatTries": "repeat-tries",
}

// flagKnob is the knob a flag sets, or "" when it sets none of knobFlags.
func flagKnob(flag string) string {
	for k, f := range knobFlags {
		if f == flag {
			return k
		}
	}
	return ""
}

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
			printHelp(fs, stdout)
			return exitOK, true
		}
		return fail(exitUsage, flagHint(err)), true
	}
	// A flag whose value is another flag's name was given no value: the
	// next flag was taken as it (--strategies --scenario flash).
	var swallowed error
	fs.Visit(func(f *flag.Flag) {
		v := f.Value.String()
		if name, ok := strings.CutPrefix(v, "-"); ok && swallowed == nil {
			if fs.Lookup(strings.TrimPrefix(name, "-")) != nil {
				swallowed = fmt.Errorf("--%s took %q as its value: give --%s a value before %s", f.Name, v, f.Name, v)
			}
		}
	})
	if swallowed != nil {
		return fail(exitUsage, swallowed), true
	}
	return 0, false
}

// flagHint adds to a flag package error the fix it does not name: a
// duration needs a unit.
func flagHint(err error) error {
	msg := err.Error()
	if strings.Contains(msg, "parse error") && strings.HasPrefix(msg, "invalid value") {
		if _, num := strconv.ParseFloat(strings.Split(msg, `"`)[1], 64); num == nil {
			return fmt.Errorf("%w (a duration needs a unit: 10s, 500ms, 2m)", err)
		}
	}
	return err
}

// printHelp writes the usage of fs's command: its arguments, what it does,
// an example and its flags.
func printHelp(fs *flag.FlagSet, w io.Writer) {
	h := commandHelp[fs.Name()]
	fmt.Fprintf(w, "%s\n\n%s\n\nexample:\n  %s\n", strings.TrimSpace("usage: stockbench "+fs.Name()+" "+h.args), h.about, h.example)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// isTerminal reports whether w is a terminal (progress lines go only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func cmdReport(args []string, stdout io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	if code, done := parseFlagsAllowArgs(fs, args, stdout, fail); done {
		return code
	}
	if fs.NArg() != 1 {
		return fail(exitUsage, errors.New("usage: stockbench report DIR"))
	}
	dir := fs.Arg(0)
	res, err := results.ReadJSON(filepath.Join(dir, "results.json"))
	if err != nil {
		return fail(exitUsage, err)
	}
	a := analysis.Analyze(res)
	if err := reports.Render(dir, a); err != nil {
		return fail(exitFailed, err)
	}
	reports.Table(stdout, a)
	return exitOK
}
