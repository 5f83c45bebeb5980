package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/service"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// serveFlags are the flags of `stockbench serve`.
type serveFlags struct {
	servers                          servers.Options
	strategy, listen, stateDir, load string
	allowRemote                      bool
	pool, inflight, queue, batchMax  int
	buckets, casMaxAttempts          int
	casRetry, isolation, degrade     string
	degradeTimeout, soldOutFlag      time.Duration
	opTimeout, sweepPeriod           time.Duration
	outboxPeriod, reconcilePeriod    time.Duration
	batchWait, casMaxWait, drain     time.Duration
	clockOffset                      time.Duration
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	d := strategies.Defaults()
	registerServerFlags(fs, &f.servers)
	fs.StringVar(&f.strategy, "strategy", "", "the strategy this instance serves (one of "+strings.Join(registry.Names(), ", ")+")")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address the API listens on, host:port (port 0: any free port; the ready line names it); a loopback address unless --allow-remote")
	fs.BoolVar(&f.allowRemote, "allow-remote", false, "allow a --listen address that is not loopback (the API has no authentication)")
	fs.StringVar(&f.stateDir, "state-dir", "", "the instance's own directory (outbox-local's message table); a restart on the same directory resumes its backlog. Empty: a temporary directory, removed on exit")
	fs.StringVar(&f.load, "load", "", "SKU=N,…: reset the stores (schema and Redis, under the run lock) and load this stock before serving; without it the stores must hold stockbench's schema (stockbench prepare, or a run's)")
	fs.IntVar(&f.pool, "pool", servers.DefaultPool, "connections in each of the instance's pools (MySQL, Redis)")
	fs.IntVar(&f.inflight, "inflight", 0, "operations in the strategy at once (0: --pool; -1: no bound); beyond it calls wait in --queue, then are answered busy (429)")
	fs.IntVar(&f.queue, "queue", runner.DefaultQueue, "calls that may wait for an in-flight slot; beyond it they are answered busy at once")
	fs.DurationVar(&f.opTimeout, "op-timeout", d.OpTimeout, "timeout of each operation in the strategy")
	fs.DurationVar(&f.drain, "drain-timeout", 30*time.Second, "on SIGTERM or Ctrl-C: how long the calls in flight may finish before they are cut")
	fs.DurationVar(&f.sweepPeriod, "sweep-period", d.SweepPeriod, "expiry sweeper period")
	fs.DurationVar(&f.outboxPeriod, "outbox-period", d.OutboxPeriod, "outbox relay poll period; ensure worker poll period (it is also woken by each log row)")
	fs.DurationVar(&f.reconcilePeriod, "reconcile-period", d.ReconcilePeriod, "outbox reconciler period; ensure retry job period (rows unsynced past --op-timeout)")
	fs.IntVar(&f.batchMax, "batch-max", d.BatchMax, "group commit: most writes to one SKU coalesced into one transaction; 1 turns it off")
	fs.DurationVar(&f.batchWait, "batch-wait", 0, "group commit: how long a batch waits to fill (0: no added wait)")
	fs.StringVar(&f.casRetry, "cas-retry", d.CASRetry, "cas retry policy: backoff | immediate")
	fs.IntVar(&f.casMaxAttempts, "cas-max-attempts", d.CASMaxAttempts, "cas: optimistic attempts of one reserve")
	fs.DurationVar(&f.casMaxWait, "cas-max-wait", 0, "cas backoff: total time budget of one reserve (0: --op-timeout)")
	fs.IntVar(&f.buckets, "buckets", d.Buckets, "buckets strategy: rows each SKU's stock is spread over; lua-split: Redis shards (stock hashes) per SKU")
	fs.StringVar(&f.degrade, "degrade", "", "lua-tcc's degradation switch: mysql moves a SKU's sales to MySQL rows while Redis fails; empty: off")
	fs.DurationVar(&f.degradeTimeout, "degrade-timeout", d.DegradeTimeout, "with --degrade: a Redis call past it counts as a Redis failure")
	fs.DurationVar(&f.soldOutFlag, "soldout-flag", 0, "lua-tcc's in-process sold-out flag: refuse a SKU that answered out of stock without a Redis round trip until stock returns, for at most this long; 0: off")
	fs.StringVar(&f.isolation, "isolation", "", "isolation level of the strategy's MySQL sessions: rc | rr; empty: the server's default (or what the DSN asks)")
	fs.DurationVar(&f.clockOffset, "clock-offset", 0, "offset of this instance's wall clock, e.g. 2s (ahead) or -2s (behind), for every time the service reads: expiry deadlines, TTLs, timestamps, sweeper and reconciler cut-offs (the svc-clock fault); SIGUSR1 re-reads it from STATE-DIR/"+clockFile)
}

// clockFile, in an instance's state directory, holds the clock offset
// (a Go duration) it reads again on SIGUSR1: how svc-clock skews a
// running instance.
const clockFile = "clock-offset"

