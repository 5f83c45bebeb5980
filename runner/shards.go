package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/observe"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/strategies"
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
	runs, lostShards, err := spawnShards(ctx, st, e, scenario, o, rep)
	if err != nil {
		return run, err
	}
	lost, lostAcks, drainFrom := drainAllLost(ctx, conns, e, o, stock, lostShards)
	if len(runs) == 0 {
		var notes []string
		for _, l := range lost {
			notes = append(notes, lostNote(l))
		}
		return run, fmt.Errorf("every generator died: %s", strings.Join(notes, "; "))
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
	auditor := audit.Auditor{DB: conns.DB, Ledger: map[string]int64{}, StaleBefore: staleFrom(runs, drainFrom), LimitPerBuyer: o.Params.LimitPerBuyer}
	if e.UsesRedis {
		auditor.Redis, auditor.RedisReservations = conns.Redis, e.RedisReservations
	}
	for _, s := range stock {
		auditor.Ledger[s.SKU] += s.Total
	}
	acks := lostAcks
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
	if len(lost) > 0 {
		// Audited, but on part of the load's figures: unproven, whatever
		// the audit found (an UNSAFE class still makes it unsafe).
		merged.Incomplete, merged.Lost = results.IncompleteGeneratorLost, lost
		for _, l := range lost {
			merged.Errors = append(merged.Errors, lostNote(l))
		}
	}
	merged.AuditEndOfLoad, merged.SettleRepaired = nil, nil
	merged.Seed, merged.CoreLines = o.Seed, e.CoreLinesFor(o.Strategy)
	return merged, nil
}

// drainAllLost drains what each generator that died left (the others
// have finished) and returns what was recovered of each, their acks (to be
// graded with the others') and when the first drain began (zero: none).
func drainAllLost(ctx context.Context, conns servers.Conns, e registry.Entry, o Options, stock []inventory.Stock,
	lostShards []lostShard) (lost []results.LostGenerator, acks []inventory.Ack, drainFrom time.Time) {
	for _, l := range lostShards {
		if drainFrom.IsZero() {
			drainFrom = time.Now()
		}
		o.logf("  generator %d/%d died (%v): draining %s", l.index, o.Procs, l.err.Err, l.err.StateDir)
		info, a := drainLost(ctx, conns, e, o, stock, l)
		lost = append(lost, info)
		acks = append(acks, a...)
	}
	return lost, acks, drainFrom
}

// staleFrom is the instant before which a live reservation's deadline makes
// it stale for the merged audit: when the last generator began to settle,
// as a single run's audit counts from the start of its settle. Every load
// had ended by then, and that generator's settle passes over every SKU, so
// it releases whatever had lapsed; one that lapsed earlier and is still
// held was missed by every settle. The parent's settle of a dead
// generator's state (from drainFrom) passed over every SKU too. Without
// either, the time of this audit.
func staleFrom(runs []results.Run, drainFrom time.Time) time.Time {
	var t time.Time
	for _, r := range runs {
		if r.Shard != nil && r.Shard.SettleFrom.After(t) {
			t = r.Shard.SettleFrom
		}
	}
	if drainFrom.After(t) {
		t = drainFrom
	}
	if t.IsZero() {
		t = time.Now()
	}
	return t
}

// GeneratorLost is what a Spawn returns for a generator that ended
// without a run in its results (killed with SIGKILL, out of memory): what
// it left is in StateDir (its strategy's local state in StateLocal, its
// acks in AckFile), for runShards to drain and audit. The other generators
// go on.
type GeneratorLost struct {
	StateDir string
	Err      error
}

func (e *GeneratorLost) Error() string { return e.Err.Error() }
func (e *GeneratorLost) Unwrap() error { return e.Err }

// lostShard is a generator spawnShards lost, by index.
type lostShard struct {
	index int
	err   *GeneratorLost
}

// spawnShards starts o.Procs generators through o.Spawn, meeting at a
// start barrier, and returns the run each measured. The first to fail
// stops the others (they would wait at the barrier for it), unless it is
// lost (GeneratorLost) after every generator reached the barrier: then the
// others finish their run and it is returned among the lost.
func spawnShards(ctx context.Context, st Stores, e registry.Entry, scenario string, o Options, rep int) ([]results.Run, []lostShard, error) {
	key := barrierKey(e, scenario)
	shards := make([]*results.Results, o.Procs)
	errs := make([]error, o.Procs)
	lostBy := make([]*GeneratorLost, o.Procs)
	var wg sync.WaitGroup
	gctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	// Whether every generator reached the barrier, remembered once seen:
	// its key expires barrierTTL after the last arrival, long before a
	// long run ends, and a generator may die after that.
	var allIn atomic.Bool
	go watchBarrier(gctx, st.Conns.Redis, key, o.Procs, &allIn)
	for i := range o.Procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shards[i], errs[i] = o.Spawn(gctx, Generator{Endpoints: st.Endpoints, Strategy: e.Name, Scenario: scenario,
				Repeat: rep, Shard: i, Of: o.Procs, Barrier: key, Metrics: o.Metrics})
			if errs[i] != nil && ctx.Err() == nil {
				var lost *GeneratorLost
				if errors.As(errs[i], &lost) && gctx.Err() == nil && released(gctx, st.Conns.Redis, key, o.Procs, allIn.Load()) {
					lostBy[i] = lost
					return
				}
				errs[i] = fmt.Errorf("generator %d/%d: %w", i, o.Procs, errs[i])
				stop(errs[i])
			}
		}()
	}
	wg.Wait()
	st.Conns.Redis.Del(context.WithoutCancel(ctx), "{"+key+"}:in", "{"+key+"}:go")
	var runs []results.Run
	var lost []lostShard
	for i, r := range shards {
		if lostBy[i] != nil {
			lost = append(lost, lostShard{index: i, err: lostBy[i]})
			continue
		}
		if errs[i] != nil && (ctx.Err() == nil || r == nil) {
			if cause := context.Cause(gctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return nil, lost, cause
			}
			return nil, lost, errs[i]
		}
		if r == nil || len(r.Runs) != 1 {
			return nil, lost, fmt.Errorf("generator %d/%d: no run in its results", i, o.Procs)
		}
		runs = append(runs, r.Runs[0])
	}
	return runs, lost, nil
}

