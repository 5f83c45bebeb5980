package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/runner"
)

// faultMatrix is the standard fault matrix of `stockbench faults`: one
// column per entry, each a fault plan. Times are from the start of the
// measured phase; each fault is over (or instant) by 4 s, so a 6 s phase
// shows the recovery.
var faultMatrix = []struct{ name, specs string }{
	{"redis-pause", "redis-pause@2s+2s"},
	{"redis-restart", "redis-restart@2s"},
	// Back at 2 s holding what it held at 1 s: a second of writes lost.
	{"redis-lose", "redis-lose@1s+1s"},
	{"mysql-restart", "mysql-restart@2s"},
	{"latency", "latency:mysql=20ms±10ms@2s+2s,latency:redis=20ms±10ms@2s+2s"},
	{"app-crash", "app-crash@2s"},
	// outbox-local's local table stalls (no effect on the others).
	{"local-fail", "local-fail@2s+2s"},
}

// faultDefaults are the run flags `stockbench faults` sets unless given: a
// short sustained run per cell, so the whole matrix (7 strategies × 7
// faults) stays within about 5 minutes on 2 cores.
var faultDefaults = map[string]string{"scenario": "sustained", "duration": "6s", "warmup": "1s", "buyers": "32",
	"calibrate": "0", "out": "reports/faults", "ttl": "3s", "mix": "confirm=0.8,cancel=0.1,abandon=0.1",
	"sweep-period": "200ms", "outbox-period": "200ms", "reconcile-period": "200ms", "op-timeout": "2s"}

// cmdFaults runs every strategy under each fault of the matrix and writes
// the fault matrix (summary.md, index.html heat map).
func cmdFaults(ctx context.Context, args []string, stdout, stderr io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("faults", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	var names []string
	for _, c := range faultMatrix {
		names = append(names, c.name)
	}
	only := fs.String("only", strings.Join(names, ","), "columns of the matrix to run, comma-separated: "+strings.Join(names, ","))
	if code, done := parseFlags(fs, args, stdout, fail); done {
		return code
	}
	if len(f.faults) > 0 {
		return fail(exitUsage, errors.New("faults runs its own matrix: pick columns with --only, or use run --fault for a plan of your own"))
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if f.file != "" {
		if err := applyFile(fs, f.file); err != nil {
			return fail(exitUsage, err)
		}
		fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		if len(f.faults) > 0 {
			return fail(exitUsage, errors.New("faults runs its own matrix: a scenario file's faults: list is for run"))
		}
	}
	for k, v := range faultDefaults {
		if !set[k] {
			if err := fs.Set(k, v); err != nil {
				return fail(exitUsage, err)
			}
		}
	}
	var cols []string
	for _, c := range strings.Split(*only, ",") {
		c = strings.TrimSpace(c)
		if !slices.Contains(names, c) {
			return fail(exitUsage, fmt.Errorf("--only %q: want some of %s", c, strings.Join(names, ",")))
		}
		cols = append(cols, c)
	}
	var plans []runner.Plan
	for _, c := range faultMatrix {
		if !slices.Contains(cols, c.name) {
			continue
		}
		f.faults = nil
		if err := fs.Set("fault", c.specs); err != nil {
			return fail(exitUsage, err)
		}
		f.file = "" // applied above
		o, err := f.resolve(fs)
		if err != nil {
			return fail(exitUsage, fmt.Errorf("fault %s: %w", c.name, err))
		}
		plans = append(plans, runner.Plan{Options: o, Param: results.ParamFault, Value: c.name})
	}
	return f.execute(ctx, plans, nil, stdout, stderr, fail)
}
