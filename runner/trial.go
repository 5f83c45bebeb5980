package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stockbench/stockbench/faults"
	"github.com/stockbench/stockbench/internal/sysstat"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// liveStockMax is the largest catalog whose available stock the progress
// line sums every second.
const liveStockMax = 10_000

// runStrategy is one run of one strategy on one scenario in this process:
// a chain of steps, each a function taking what it needs and returning
// what it built (paths → built → served → injection → loaded → checked),
// and figures, which puts what they returned into the run. A step that
// fails ends the run; the checks (audits and settle) never fail it: a
// phase that overruns is named in Run.Incomplete and the load figures are
// kept.
func runStrategy(ctx context.Context, st Stores, e registry.Entry, scenario string, o Options, cpu *cpuSampler) (results.Run, error) {
	run := results.Run{Strategy: e.Name, Scenario: scenario, Seed: o.Seed}
	sc, err := scenarios.Lookup(scenario)
	if err != nil {
		return run, err
	}
	var u undo
	defer u.run()
	// The local-fail fault's switch, shared by every instance of the
	// service (strategies.Config.LocalFailing); the injector flips it.
	var localFail localSwitch
	p, err := openPaths(ctx, st, o, u.later)
	if err != nil {
		return run, err
	}
	b, err := setUp(ctx, p, e, sc, o, &localFail, u.later)
	if err != nil {
		return run, err
	}
	sv, err := serve(b, o, u.later)
	if err != nil {
		return run, err
	}
	inj, err := inject(ctx, st.Faulter, p, b, o, &localFail, u.later)
	if err != nil {
		return run, err
	}
	ld, err := load(ctx, loadInputs{st: st, p: p, e: e, sc: sc, o: o, b: b, sv: sv, inj: inj, cpu: cpu, later: u.later})
	if err != nil {
		return run, err
	}
	ck, err := check(p, e, o, b, sv, ld)
	if err != nil {
		return run, err
	}
	return figures(run, e, o, b, sv, ld, ck)
}

// undo is what runs when a run ends, however it ends, in reverse order.
type undo []func()

// later registers f to run when the run ends.
func (u *undo) later(f func()) { *u = append(*u, f) }

func (u *undo) run() {
	for i := len(*u) - 1; i >= 0; i-- {
		(*u)[i]()
	}
}

// paths are the run's ways to the stores: conns reset, load and audit
// them directly; the strategy's pools (sconns, at the endpoints sep) go
// through the fault proxy when the plan has network faults, and open
// sessions at the isolation asked.
type paths struct {
	conns, sconns servers.Conns
	sep           servers.Endpoints
	proxy         *faults.Proxy
}

// openPaths opens the strategy's pools: through a fault proxy in front of
// the servers when the plan has network faults, else the run's own.
func openPaths(ctx context.Context, st Stores, o Options, later func(func())) (paths, error) {
	p := paths{conns: st.Conns, sconns: st.Conns, sep: st.Endpoints}
	level := o.Strategy.Isolation
	if !o.Faults.NeedsProxy() && level == servers.IsolationServer {
		return p, nil
	}
	ep := st.Endpoints
	if o.Faults.NeedsProxy() {
		pep, px, err := faults.Listen(ep)
		if err != nil {
			return p, err
		}
		later(func() { px.Close() })
		ep, p.proxy = pep, px
	}
	// The strategy's sessions at the level asked (--isolation); the
	// auditor's and the probe's keep the server's default.
	ep, err := servers.WithIsolation(ctx, ep, p.conns.DB, level)
	if err != nil {
		return p, err
	}
	pc, err := servers.Open(ep, o.pool())
	if err != nil {
		return p, err
	}
	later(func() { pc.Close() })
	p.sconns, p.sep = pc, ep
	return p, nil
}