// barrierLook is how often the parent looks whether every generator has
// reached the start barrier (watchBarrier).
const barrierLook = 250 * time.Millisecond

// watchBarrier sets allIn once the start barrier key counts n arrivals,
// looking every barrierLook until then or until ctx ends.
func watchBarrier(ctx context.Context, rdb redis.UniversalClient, key string, n int, allIn *atomic.Bool) {
	t := time.NewTicker(barrierLook)
	defer t.Stop()
	for {
		if in, err := rdb.Get(ctx, "{"+key+"}:in").Int64(); err == nil && in >= int64(n) {
			allIn.Store(true)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// released reports whether every one of n generators had arrived at the
// start barrier key (seen: watchBarrier saw them all, the key may have
// expired since), and if so makes sure none waits there any more: it
// adds n release tokens (a generator that died may have been the last to
// arrive, before it released the others; spare tokens are harmless, each
// generator takes one once, and the key goes at the end of the run).
func released(ctx context.Context, rdb redis.UniversalClient, key string, n int, seen bool) bool {
	if !seen {
		in, err := rdb.Get(ctx, "{"+key+"}:in").Int64()
		if err != nil || in < int64(n) {
			return false
		}
	}
	tokens := make([]any, n)
	for i := range tokens {
		tokens[i] = "1"
	}
	return rdb.RPush(ctx, "{"+key+"}:go", tokens...).Err() == nil
}

// drainLost is what the parent does for a generator that died: the same
// steps a generator's own end takes on its strategy, on the directory it
// left — a strategy instance built through the registry on its local
// state (Setup relays a predecessor's table, as for a restarted service;
// Settle expires, reconciles and drains it), then Close (outbox-local's
// member leaves the Redis fence once nothing is left) — and its acks read
// back from its log. A drain that did not finish leaves the directory for
// a generator started on it again (run --shard … --state-dir).
func drainLost(ctx context.Context, conns servers.Conns, e registry.Entry, o Options, stock []inventory.Stock, l lostShard) (results.LostGenerator, []inventory.Ack) {
	info := results.LostGenerator{Index: l.index, Of: o.Procs, Exit: l.err.Err.Error(), StateDir: l.err.StateDir}
	acks, torn, err := ReadAckFile(filepath.Join(l.err.StateDir, AckFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// It died before it logged anything.
	case err != nil:
		info.AckError = err.Error()
	}
	info.Acks, info.TornBytes = int64(len(acks)), torn
	local := filepath.Join(l.err.StateDir, StateLocal)
	if err := os.MkdirAll(local, 0o755); err != nil {
		info.DrainError = err.Error()
		return info, acks
	}
	cfg := o.Strategy
	cfg.DB, cfg.Redis, cfg.LocalDir = conns.DB, conns.Redis, local
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = o.OpTimeout
	}
	settleTO, _ := o.deadlines(len(stock), int64(len(acks)), 0)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTO)
	defer cancel()
	s, err := e.New(cfg)
	if err == nil {
		if err = s.Setup(dctx, stock); err == nil {
			err = s.Settle(dctx)
		}
		if c, ok := s.(strategies.Counters); ok {
			info.Drained = int64(c.Counters()["outbox_relayed"])
		}
		if cerr := s.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		info.DrainError = err.Error()
		return info, acks
	}
	// Drained: nothing is left to relay (the ack log stays, the record of
	// what its clients were told).
	_ = os.RemoveAll(local)
	info.StateDir = ""
	return info, acks
}

// lostNote is a lost generator in words, for the run's errors.
func lostNote(l results.LostGenerator) string {
	s := fmt.Sprintf("generator %d/%d died before its report (%s): its load figures are missing; %d acks read from its log", l.Index, l.Of, l.Exit, l.Acks)
	if l.TornBytes > 0 {
		s += fmt.Sprintf(" (a last record of %d bytes torn by the kill: that ack is not graded)", l.TornBytes)
	}
	if l.AckError != "" {
		s += " (" + l.AckError + ": acks after that are not graded)"
	}
	if l.DrainError != "" {
		return s + fmt.Sprintf("; the drain of its local state did not finish (%s): %s is kept for `run --shard %d/%d --state-dir`", l.DrainError, l.StateDir, l.Index, l.Of)
	}
	return s + fmt.Sprintf("; its local table drained by the parent: %d events relayed", l.Drained)
}
