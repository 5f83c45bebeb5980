package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/stockbench/stockbench/reports"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
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
  run      run a scenario against strategies and write a report
  report   re-render summary.md from DIR/results.json
  version  print the version

run 'stockbench run -h' for the run flags.
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
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr, fail)
	case "report":
		return cmdReport(args[1:], stdout, fail)
	case "version":
		fmt.Fprintln(stdout, "stockbench", runner.ToolVersion())
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	return fail(exitUsage, fmt.Errorf("unknown command %q (want run, report or version)", args[0]))
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// runFlags are the flags of `stockbench run`.
type runFlags struct {
	backend, mysqlDSN, redisAddr                  string
	strategies, scenario, payDelay, casRetry, out string
	stock                                         int64
	buyers                                        int
	abandon                                       float64
	ttl, shortTTL, outboxPeriod, reconcilePeriod  time.Duration
	sweepPeriod, opTimeout                        time.Duration
	seed                                          uint64
	quiet                                         bool
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.backend, "backend", "auto", "servers: auto | local | external")
	fs.StringVar(&f.mysqlDSN, "mysql-dsn", "", "external MySQL DSN (or STOCKBENCH_MYSQL_DSN); the database named in it is used")
	fs.StringVar(&f.redisAddr, "redis-addr", "", "external Redis host:port (or STOCKBENCH_REDIS_ADDR)")
	fs.StringVar(&f.strategies, "strategies", "all", "comma-separated strategies, or all: "+strings.Join(registry.Names(), ","))
	fs.StringVar(&f.scenario, "scenario", "flash", "scenario: "+strings.Join(runner.Scenarios, " | "))
	fs.Int64Var(&f.stock, "stock", 100, "units of the SKU on sale")
	fs.IntVar(&f.buyers, "buyers", 120, "buyers, released together")
	fs.StringVar(&f.payDelay, "pay-delay", "200ms-500ms", "think time between reserve and confirm: a value or min-max")
	fs.Float64Var(&f.abandon, "abandon", 0, "fraction of buyers who never pay (flash); their reservation expires after --ttl")
	fs.DurationVar(&f.ttl, "ttl", 30*time.Second, "reservation time to live")
	fs.DurationVar(&f.shortTTL, "short-ttl", 300*time.Millisecond, "race scenario: reservation lifetime of the pay-after-expiry buyers")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of every random choice")
	fs.StringVar(&f.out, "out", "reports/latest", "directory for results.json and summary.md")
	fs.StringVar(&f.casRetry, "cas-retry", "backoff", "cas retry policy: backoff | immediate")
	fs.DurationVar(&f.outboxPeriod, "outbox-period", time.Second, "outbox relay poll period")
	fs.DurationVar(&f.reconcilePeriod, "reconcile-period", time.Second, "outbox reconciler period")
	fs.DurationVar(&f.sweepPeriod, "sweep-period", 500*time.Millisecond, "expiry sweeper period")
	fs.DurationVar(&f.opTimeout, "op-timeout", 10*time.Second, "timeout of each operation")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress lines on stderr")
}

// options validates the flags and resolves them into runner options.
func (f *runFlags) options() (runner.Options, error) {
	var o runner.Options
	entries, err := registry.Parse(f.strategies)
	if err != nil {
		return o, err
	}
	pay, err := scenarios.ParseRange(f.payDelay)
	if err != nil {
		return o, fmt.Errorf("--pay-delay: %w", err)
	}
	switch {
	case !contains(runner.Scenarios, f.scenario):
		return o, fmt.Errorf("--scenario %q: want one of %s", f.scenario, strings.Join(runner.Scenarios, ", "))
	case f.stock <= 0:
		return o, errors.New("--stock must be positive")
	case f.buyers <= 0:
		return o, errors.New("--buyers must be positive")
	case f.abandon < 0 || f.abandon > 1:
		return o, errors.New("--abandon must be between 0 and 1")
	case f.ttl <= 0 || f.shortTTL <= 0:
		return o, errors.New("--ttl and --short-ttl must be positive")
	case f.casRetry != "backoff" && f.casRetry != "immediate":
		return o, fmt.Errorf("--cas-retry %q: want backoff or immediate", f.casRetry)
	case f.outboxPeriod <= 0 || f.reconcilePeriod <= 0 || f.sweepPeriod <= 0 || f.opTimeout <= 0:
		return o, errors.New("periods and --op-timeout must be positive")
	case f.out == "":
		return o, errors.New("--out must name a directory")
	}
	return runner.Options{
		Strategies: entries, Scenario: f.scenario, Stock: f.stock, Buyers: f.buyers, PayDelay: pay,
		Abandon: f.abandon, TTL: f.ttl, ShortTTL: f.shortTTL, Seed: f.seed, OpTimeout: f.opTimeout,
		SettleTimeout: time.Minute,
		Strategy: strategies.Config{CASRetry: f.casRetry, OutboxPeriod: f.outboxPeriod,
			ReconcilePeriod: f.reconcilePeriod, SweepPeriod: f.sweepPeriod},
	}, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f runFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "usage: stockbench run [flags]")
			fs.PrintDefaults()
			return exitOK
		}
		return fail(exitUsage, err)
	}
	if fs.NArg() > 0 {
		return fail(exitUsage, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	o, err := f.options()
	if err != nil {
		return fail(exitUsage, err)
	}
	if !f.quiet {
		o.Log = stderr
	}
	p, err := servers.New(servers.OptionsFromEnv(servers.Options{Backend: f.backend, MySQLDSN: f.mysqlDSN, RedisAddr: f.redisAddr}))
	if err != nil {
		return fail(exitUsage, err)
	}
	res, err := runner.Execute(ctx, p, o)
	if res == nil {
		if ctx.Err() != nil {
			return fail(exitInterrupted, errors.New("interrupted before any measurement"))
		}
		return fail(exitUsage, err)
	}
	if len(res.Runs) > 0 || err == nil {
		if werr := writeReport(f.out, res); werr != nil {
			return fail(exitFailed, werr)
		}
		reports.Table(stdout, res)
		fmt.Fprintf(stdout, "\nreport: %s\n", filepath.Join(f.out, "summary.md"))
	}
	switch {
	case err != nil:
		return fail(exitFailed, err)
	case res.Interrupted:
		return fail(exitInterrupted, fmt.Errorf("interrupted; results for %d finished run(s) written to %s", len(res.Runs), f.out))
	}
	return exitOK
}

func writeReport(dir string, res *reports.Results) error {
	if err := reports.WriteJSON(dir, res); err != nil {
		return err
	}
	return reports.WriteSummary(dir, res)
}

func cmdReport(args []string, stdout io.Writer, fail func(int, error) int) int {
	if len(args) != 1 {
		return fail(exitUsage, errors.New("usage: stockbench report DIR"))
	}
	res, err := reports.ReadJSON(filepath.Join(args[0], "results.json"))
	if err != nil {
		return fail(exitUsage, err)
	}
	if err := reports.WriteSummary(args[0], res); err != nil {
		return fail(exitFailed, err)
	}
	reports.Table(stdout, res)
	return exitOK
}
