package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/faults"
	"github.com/stockbench/stockbench/reports"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/servers/netpath"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// runFlags are the flags of `stockbench run`.
type runFlags struct {
	servers                                       servers.Options
	strategies, scenario, payDelay, casRetry, out string
	arrival                                       string
	inflight, queue, clientRetry                  int
	retryBackoff                                  string
	skew, mix, file, weights, preset              string
	rtt, isolation, cpus, cpuset                  string
	degrade                                       string
	degradeTimeout, soldOutFlag                   time.Duration
	// service is --service: in-process, process or process:N.
	service                                       string
	stock                                         int64
	buyers, skus, repeat, pool, batchMax, buckets int
	abandon, rate                                 float64
	limitPerBuyer                                 int64
	repeatBuyers                                  float64
	repeatTries                                   int
	ttl, shortTTL, outboxPeriod, reconcilePeriod  time.Duration
	sweepPeriod, opTimeout, duration, warmup      time.Duration
	settleTimeout, auditTimeout                   time.Duration
	calibrate, batchWait, casMaxWait              time.Duration
	seed                                          uint64
	quiet, noRestock                              bool
	// latest: out is a new run directory under reportsRoot, which
	// reports/latest is pointed at once the report is written.
	latest bool
	// faults are the --fault specs, in the order given.
	faults []string
	// sh splits the run over generator processes (run only).
	sh shardFlags
	// obs watches the run live: thresholds, the metrics endpoint.
	obs observeFlags
	// post, when set, completes the results before they are written, and
	// after prints more below the table (stockbench curve).
	post  func(*results.Results)
	after func(io.Writer, *results.Results)
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.file, "f", "", "scenario file (YAML) whose keys mirror these flags; flags on the command line win")
	fs.StringVar(&f.preset, "preset", "", "named set of flags, filling only flags not set otherwise: article (the article's experiment, reported beside its published figures)")
	registerServerFlags(fs, &f.servers)
	fs.StringVar(&f.servers.RedisPersistence, "redis-persistence", servers.PersistenceNone, "AOF of the Redis stockbench starts, what a Redis restart keeps: none | everysec | always")
	fs.Func("fault", "inject a fault, repeatable (or comma-separated): redis-pause@5s+3s, redis-restart@5s, redis-lose@5s+2s, mysql-restart@8s, mysql-pause@5s+3s, latency:redis=20ms±10ms@4s+6s, reset:mysql@6s, partition:redis@5s+2s, app-crash@6s, svc-kill@6s+1s:0, svc-pause@6s+2s:0, svc-clock@6s:0=+2s (with --service process:N); times from the start of the measured phase", func(v string) error {
		for _, spec := range strings.Split(v, ",") {
			if spec = strings.TrimSpace(spec); spec != "" {
				f.faults = append(f.faults, spec)
			}
		}
		return nil
	})
	fs.StringVar(&f.rtt, "rtt", "", "network between the service and its stores (local or docker backend; empty: loopback): a profile ("+strings.Join(netpath.ProfileNames(), ", ")+"), an RTT with optional jitter (0.5ms, 1ms±0.1ms or 1ms+-0.1ms), or per store (mysql=1ms,redis=0.2ms); see docs/network.md")
	fs.StringVar(&f.service, "service", "in-process", "where each strategy runs: in-process (the default, fastest) | process[:N] (N `stockbench serve` children of this binary on the run's stores, called over the order API round robin; the acks stay here; docs/api.md)")
	fs.StringVar(&f.cpus, "cpus", "", "CPU quota per tier in cores: mysql=1,redis=0.5,harness=0.5 — cgroups on the local backend, the containers' quota on docker, the harness a cgroup on both (empty: the tiers share the machine; docs/cost.md)")
	fs.StringVar(&f.cpuset, "cpuset", "", "cores each tier is pinned to: mysql=0,redis=1,harness=1 (a list inside a tier with ; as 0;2 or a range 0-1) — cgroups on the local backend, the containers' cpuset on docker")
	fs.IntVar(&f.pool, "pool", servers.DefaultPool, "connections in each of the harness's pools (MySQL, Redis); buyers beyond it wait for one")
	fs.StringVar(&f.strategies, "strategies", "all", "comma-separated strategies, or all: "+strings.Join(registry.Names(), ","))
	fs.StringVar(&f.scenario, "scenario", "flash", "comma-separated scenarios, run in order: "+strings.Join(scenarios.Names(), ", "))
	fs.Int64Var(&f.stock, "stock", 100, "units of the SKU on sale (sustained: of each SKU, and the restock quantity)")
	fs.IntVar(&f.buyers, "buyers", 120, "buyers (flash, race: released together; sustained: closed-loop workers, or the concurrency bound with --rate)")
	fs.StringVar(&f.payDelay, "pay-delay", "200ms-500ms", "think time between reserve and confirm: a value or min-max (sustained default: 0)")
	fs.StringVar(&f.arrival, "arrival", "0-50ms", "when buyers arrive: a range (each a uniform draw from it; 0: all at once), poisson:RATE, stages:DUR@RATE,… (k6 ramping arrival rate), spike:RATE@T0[+SPREAD] (background then all at T0), csv:FILE (second,rate replay); a rate curve drives sustained open loop")
	fs.IntVar(&f.inflight, "inflight", 0, "service model: calls in each strategy instance at once (0: --pool; -1: no service model)")
	fs.IntVar(&f.clientRetry, "client-retry", 3, "client retries of a call shed as busy, timed out or of unknown outcome, with the same order id (0: none)")
	fs.StringVar(&f.retryBackoff, "retry-backoff", "100ms-300ms", "wait before a client retry: a draw from this range, doubled at each retry")
	fs.IntVar(&f.queue, "queue", runner.DefaultQueue, "service model: new requests (reserves) that may wait for a slot; beyond it they are shed at once as busy")
	fs.Float64Var(&f.abandon, "abandon", 0, "flash: fraction of buyers who never pay; their reservation expires after --ttl")
	fs.Int64Var(&f.limitPerBuyer, "limit-per-buyer", 0, "flash: units one buyer may hold (reserved or confirmed) of the SKU, enforced by each strategy in its own store; 0: no limit")
	fs.Float64Var(&f.repeatBuyers, "repeat-buyers", 0, "flash: share of buyers who try --repeat-tries times (double clicks, bots), each try a journey with its own order id, arriving one after the other; --buyers counts tries")
	fs.IntVar(&f.repeatTries, "repeat-tries", 2, "flash: how many times a repeat buyer tries (at least 2)")
	fs.DurationVar(&f.ttl, "ttl", 30*time.Second, "reservation time to live")
	fs.DurationVar(&f.shortTTL, "short-ttl", 300*time.Millisecond, "race: reservation lifetime of the pay-after-expiry buyers")
	fs.DurationVar(&f.duration, "duration", 30*time.Second, "sustained: measured phase")
	fs.DurationVar(&f.warmup, "warmup", 5*time.Second, "sustained: warm-up before the measured phase, excluded from counts and clocks")
	fs.IntVar(&f.skus, "skus", 1, "sustained: SKUs in the catalog")
	fs.StringVar(&f.skew, "skew", "uniform", "sustained: how buyers pick SKUs: uniform | zipf:S | hot:K")
	fs.StringVar(&f.mix, "mix", "confirm=0.9,cancel=0.1,abandon=0", "sustained: shares of buyers who confirm, cancel, refund (pay, then get their money back), abandon")
	fs.BoolVar(&f.noRestock, "no-restock", false, "sustained: let SKUs sell out instead of restocking them")
	fs.Float64Var(&f.rate, "rate", 0, "sustained: open loop at this many arrivals per second (0: closed loop)")
	fs.IntVar(&f.repeat, "repeat", 1, "run each strategy N times and report min / median / max")
	fs.DurationVar(&f.calibrate, "calibrate", 2*time.Second, "duration of each store calibration probe (0: skip calibration)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of every random choice")
	fs.StringVar(&f.out, "out", "", "directory for the report (results.json, summary.md, charts, index.html); default: a new reports/RUN-ID for each run, with reports/latest pointing at the newest")
	fs.StringVar(&f.casRetry, "cas-retry", strategies.Defaults().CASRetry, "cas retry policy: backoff | immediate")
	fs.DurationVar(&f.casMaxWait, "cas-max-wait", 0, "cas backoff: total time budget of one reserve (0: --op-timeout); past it the reserve gives up as a conflict")
	fs.DurationVar(&f.outboxPeriod, "outbox-period", strategies.Defaults().OutboxPeriod, "outbox relay poll period; ensure worker poll period (it is also woken by each log row)")
	fs.DurationVar(&f.reconcilePeriod, "reconcile-period", strategies.Defaults().ReconcilePeriod, "outbox reconciler period; ensure retry job period (rows unsynced past --op-timeout)")
	fs.IntVar(&f.batchMax, "batch-max", strategies.Defaults().BatchMax, "group commit: most writes to one SKU coalesced into one transaction (batched, lua-tcc confirm, outbox writes); 1 turns it off")
	fs.DurationVar(&f.batchWait, "batch-wait", 0, "group commit: how long a batch waits to fill before it runs (0: no added wait)")
	fs.IntVar(&f.buckets, "buckets", strategies.Defaults().Buckets, "buckets strategy: rows each SKU's stock is spread over; lua-split: Redis shards (stock hashes) per SKU")
	fs.StringVar(&f.degrade, "degrade", "", "lua-tcc's degradation switch: mysql moves a SKU's sales to MySQL rows while Redis fails and back once Redis is rebuilt (docs/faults.md); empty: off")
	fs.DurationVar(&f.degradeTimeout, "degrade-timeout", strategies.Defaults().DegradeTimeout, "with --degrade: a Redis call past it counts as a Redis failure")
	fs.DurationVar(&f.soldOutFlag, "soldout-flag", 0, "lua-tcc's in-process sold-out flag: a SKU that answered out of stock is refused without a Redis round trip until stock returns, for at most this long (docs/lua-tcc-soldout.md); 0: off")
	fs.StringVar(&f.isolation, "isolation", "", "isolation level of the MySQL strategies' sessions: rc (READ COMMITTED) | rr (REPEATABLE READ); empty: the server's default. A strategy that chose a level for a transaction keeps it")
	fs.DurationVar(&f.sweepPeriod, "sweep-period", strategies.Defaults().SweepPeriod, "expiry sweeper period")
	fs.DurationVar(&f.opTimeout, "op-timeout", strategies.Defaults().OpTimeout, "timeout of each operation")
	fs.DurationVar(&f.settleTimeout, "settle-timeout", 0, "deadline of the strategy's settle after the load (0: 2m + 1m per 100,000 SKUs + 1ms per pending item); past it the run is written, marked incomplete, exit 3")
	fs.DurationVar(&f.auditTimeout, "audit-timeout", 0, "deadline of each audit of a run (0: 1m + 1m per 100,000 SKUs + 200µs per ack); past it the run is written, marked incomplete, exit 3")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress on stderr")
	fs.StringVar(&f.weights, "weights", analysis.DefaultWeights.String(), "weights of the recommendation: consistency=…,throughput=…,latency=…,complexity=…")
	f.obs.register(fs)
}

