package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/servers"
)

func cmdCalibrate(ctx context.Context, args []string, stdout io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	backend := fs.String("backend", "auto", "servers: auto | local | external")
	dsn := fs.String("mysql-dsn", "", "external MySQL DSN (or STOCKBENCH_MYSQL_DSN)")
	addr := fs.String("redis-addr", "", "external Redis host:port (or STOCKBENCH_REDIS_ADDR)")
	conc := fs.Int("concurrency", 128, "concurrent clients per probe")
	dur := fs.Duration("duration", 5*time.Second, "duration of each probe")
	asJSON := fs.Bool("json", false, "print JSON")
	if code, done := parseFlags(fs, args, stdout, fail); done {
		return code
	}
	if *conc <= 0 || *dur <= 0 {
		return fail(exitUsage, errors.New("--concurrency and --duration must be positive"))
	}
	p, err := servers.New(servers.OptionsFromEnv(servers.Options{Backend: *backend, MySQLDSN: *dsn, RedisAddr: *addr}))
	if err != nil {
		return fail(exitUsage, err)
	}
	ep, err := p.Start(ctx)
	if err != nil {
		return fail(exitUsage, err)
	}
	defer p.Stop()
	conns, err := servers.Open(ep, *conc)
	if err != nil {
		return fail(exitUsage, err)
	}
	defer conns.Close()
	cal, err := runner.Calibrate(ctx, ep, conns, *conc, *dur)
	if err != nil {
		if ctx.Err() != nil {
			return fail(exitInterrupted, errors.New("interrupted"))
		}
		return fail(exitFailed, err)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(cal, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return exitOK
	}
	fmt.Fprintf(stdout, "concurrency %d, %s per probe\n", cal.Concurrency, *dur)
	fmt.Fprintf(stdout, "redis EVALSHA (reserve-shaped, one key)   %10.0f ops/s\n", cal.RedisEvalshaOps)
	fmt.Fprintf(stdout, "mysql conditional UPDATE (one hot row)    %10.0f ops/s\n", cal.MySQLHotUpdateOps)
	fmt.Fprintf(stdout, "mysql FOR UPDATE txn (one hot row)        %10.0f txn/s\n", cal.MySQLHotTxnOps)
	return exitOK
}