// watchClock sets the process's clock offset from dir/clockFile on each
// SIGUSR1, until ctx ends; a file it cannot read leaves the offset as it
// was and says why on stderr. It is installed before the instance serves,
// so a signal never finds SIGUSR1's default action (exit).
func watchClock(ctx context.Context, dir string, stderr io.Writer) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				b, err := os.ReadFile(filepath.Join(dir, clockFile))
				if err == nil {
					var d time.Duration
					if d, err = time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
						clock.SetOffset(d)
						continue
					}
				}
				fmt.Fprintf(stderr, "serve: clock offset: %v\n", err)
			}
		}
	}()
}

// check validates the flags and returns the strategy and the stock to load.
func (f *serveFlags) check() (registry.Entry, []inventory.Stock, error) {
	var e registry.Entry
	if f.strategy == "" {
		return e, nil, fmt.Errorf("--strategy is required: one of %s", strings.Join(registry.Names(), ", "))
	}
	e, err := registry.Lookup(f.strategy)
	if err != nil {
		return e, nil, fmt.Errorf("--strategy: %w", err)
	}
	switch {
	case f.pool <= 0:
		return e, nil, errors.New("--pool must be positive")
	case f.inflight < -1 || f.queue < 0:
		return e, nil, errors.New("--inflight must be -1 (none), 0 (--pool) or positive, and --queue not negative")
	case f.opTimeout <= 0 || f.sweepPeriod <= 0 || f.outboxPeriod <= 0 || f.reconcilePeriod <= 0 || f.drain <= 0:
		return e, nil, errors.New("periods, --op-timeout and --drain-timeout must be positive")
	case f.batchMax <= 0 || f.batchWait < 0 || f.buckets <= 0 || f.casMaxAttempts <= 0 || f.casMaxWait < 0:
		return e, nil, errors.New("--batch-max, --buckets and --cas-max-attempts must be positive, --batch-wait and --cas-max-wait not negative")
	case f.casRetry != "backoff" && f.casRetry != "immediate":
		return e, nil, fmt.Errorf("--cas-retry %q: want backoff or immediate", f.casRetry)
	}
	if _, err := servers.ParseIsolation(f.isolation); err != nil {
		return e, nil, fmt.Errorf("--isolation: %w", err)
	}
	if f.degrade != "" && f.degrade != "mysql" || f.degradeTimeout < 0 {
		return e, nil, fmt.Errorf("--degrade %q --degrade-timeout %s: want mysql (or nothing) and a timeout not negative", f.degrade, f.degradeTimeout)
	}
	if f.soldOutFlag < 0 {
		return e, nil, fmt.Errorf("--soldout-flag %s: must not be negative (0: off)", f.soldOutFlag)
	}
	if err := checkListen(f.listen, f.allowRemote); err != nil {
		return e, nil, err
	}
	var stock []inventory.Stock
	if f.load != "" {
		m, err := parseLedger(f.load)
		if err != nil {
			// parseLedger speaks of --ledger; the format is the same.
			return e, nil, fmt.Errorf("--load: %s", strings.TrimPrefix(err.Error(), "--ledger: "))
		}
		for sku, n := range m {
			stock = append(stock, inventory.Stock{SKU: sku, Total: n, Available: n})
		}
		sort.Slice(stock, func(i, j int) bool { return stock[i].SKU < stock[j].SKU })
	}
	return e, stock, nil
}

// checkListen refuses a listen address that is not host:port, or whose
// host is not loopback (an empty host is every interface) unless allowed.
func checkListen(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: want host:port, e.g. 127.0.0.1:8080", addr)
	}
	if allowRemote {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--listen %q: not a loopback address (the API has no authentication); add --allow-remote to serve it anyway", addr)
}

// config is the strategy's configuration from the flags, on conns.
func (f *serveFlags) config(conns servers.Conns, stateDir string) strategies.Config {
	level, _ := servers.ParseIsolation(f.isolation)
	return strategies.Config{DB: conns.DB, Redis: conns.Redis, SweepPeriod: f.sweepPeriod, CASRetry: f.casRetry, Isolation: level,
		CASMaxAttempts: f.casMaxAttempts, CASMaxWait: f.casMaxWait, OutboxPeriod: f.outboxPeriod, ReconcilePeriod: f.reconcilePeriod,
		OpTimeout: f.opTimeout, BatchMax: f.batchMax, BatchWait: f.batchWait, Buckets: f.buckets, LocalDir: stateDir,
		Degrade: f.degrade, DegradeTimeout: f.degradeTimeout, SoldOutFlag: f.soldOutFlag}
}