// options resolves the flags into runner options and validates them,
// returning every problem at once (errors.Join: the CLI prints each on its
// own line). explicit holds the flags that were set (on the command line
// or in a file).
func (f *runFlags) options(explicit map[string]bool) (runner.Options, error) {
	var errs []error
	// parse records a flag's parse error, prefixed with the flag.
	parse := func(flag string, err error) bool {
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", flag, err))
		}
		return err == nil
	}
	entries, err := registry.Parse(f.strategies)
	if err != nil {
		errs = append(errs, err)
	}
	var scens []string
	for _, sc := range scenarios.SplitList(f.scenario) {
		switch {
		case !slices.Contains(scenarios.Names(), sc):
			errs = append(errs, fmt.Errorf("--scenario %q: want one or more of %s", sc, strings.Join(scenarios.Names(), ", ")))
		case slices.Contains(scens, sc):
			errs = append(errs, fmt.Errorf("--scenario %q named twice", sc))
		default:
			scens = append(scens, sc)
		}
	}
	pay, err := scenarios.ParseRange(f.payDelay)
	parse("pay-delay", err)
	arrival, err := scenarios.ParseProfile(f.arrival)
	parse("arrival", err)
	backoff, err := scenarios.ParseRange(f.retryBackoff)
	parse("retry-backoff", err)
	// The sustained scenario measures throughput: no think time unless asked.
	sustainedPay := scenarios.Range{}
	if explicit["pay-delay"] {
		sustainedPay = pay
	}
	skew, err := scenarios.ParseSkew(f.skew)
	parse("skew", err)
	mix, err := scenarios.ParseMix(f.mix)
	parse("mix", err)
	weights, err := analysis.ParseWeights(f.weights)
	parse("weights", err)
	network, err := netpath.Parse(f.rtt)
	parse("rtt", err)
	isolation, err := servers.ParseIsolation(f.isolation)
	parse("isolation", err)
	var budget runner.CPUBudget
	budget.Cores, err = runner.ParseCPUs(f.cpus)
	parse("cpus", err)
	budget.Set, err = runner.ParseCPUSet(f.cpuset)
	parse("cpuset", err)
	plan, err := faults.ParsePlan(f.faults)
	if parse("fault", err) {
		parse("fault", plan.For(f.servers.Backend))
	}
	o := runner.Options{
		Strategies: entries, Scenarios: scens, Params: scenarios.Params{Stock: f.stock, Buyers: f.buyers, Rate: f.rate, PayDelay: pay,
			Arrival: arrival, SustainedPayDelay: sustainedPay, Abandon: f.abandon, TTL: f.ttl, ShortTTL: f.shortTTL, Seed: f.seed,
			Duration: f.duration, Warmup: f.warmup, SKUs: f.skus, Skew: skew, Mix: mix, NoRestock: f.noRestock,
			LimitPerBuyer: f.limitPerBuyer, RepeatBuyers: f.repeatBuyers, RepeatTries: f.repeatTries}, Repeat: f.repeat, CalibrateDuration: f.calibrate,
		Pool: f.pool, Inflight: f.inflight, Queue: f.queue, ClientRetry: f.clientRetry, RetryBackoff: backoff, OpTimeout: f.opTimeout, SettleTimeout: f.settleTimeout, AuditTimeout: f.auditTimeout, Weights: weights.String(), Faults: plan, Network: network, CPUBudget: budget,
		Strategy: strategies.Config{CASRetry: f.casRetry, OutboxPeriod: f.outboxPeriod,
			ReconcilePeriod: f.reconcilePeriod, SweepPeriod: f.sweepPeriod, BatchMax: f.batchMax, BatchWait: f.batchWait,
			CASMaxWait: f.casMaxWait, Buckets: f.buckets, Isolation: isolation, Degrade: f.degrade, DegradeTimeout: f.degradeTimeout,
			SoldOutFlag: f.soldOutFlag},
	}
	svc, err := parseService(f.service)
	if parse("service", err) {
		if svc.Remote() && f.servers.Backend == "docker" {
			// On the docker backend the instances are containers too.
			if svc.Start, err = serviceContainers(); err != nil {
				errs = append(errs, fmt.Errorf("--service %s --backend docker: %w", f.service, err))
			}
		}
		o.Service = svc
	}
	if len(scens) > 0 {
		errs = append(errs, o.Validate()...)
	}
	errs = append(errs, f.obs.apply(&o, f.sh.procs > 1 || f.sh.shard != "")...)
	if err := f.sh.check(f); err != nil {
		errs = append(errs, err)
	}
	if f.sh.stateDir != "" && (len(entries) != 1 || len(scens) != 1 || f.repeat != 1) {
		errs = append(errs, errors.New("--state-dir: one strategy, one scenario, --repeat 1 (it holds one generator's run)"))
	}
	if (f.sh.procs > 1 || f.sh.shard != "") && o.Service.Remote() {
		errs = append(errs, errors.New("--service process: not with several generators (--procs, --shard) yet"))
	}
	if (f.sh.procs > 1 || f.sh.shard != "") && !budget.Empty() {
		errs = append(errs, errors.New("--cpus/--cpuset: not with several generators (--procs, --shard) yet: each is its own process, outside the harness's budget"))
	}
	if f.sh.procs > 1 && len(f.servers.MySQLDSNs) > 1 {
		errs = append(errs, errors.New("--procs: not on a MySQL cluster yet (several --mysql-dsn)"))
	}
	// A shard runs one scenario of its parent's flags, which were checked
	// against the parent's whole list.
	if knob, owner := scenarios.Misplaced(scens, func(k string) bool { return explicit[knobFlags[k]] }); knob != "" && f.sh.shard == "" {
		errs = append(errs, fmt.Errorf("--%s applies to the %s scenario only", knobFlags[knob], owner))
	}
	if timedOnly(scens) && f.duration > 0 {
		for _, ft := range plan {
			if ft.End() >= f.duration {
				errs = append(errs, fmt.Errorf("--fault %s: ends at %s, not inside the measured phase (--duration %s)", ft, ft.End(), f.duration))
			}
		}
	}
	if len(errs) > 0 {
		return o, problems(errs)
	}
	return o, nil
}