// prepare resets the schema and Redis and loads the catalog.
// progress, when given, is told the rows loaded so far.
func prepare(ctx context.Context, conns servers.Conns, stock []inventory.Stock, progress ...func(done int)) error {
	if err := inventory.ResetMySQL(ctx, conns.DB); err != nil {
		return err
	}
	if err := inventory.ResetRedis(ctx, conns.Redis); err != nil {
		return err
	}
	return inventory.LoadStock(ctx, conns.DB, stock, progress...)
}

// built is what setUp returns: the catalog, the strategy set up (the
// client of its service processes with --service process:N), the
// service that owns it, and the figures of the setup.
type built struct {
	stock []inventory.Stock
	strat strategies.Strategy
	svc   *service
	// remote are the service processes the buyers call; nil when the
	// strategy runs in this process.
	remote ServiceGroup
	// heap0 is the live heap before the catalog was built.
	heap0 uint64
	// phases is the setup phase.
	phases []results.Phase
	// skusPerSec and redisPerSKU are the harness figures of the setup
	// (0: not measured).
	skusPerSec, redisPerSKU float64
}

// setUp resets and loads the stores (unless another process did), builds
// the strategy and runs its Setup, as one phase with a rate.
func setUp(ctx context.Context, p paths, e registry.Entry, sc scenarios.Scenario, o Options, localFail *localSwitch,
	later func(func())) (built, error) {
	b := built{heap0: liveHeap(), stock: catalog(sc, o.Params)}
	ps := &phases{w: o.Progress, name: e.Name}
	// Setup's work: the MySQL rows, then the Redis hashes of a Redis strategy.
	work := int64(len(b.stock))
	if e.UsesRedis {
		work *= 2
	}
	ph := ps.start(PhaseSetup, "rows", work)
	if !o.Segment.NoReset {
		if err := prepare(ctx, p.conns, b.stock, func(n int) { ph.set(int64(n), 0) }); err != nil {
			ph.end(true)
			return b, err
		}
	}
	var redis0 int64
	if e.UsesRedis {
		redis0, _ = sysstat.RedisUsedMemory(ctx, p.conns.Redis)
	}
	cfg, err := strategyConfig(p, o, localFail, later)
	if err != nil {
		return b, err
	}
	var s strategies.Strategy
	if o.Service.Remote() {
		// The strategy runs in service processes; s is their client, whose
		// Setup waits until every instance is healthy.
		s, b.remote, err = startRemote(ctx, o, p.sep, e, cfg, later)
	} else {
		s, err = e.New(cfg)
	}
	if err != nil {
		ph.end(true)
		return b, err
	}
	if err := s.Setup(strategies.WithProgress(ctx, func(n int) { ph.add(int64(n)) }), b.stock); err != nil {
		ph.end(true)
		_ = s.Close()
		return b, err
	}
	// From here the service owns the instance (and closes it).
	b.svc, b.strat = newService(e, cfg, b.stock, s), s
	later(func() { b.svc.Close() })
	if sp := ph.end(false); sp.Sec > 0 {
		b.skusPerSec = float64(len(b.stock)) / sp.Sec
	}
	b.phases = ps.list
	if e.UsesRedis && len(b.stock) > 0 {
		if redis1, err := sysstat.RedisUsedMemory(ctx, p.conns.Redis); err == nil && redis0 > 0 {
			b.redisPerSKU = float64(redis1-redis0) / float64(len(b.stock))
		}
	}
	return b, nil
}

