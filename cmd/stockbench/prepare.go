package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/stockbench/stockbench/runner"
)

// cmdPrepare is the step run --procs N takes before it starts its
// generators, alone: for generators started by someone else (a script, a
// Kubernetes Indexed Job), which then run --shard I/N --no-reset against
// the stores it prepared. It takes run's flags, so that the same
// arguments serve both; it needs --backend external and one scenario.
func cmdPrepare(ctx context.Context, args []string, stdout, stderr io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("prepare", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	if code, done := parseFlags(fs, args, stdout, fail); done {
		return code
	}
	o, err := f.resolve(fs)
	if err != nil {
		return fail(exitUsage, err)
	}
	switch {
	case f.servers.Backend != "external":
		return fail(exitUsage, errors.New("prepare needs --backend external: the servers the generators will use (servers it started would be gone when it ends)"))
	case len(o.Scenarios) != 1:
		return fail(exitUsage, fmt.Errorf("prepare: --scenario names %d scenarios; the stores are prepared for one", len(o.Scenarios)))
	}
	p, err := newProvider(f.servers, stderr)
	if err != nil {
		return fail(exitUsage, err)
	}
	stock, err := runner.Prepare(ctx, p, o)
	if err != nil {
		return fail(exitUsage, fmt.Errorf("stores not prepared: %w", err))
	}
	var units int64
	for _, s := range stock {
		units += s.Total
	}
	fmt.Fprintf(stdout, "prepared for %s: schema reset, Redis emptied, %d SKU(s) with %d units loaded\n", o.Scenarios[0], len(stock), units)
	fmt.Fprintf(stdout, "now start N generators with the same flags: stockbench run --shard I/N --no-reset --start-barrier stockbench:barrier:%s --backend external …\n",
		strconv.FormatInt(time.Now().UnixNano(), 36))
	return exitOK
}