// problems are every problem a validation found, each naming its flag;
// the CLI prints each on its own line.
type problems []error

func (ps problems) Error() string { return errors.Join(ps...).Error() }

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	f.sh.register(fs)
	if code, done := parseFlags(fs, args, stdout, fail); done {
		return code
	}
	o, err := f.resolve(fs)
	if err != nil {
		return fail(exitUsage, err)
	}
	f.sh.apply(&o, args, f.out)
	unlock, err := f.sh.lockState()
	if err != nil {
		return fail(exitUsage, err)
	}
	defer unlock()
	return f.execute(ctx, []runner.Plan{{Options: o}}, nil, stdout, stderr, fail)
}

// resolve applies the scenario file, then validates and resolves the flags.
func (f *runFlags) resolve(fs *flag.FlagSet) (runner.Options, error) {
	if f.file != "" {
		if err := applyFile(fs, f.file); err != nil {
			return runner.Options{}, err
		}
	}
	if f.preset != "" {
		if err := applyPreset(fs, f.preset); err != nil {
			return runner.Options{}, err
		}
	}
	explicit := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { explicit[fl.Name] = true })
	if f.out == "" {
		// Each run its own directory: two runs never overwrite each other,
		// and reports/latest follows the newest.
		f.out, f.latest = newRunDir(reportsRoot), true
	}
	f.shorten()
	return f.options(explicit)
}

