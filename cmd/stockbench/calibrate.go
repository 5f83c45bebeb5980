package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/stockbench/stockbench/calibrate"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/servers"
)

func cmdCalibrate(ctx context.Context, args []string, stdout, stderr io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	var so servers.Options
	registerServerFlags(fs, &so)
	conc := fs.Int("concurrency", 128, "concurrent clients per probe")
	dur := fs.Duration("duration", 5*time.Second, "duration of each probe")
	asJSON := fs.Bool("json", false, "print JSON")
	if code, done := parseFlags(fs, args, stdout, fail); done {
		return code
	}
	if *conc <= 0 || *dur <= 0 {
		return fail(exitUsage, errors.New("--concurrency and --duration must be positive"))
	}
	if shortened() {
		*dur = min(*dur, shortCalibrate)
		fmt.Fprintln(stderr, shortNote())
	}
	p, err := newProvider(so, stderr)
	if err != nil {
		return fail(exitUsage, err)
	}
	// On a terminal, say what the wait is for; elsewhere a refusal must stay
	// the one line on stderr.
	if isTerminal(stderr) {
		fmt.Fprintf(stderr, "starting the servers (%s backend)…\n", so.Backend)
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
	release, err := runner.Guard(ctx, ep, conns, *conc)
	if err != nil {
		return fail(exitUsage, err)
	}
	defer release()
	fmt.Fprintf(stderr, "calibrating: %d probes of %s at concurrency %d (about %s)\n", calibrate.Probes, *dur, *conc, time.Duration(calibrate.Probes)*(*dur))
	cal, err := calibrate.WithProgress(ctx, ep, conns, *conc, *dur, func(line string) { fmt.Fprintln(stderr, line) })
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

// registerServerFlags adds the flags that choose the servers.
func registerServerFlags(fs *flag.FlagSet, o *servers.Options) {
	fs.StringVar(&o.Backend, "backend", "auto", "servers: auto | docker | local | external")
	fs.Func("mysql-dsn", "external MySQL DSN (or STOCKBENCH_MYSQL_DSN); the database named in it is used; TLS: add ?tls=true. Repeat it, one DSN per node, for a cluster (or STOCKBENCH_MYSQL_DSNS, one per line): Galera, Group Replication, …", func(v string) error {
		o.MySQLDSNs = append(o.MySQLDSNs, v)
		o.MySQLDSN = o.MySQLDSNs[0]
		return nil
	})
	fs.StringVar(&o.RedisAddr, "redis-addr", "", "external Redis host:port, or a Redis Cluster's nodes host:port,host:port,… (or STOCKBENCH_REDIS_ADDR)")
	fs.StringVar(&o.RedisURL, "redis-url", "", "external Redis as redis://[user:pass@]host:port[/db] or rediss:// for TLS (or STOCKBENCH_REDIS_URL); instead of --redis-addr")
	fs.StringVar(&o.MySQLImage, "mysql-image", servers.DefaultMySQLImage, "docker: MySQL image")
	fs.StringVar(&o.RedisImage, "redis-image", servers.DefaultRedisImage, "docker: Redis image")
	fs.IntVar(&o.RedisCluster, "redis-cluster", 0, "local or docker: a Redis Cluster of N masters (no replicas) on 127.0.0.1 instead of one server (0: one server; auto then means local)")
	fs.IntVar(&o.MySQLCluster, "mysql-cluster", 0, "local: a Galera cluster of N MariaDB primaries (1, or 3 or more) instead of one server (0: one server; not on docker: the official mysql image has no Galera)")
	fs.BoolFunc("mysql-spread", "on a MySQL cluster (--mysql-cluster, or several --mysql-dsn): spread the pool's connections over every node (default true; =false pins them to the first)", func(v string) error {
		spread, err := strconv.ParseBool(v)
		o.NoSpread = !spread
		return err
	})
	fs.StringVar(&o.CausalReads, "mysql-causal-reads", servers.CausalAuto, "on a MySQL cluster, how a connection reads what other nodes committed: auto (ask each node) | wsrep (SET SESSION wsrep_sync_wait=1) | group-replication (group_replication_consistency='BEFORE') | none")
}

// cmdDown removes leftover stockbench containers, and the data directories
// of local runs whose process is gone. Without a Docker engine it does the
// latter and says so.
func cmdDown(args []string, stdout io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("down", flag.ContinueOnError)
	if code, done := parseFlags(fs, args, stdout, fail); done {
		return code
	}
	dirs, derr := servers.SweepLocal()
	for _, d := range dirs {
		fmt.Fprintln(stdout, "removed", d)
	}
	if len(dirs) == 0 {
		fmt.Fprintln(stdout, "no leftover temporary directories (stockbench-{mysql,redis,docker,acks,local,outbox-local}-* of runs that are gone)")
	}
	if derr != nil {
		return fail(exitFailed, derr)
	}
	names, kept, err := servers.Down()
	if err != nil {
		if !servers.DockerAvailable() {
			fmt.Fprintln(stdout, "no docker engine: no containers to remove")
			return exitOK
		}
		return fail(exitFailed, err)
	}
	for _, n := range names {
		fmt.Fprintln(stdout, "removed container", n)
	}
	if len(names) == 0 {
		fmt.Fprintln(stdout, "no leftover stockbench containers")
	}
	for _, n := range kept {
		fmt.Fprintln(stdout, "kept container", n, "of a run that still runs")
	}
	return exitOK
}