// strategyConfig is the strategy's configuration for this run: its pools,
// its own disk, its operation timeout and the local-fail switch.
func strategyConfig(p paths, o Options, localFail *localSwitch, later func(func())) (strategies.Config, error) {
	cfg := o.Strategy
	cfg.DB, cfg.Redis = p.sconns.DB, p.sconns.Redis
	if cfg.LocalDir == "" && o.Segment.StateDir != "" {
		// A generator's own disk, kept when it ends (however it ends): a
		// generator started again on it, or the parent of one that died,
		// relays what is left.
		cfg.LocalDir = filepath.Join(o.Segment.StateDir, StateLocal)
		if err := os.MkdirAll(cfg.LocalDir, 0o755); err != nil {
			return cfg, fmt.Errorf("local dir: %w", err)
		}
	}
	if cfg.LocalDir == "" {
		// The service's own disk (outbox-local's message database): one
		// directory per run, kept across an app crash, removed after.
		dir, err := servers.MkdirTemp("stockbench-local-*")
		if err != nil {
			return cfg, fmt.Errorf("local dir: %w", err)
		}
		later(func() { os.RemoveAll(dir) })
		cfg.LocalDir = dir
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = o.OpTimeout
	}
	if cfg.LocalFailing == nil {
		cfg.LocalFailing = localFail.Load
	}
	return cfg, nil
}

// served is what serve returns: what the buyers call (through the
// ledger), the ack log and the ledger.
type served struct {
	// strat is the strategy, or the service that stands for its process
	// when the plan crashes it.
	strat strategies.Strategy
	acks  *ackLog
	book  *ledger
	// heapPerSKU is what the catalog, the ledger and the strategy's setup
	// hold of the Go heap, per SKU (0: no catalog).
	heapPerSKU float64
}

// serve puts the service in front of the strategy (when the plan crashes
// the app), and the ack log and ledger in front of that.
func serve(b built, o Options, later func(func())) (served, error) {
	sv := served{strat: b.strat}
	if hasAppCrash(o.Faults) {
		sv.strat = b.svc
	}
	var acks *ackLog
	var err error
	if o.Segment.StateDir != "" {
		// Kept through a SIGKILL; a generator on the stores as they are
		// keeps its predecessor's acks (they still grade the stores).
		acks, err = openAckLog(filepath.Join(o.Segment.StateDir, AckFile), o.Segment.NoReset)
	} else {
		acks, err = newAckLog()
	}
	if err != nil {
		return sv, err
	}
	later(func() { acks.Close() })
	sv.acks = acks
	sv.book = newLedger(sv.strat, b.stock, acks, ledgerKeep(o))
	if len(b.stock) > 0 {
		sv.heapPerSKU = float64(int64(liveHeap())-int64(b.heap0)) / float64(len(b.stock))
	}
	return sv, nil
}

// injection is the plan's faults armed: start starts the injector with
// the measured phase (nil: no faults), end undoes what is still on and
// returns the timeline.
type injection struct {
	start func(from time.Time)
	end   func(o Options) []results.FaultEvent
}

// inject arms the plan's faults: the injector starts with the measured
// phase and is undone when load ends.
func inject(ctx context.Context, f servers.Faulter, p paths, b built, o Options, localFail *localSwitch,
	later func(func())) (injection, error) {
	injCtx, stop := context.WithCancel(ctx)
	later(stop)
	none := injection{end: func(Options) []results.FaultEvent { return nil }}
	if len(o.Faults) == 0 {
		return none, nil
	}
	in := &faults.Injector{Plan: o.Faults, Faulter: f, Proxy: p.proxy,
		OnAppCrash:  func(ctx context.Context, f faults.Fault) error { return b.svc.crash(ctx) },
		OnLocalFail: func(_ context.Context, on bool) error { localFail.Store(on); return nil }}
	if b.remote != nil {
		in.Services = b.remote
	}
	if err := in.Check(); err != nil {
		return none, err
	}
	var events []faults.Event
	var injErr error
	done := make(chan struct{})
	return injection{
		start: func(from time.Time) {
			go func() {
				defer close(done)
				events, injErr = in.Run(injCtx, from)
			}()
		},
		end: func(o Options) []results.FaultEvent {
			// Load is over: whatever fault is still on is undone now (a
			// restart is seen through), so settle and audit find the
			// servers up.
			stop()
			<-done
			if injErr != nil {
				o.logf("  faults: %v", injErr)
			}
			return localFail.exercised(timeline(events))
		},
	}, nil
}
