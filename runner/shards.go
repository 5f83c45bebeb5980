package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/observe"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/strategies/registry"
)

// Generator is one shard of a run for Spawn to start.
type Generator struct {
	// Endpoints are the parent's servers.
	Endpoints          servers.Endpoints
	Strategy, Scenario string
	// Repeat is the index (from 1) of the run among --repeat runs.
	Repeat int
	// Shard (from 0) of Of generators.
	Shard, Of int
	// Barrier is the Redis key the generators meet at (Segment.StartBarrier).
	Barrier string
	// Metrics, when set, is the parent's endpoint (--metrics-addr), which
	// re-exposes the generator's own (observe.Exporter.Follow).
	Metrics *observe.Exporter
}

// Spawn runs one generator (a process of its own, usually) to its end and
// returns its results: one run of g.Strategy on g.Scenario, with its
// histograms, acks and restocks. When ctx ends the generator should be
// stopped as a Ctrl-C stops a run (what it measured is still returned).
type Spawn func(ctx context.Context, g Generator) (*results.Results, error)

// prepareShards is what the parent of several generators does before it
// starts them, for one scenario: reset the stores and load the scenario's
// catalog into MySQL. Each generator's strategy Setup then loads what it
// keeps in Redis (never overwriting live stock). It returns the catalog.
func prepareShards(ctx context.Context, conns servers.Conns, scenario string, p scenarios.Params) ([]inventory.Stock, error) {
	sc, err := scenarios.Lookup(scenario)
	if err != nil {
		return nil, err
	}
	stock := catalog(sc, p)
	return stock, prepare(ctx, conns, stock)
}

// Prepare is that step alone, for generators started by someone else
// (stockbench prepare, then N run --shard I/N --no-reset): it starts the
// servers through p (external ones, usually), guards them as Execute does
// (run lock, foreign tables, pool), prepares them for o's one scenario and
// releases the lock. It returns the catalog loaded.
func Prepare(ctx context.Context, p servers.Provider, o Options) ([]inventory.Stock, error) {
	if len(o.Scenarios) != 1 {
		return nil, fmt.Errorf("prepare: one scenario, not %d", len(o.Scenarios))
	}
	ep, err := p.Start(ctx)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	conns, err := servers.Open(ep, o.pool())
	if err != nil {
		return nil, err
	}
	defer conns.Close()
	release, err := Guard(ctx, ep, conns, o.pool())
	if err != nil {
		return nil, err
	}
	defer release()
	return prepareShards(ctx, conns, o.Scenarios[0], o.Params)
}

// barrierTTL bounds how long a start barrier's keys outlive their run.
const barrierTTL = 10 * time.Minute

// meet waits at the start barrier key until n generators have arrived: each
// counts itself in; the last one releases everyone (n tokens on a list each
// takes one of). Blocking pops wake on the release, not on a clock.
func meet(ctx context.Context, rdb redis.UniversalClient, key string, n int) error {
	in, gate := "{"+key+"}:in", "{"+key+"}:go"
	c, err := rdb.Incr(ctx, in).Result()
	if err != nil {
		return fmt.Errorf("start barrier: %w", err)
	}
	rdb.Expire(ctx, in, barrierTTL)
	if c == int64(n) {
		tokens := make([]any, n)
		for i := range tokens {
			tokens[i] = "1"
		}
		if err := rdb.RPush(ctx, gate, tokens...).Err(); err != nil {
			return fmt.Errorf("start barrier: %w", err)
		}
		rdb.Expire(ctx, gate, barrierTTL)
	}
	for {
		// A bounded block, so that ctx is seen even if the server does not
		// cut the call.
		err := rdb.BLPop(ctx, time.Second, gate).Err()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, redis.Nil) && ctx.Err() == nil:
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			return fmt.Errorf("start barrier: %w", err)
		}
	}
}

// barrierSeq makes barrier keys unique within a process.
var barrierSeq struct {
	sync.Mutex
	n int
}

func barrierKey(e registry.Entry, sc string) string {
	barrierSeq.Lock()
	barrierSeq.n++
	n := barrierSeq.n
	barrierSeq.Unlock()
	return "stockbench:barrier:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":" + strconv.Itoa(n) + ":" + e.Name + ":" + sc
}