// cmdServe runs one service instance of one strategy until SIGTERM or
// Ctrl-C, then drains it and exits 0. Its first line on stdout, once it
// serves, is "serving NAME on http://HOST:PORT (state dir DIR)".
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	f.register(fs)
	if code, done := parseFlags(fs, args, stdout, fail); done {
		return code
	}
	e, stock, err := f.check()
	if err != nil {
		return fail(exitUsage, err)
	}
	// The state directory, held by this instance alone for its life.
	stateDir := f.stateDir
	if stateDir == "" {
		if stateDir, err = os.MkdirTemp("", "stockbench-serve-*"); err != nil {
			return fail(exitUsage, fmt.Errorf("--state-dir: %w", err))
		}
		defer os.RemoveAll(stateDir)
	} else if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return fail(exitUsage, fmt.Errorf("--state-dir: %w", err))
	}
	unlock, err := lockStateDir(stateDir, "serve.lock", "serve instance")
	if err != nil {
		return fail(exitUsage, err)
	}
	defer unlock()
	clock.SetOffset(f.clockOffset)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watchClock(wctx, stateDir, stderr)
	// The port before the servers: a busy one is refused at once, with
	// nothing started.
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fail(exitUsage, fmt.Errorf("--listen %s: address already in use", f.listen))
		}
		return fail(exitUsage, fmt.Errorf("--listen %s: %w", f.listen, err))
	}
	defer ln.Close()
	p, err := newProvider(f.servers, stderr)
	if err != nil {
		return fail(exitUsage, err)
	}
	ep, err := p.Start(ctx)
	if err != nil {
		return fail(exitUsage, err)
	}
	defer p.Stop()
	conns, err := servers.Open(ep, f.pool)
	if err != nil {
		return fail(exitUsage, err)
	}
	defer conns.Close()
	if stock != nil {
		if err := loadStores(ctx, ep, conns, f.pool, stock); err != nil {
			return fail(exitUsage, fmt.Errorf("--load: %w", err))
		}
	}
	live, err := service.ReadStock(ctx, conns.DB)
	if err != nil {
		return fail(exitUsage, fmt.Errorf("no stockbench inventory in the stores (give --load SKU=N,… or run stockbench prepare): %w", err))
	}
	sconns := conns
	if f.isolation != "" {
		// The strategy's sessions at the level asked; the reads above
		// and the load keep the server's default.
		level, _ := servers.ParseIsolation(f.isolation)
		sep, err := servers.WithIsolation(ctx, ep, conns.DB, level)
		if err != nil {
			return fail(exitUsage, fmt.Errorf("--isolation: %w", err))
		}
		if sconns, err = servers.Open(sep, f.pool); err != nil {
			return fail(exitUsage, err)
		}
		defer sconns.Close()
	}
	s, err := e.New(f.config(sconns, stateDir))
	if err != nil {
		return fail(exitUsage, fmt.Errorf("%s: %w", e.Name, err))
	}
	// Setup on live stores is a restart: it loads what the strategy keeps
	// beyond the rows and never clobbers live data.
	if err := s.Setup(ctx, live); err != nil {
		_ = s.Close()
		return fail(exitUsage, fmt.Errorf("%s setup: %w", e.Name, err))
	}
	inflight := f.inflight
	switch inflight {
	case 0:
		inflight = f.pool
	case -1:
		inflight = 0
	}
	in := service.Start(s, ln, service.HandlerOptions{OpTimeout: f.opTimeout, Inflight: inflight, Queue: f.queue})
	fmt.Fprintf(stdout, "serving %s on %s (state dir %s)\n", e.Name, in.URL(), stateDir)
	var failed error
	select {
	case <-ctx.Done():
	case failed = <-in.Failed():
	}
	dctx, cancel := context.WithTimeout(context.Background(), f.drain)
	defer cancel()
	serr := in.Shutdown(dctx)
	switch {
	case failed != nil:
		return fail(exitFailed, failed)
	case serr != nil:
		return fail(exitFailed, fmt.Errorf("drain: %w", serr))
	}
	fmt.Fprintf(stdout, "drained %s on %s\n", e.Name, in.URL())
	return exitOK
}

// loadStores resets the schema and Redis and loads stock, under the run
// lock and the foreign-table guard a run takes.
func loadStores(ctx context.Context, ep servers.Endpoints, conns servers.Conns, pool int, stock []inventory.Stock) error {
	release, err := runner.Guard(ctx, ep, conns, pool)
	if err != nil {
		return err
	}
	defer release()
	if err := inventory.ResetMySQL(ctx, conns.DB); err != nil {
		return err
	}
	if err := inventory.ResetRedis(ctx, conns.Redis); err != nil {
		return err
	}
	return inventory.LoadStock(ctx, conns.DB, stock)
}

// lockStateDir takes an exclusive lock on DIR/file, so two processes (who:
// serve instances, generators) never share a state directory; the kernel
// drops it when the process dies, however it dies.
func lockStateDir(dir, file, who string) (unlock func(), err error) {
	path := filepath.Join(dir, file)
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	if err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fh.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("--state-dir %s: in use by another %s", dir, who)
		}
		return nil, fmt.Errorf("--state-dir %s: lock: %w", dir, err)
	}
	_ = fh.Truncate(0)
	fmt.Fprintf(fh, "%d\n", os.Getpid())
	return func() { fh.Close() }, nil
}