// execute runs the plans on the chosen servers and writes every output.
func (f *runFlags) execute(ctx context.Context, plans []runner.Plan, sweep *results.Sweep, stdout, stderr io.Writer, fail func(int, error) int) int {
	for i := range plans {
		if !f.quiet {
			plans[i].Log = stderr
			if isTerminal(stderr) {
				plans[i].Progress = stderr
			}
		}
	}
	if shortened() {
		fmt.Fprintln(stderr, shortNote())
	}
	// Refuse an output that cannot be written before any server starts:
	// finding out after the run would lose its results.
	if err := checkOut(f.out); err != nil {
		return fail(exitUsage, err)
	}
	so := f.servers
	if f.sh.shard == "" {
		// The servers start behind the first plan's profile; a sweep over
		// rtt changes it between plans. A shard's servers are its
		// parent's, behind the parent's path already.
		for _, pl := range plans {
			if pl.Network.Set {
				so.Network = pl.Network
				break
			}
		}
	}
	gen := ""
	if f.sh.of > 1 {
		gen = strconv.Itoa(f.sh.index)
	}
	closeObs, err := f.obs.listen(plans, gen, f.out)
	if err != nil {
		return fail(exitUsage, err)
	}
	defer closeObs()
	p, err := newProvider(so, stderr)
	if err != nil {
		return fail(exitUsage, err)
	}
	res, err := runner.Execute(ctx, p, plans...)
	if res == nil {
		if ctx.Err() != nil {
			return fail(exitInterrupted, errors.New("interrupted before any measurement"))
		}
		return fail(exitUsage, err)
	}
	res.Sweep = sweep
	if f.preset != "" {
		// Reports of a preset run (also when re-rendered) know what it
		// reproduces.
		res.Config.Preset = f.preset
	}
	if f.post != nil {
		f.post(res)
	}
	if f.sh.of > 1 {
		// A generator's file is merged by its parent (or stockbench merge):
		// no rendering, no table.
		if c := os.Getenv(generatorContainerEnv); c != "" {
			for _, run := range res.Runs {
				if run.Shard != nil {
					run.Shard.Container = c
				}
			}
		}
		if werr := results.WriteJSON(f.out, res); werr != nil {
			return fail(exitFailed, werr)
		}
		f.sh.written(res)
		switch {
		case err != nil:
			return fail(exitFailed, err)
		case incomplete(res) != "":
			return fail(exitIncomplete, errors.New(incomplete(res)))
		case res.Interrupted:
			return fail(exitInterrupted, errors.New("interrupted"))
		}
		return exitOK
	}
	a := analysis.Analyze(res)
	if werr := reports.WriteAll(f.out, a); werr != nil {
		return fail(exitFailed, werr)
	}
	if f.latest {
		if note := linkLatest(reportsRoot, f.out); note != "" {
			fmt.Fprintln(stderr, "stockbench: "+note)
		}
	}
	reports.Table(stdout, a)
	if f.after != nil {
		f.after(stdout, res)
	}
	fmt.Fprintf(stdout, "\nreport: %s and %s\n", filepath.Join(f.out, "summary.md"), filepath.Join(f.out, "index.html"))
	switch {
	case err != nil:
		return fail(exitFailed, err)
	case incomplete(res) != "":
		return fail(exitIncomplete, fmt.Errorf("%s; load figures written to %s", incomplete(res), f.out))
	case res.Interrupted:
		return fail(exitInterrupted, fmt.Errorf("interrupted: %s; written to %s", measuredOf(res, plans), f.out))
	case verdict(res) != nil:
		return fail(exitFailed, fmt.Errorf("%w; written to %s", verdict(res), f.out))
	}
	return exitOK
}