// runShards runs one strategy on one scenario as o.Procs generators:
// it prepares the stores once, starts the generators through o.Spawn
// (each sets up its own strategy instance, with its background loops, and
// they start together at a barrier), merges what they measured and
// audits the stores once, after all of them settled, against the ledger
// of the stock put in (the catalog plus every generator's restocks) and
// every generator's acks.
func runShards(ctx context.Context, st Stores, e registry.Entry, scenario string, o Options, rep int) (results.Run, error) {
	run := results.Run{Strategy: e.Name, Scenario: scenario, Seed: o.Seed}
	if o.Spawn == nil {
		return run, errors.New("several generators need a way to start them")
	}
	conns := st.Conns
	stock, err := prepareShards(ctx, conns, scenario, o.Params)
	if err != nil {
		return run, err
	}
	runs, err := spawnShards(ctx, st, e, scenario, o, rep)
	if err != nil {
		return run, err
	}
	merged, err := results.MergeRuns(runs)
	if err != nil {
		return run, err
	}
	// A generator whose settle did not finish makes the merged run
	// incomplete; the audit still runs (it grades what the stores hold).
	for _, r := range runs {
		if r.Incomplete != "" && merged.Incomplete == "" {
			merged.Incomplete = r.Incomplete
		}
	}
	// Stale: past its deadline before the last generator began to settle,
	// as a single run's audit counts from the start of its settle. Every
	// load had ended by then, and that generator's settle passes over every
	// SKU, so it releases whatever had lapsed; one that lapsed earlier and
	// is still held was missed by every settle. (No generator recorded it:
	// the time of this audit.)
	var staleBefore time.Time
	for _, r := range runs {
		if r.Shard != nil && r.Shard.SettleFrom.After(staleBefore) {
			staleBefore = r.Shard.SettleFrom
		}
	}
	if staleBefore.IsZero() {
		staleBefore = time.Now()
	}
	auditor := audit.Auditor{DB: conns.DB, Ledger: map[string]int64{}, StaleBefore: staleBefore, LimitPerBuyer: o.Params.LimitPerBuyer}
	if e.UsesRedis {
		auditor.Redis, auditor.RedisReservations = conns.Redis, e.RedisReservations
	}
	for _, s := range stock {
		auditor.Ledger[s.SKU] += s.Total
	}
	var acks []inventory.Ack
	for _, r := range runs {
		acks = append(acks, r.ShardAcks...)
	}
	// One audit of the stores, after every generator settled; one that
	// overruns its deadline leaves the merged load figures standing.
	_, auditTO := o.deadlines(len(stock), int64(len(acks)), 0)
	ps := &phases{w: o.Progress, name: e.Name}
	settled, err := auditWithin(ps, PhaseAudit, auditor, audit.AckSlice(acks), auditTO, func(ctx context.Context, a *audit.Audit) error {
		return checkNodes(ctx, conns, a)
	})
	merged.Phases = append(merged.Phases, ps.list...)
	if err != nil {
		merged.Incomplete = PhaseAudit
		merged.Errors = append(merged.Errors, err.Error())
	} else {
		merged.Audit = settled
	}
	merged.AuditEndOfLoad, merged.SettleRepaired = nil, nil
	merged.Seed, merged.CoreLines = o.Seed, e.CoreLinesFor(o.Strategy)
	return merged, nil
}

// spawnShards starts o.Procs generators through o.Spawn, meeting at a
// start barrier, and returns the run each measured. The first to fail
// stops the others: they would wait at the barrier for it.
func spawnShards(ctx context.Context, st Stores, e registry.Entry, scenario string, o Options, rep int) ([]results.Run, error) {
	key := barrierKey(e, scenario)
	shards := make([]*results.Results, o.Procs)
	errs := make([]error, o.Procs)
	var wg sync.WaitGroup
	gctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	for i := range o.Procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shards[i], errs[i] = o.Spawn(gctx, Generator{Endpoints: st.Endpoints, Strategy: e.Name, Scenario: scenario,
				Repeat: rep, Shard: i, Of: o.Procs, Barrier: key, Metrics: o.Metrics})
			if errs[i] != nil && ctx.Err() == nil {
				errs[i] = fmt.Errorf("generator %d/%d: %w", i, o.Procs, errs[i])
				stop(errs[i])
			}
		}()
	}
	wg.Wait()
	st.Conns.Redis.Del(context.WithoutCancel(ctx), "{"+key+"}:in", "{"+key+"}:go")
	var runs []results.Run
	for i, r := range shards {
		if errs[i] != nil && (ctx.Err() == nil || r == nil) {
			if cause := context.Cause(gctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return nil, cause
			}
			return nil, errs[i]
		}
		if r == nil || len(r.Runs) != 1 {
			return nil, fmt.Errorf("generator %d/%d: no run in its results", i, o.Procs)
		}
		runs = append(runs, r.Runs[0])
	}
	return runs, nil
}