// incomplete says which phase of which run did not finish (the first
// such run), or "" when every run finished every phase.
func incomplete(res *results.Results) string {
	for _, r := range res.Runs {
		if r.Incomplete == results.IncompleteGeneratorLost {
			var who []string
			for _, l := range r.Lost {
				who = append(who, fmt.Sprintf("%d/%d", l.Index, l.Of))
			}
			return fmt.Sprintf("%s on %s: unproven: generator %s died before its report (its state drained and audited; see errors in results.json)",
				r.Strategy, r.Scenario, strings.Join(who, ", "))
		}
		if r.Incomplete != "" {
			return fmt.Sprintf("%s on %s: the %s phase did not finish", r.Strategy, r.Scenario, r.Incomplete)
		}
	}
	return ""
}

// measuredOf says how much of an interrupted run was measured: the runs
// finished out of those planned, and how far the cut one got.
func measuredOf(res *results.Results, plans []runner.Plan) string {
	planned := 0
	for _, pl := range plans {
		planned += len(pl.Scenarios) * len(pl.Strategies) * max(1, pl.Repeat)
	}
	finished := len(res.Runs)
	cut := ""
	if n := len(res.Runs); n > 0 && res.Runs[n-1].Interrupted {
		last := res.Runs[n-1]
		finished--
		cut = fmt.Sprintf("; %s on %s cut after %.1f s of its measured phase", last.Strategy, last.Scenario, last.DurationSec)
		if scenarios.IsTimed(last.Scenario) && len(plans) > 0 {
			cut += fmt.Sprintf(" (of %s planned)", plans[0].Duration)
		}
		cut += ", settled and audited"
	}
	return fmt.Sprintf("%d of %d planned run(s) finished%s", finished, planned, cut)
}

// timedOnly reports whether every scenario named is timed (the measured
// phase then lasts --duration).
func timedOnly(scens []string) bool {
	for _, sc := range scens {
		if !scenarios.IsTimed(sc) {
			return false
		}
	}
	return len(scens) > 0
}

// notSweepable are run flags that choose where and how to run, not what.
var notSweepable = map[string]bool{"f": true, "out": true, "backend": true, "mysql-dsn": true, "redis-addr": true, "redis-url": true, "redis-cluster": true, "mysql-cluster": true, "mysql-spread": true, "mysql-causal-reads": true,
	"mysql-image": true, "redis-image": true, "redis-persistence": true,
	"quiet": true, "repeat": true, "preset": true, "weights": true, "scenario": true, "strategies": true, "calibrate": true}

// cmdSweep runs the same scenario once per value of one parameter, all in
// one results.json with sweep charts.
func cmdSweep(ctx context.Context, args []string, stdout, stderr io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	param := fs.String("param", "", "the swept run flag and its values: NAME=V1,V2,… (e.g. buyers=50,100,200,400); instances=0,1,2,4 sweeps the service tier: 0 in process, N ≥ 1 as --service process:N")
	if code, done := parseFlags(fs, args, stdout, fail); done {
		return code
	}
	name, list, ok := strings.Cut(*param, "=")
	if !ok || name == "" || list == "" {
		return fail(exitUsage, errors.New("--param NAME=V1,V2,… is required, e.g. --param buyers=50,100,200,400"))
	}
	// instances=N is --service: in-process for 0, process:N above.
	flagName := name
	if name == "instances" {
		flagName = "service"
	}
	if fs.Lookup(flagName) == nil || notSweepable[name] || name == "param" {
		return fail(exitUsage, fmt.Errorf("--param: %q is not a sweepable run flag", name))
	}
	var values []string
	for _, v := range strings.Split(list, ",") {
		if v = strings.TrimSpace(v); v != "" {
			values = append(values, v)
		}
	}
	values = shortenValues(values)
	var plans []runner.Plan
	ax := newAxis()
	for _, v := range values {
		if name == results.ParamFault {
			// --fault adds to a list: each value of the sweep is its own plan.
			f.faults = nil
		}
		fv := v
		if name == "instances" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fail(exitUsage, fmt.Errorf("--param instances=%s: want a count of service processes, 0 for in process", v))
			}
			fv = "in-process"
			if n > 0 {
				fv = fmt.Sprintf("process:%d", n)
			}
		}
		if err := fs.Set(flagName, fv); err != nil {
			return fail(exitUsage, fmt.Errorf("--param %s=%s: %w", name, v, err))
		}
		o, err := f.resolve(fs)
		if err != nil {
			return fail(exitUsage, fmt.Errorf("--param %s=%s: %w", name, v, err))
		}
		ax.add(fs.Lookup(flagName), o)
		plans = append(plans, runner.Plan{Options: o, Param: name, Value: v})
	}
	return f.execute(ctx, plans, ax.record(&results.Sweep{Param: name, Values: values}), stdout, stderr, fail)
}
