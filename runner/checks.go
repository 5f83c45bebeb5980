package runner

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// auditWithin is one audit as a phase of a run: a reads the stores
// against acks within deadline, its progress drawn on ps; check, when
// given, runs on the result inside the same deadline. The phase is
// recorded in ps (incomplete on an error), and the error names the phase
// and its deadline. A single run's audits and the merged audit of several
// generators are both this.
func auditWithin(ps *phases, name string, a audit.Auditor, acks audit.AckSource, deadline time.Duration,
	check func(context.Context, *audit.Audit) error) (audit.Audit, error) {
	ph := ps.start(name, "SKUs+acks", 0)
	a.Progress = func(done, total int64) { ph.set(done, total) }
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	res, err := a.AuditFrom(ctx, acks)
	if err == nil && check != nil {
		err = check(ctx, &res)
	}
	ph.end(err != nil)
	if err != nil {
		return res, fmt.Errorf("%s (deadline %s): %w", name, deadline, err)
	}
	return res, nil
}

// checked is what the checks found: the audits before and after settle,
// what settle repaired, and the phase that did not finish (with why); a
// generator of several hands back its acks and its part instead.
type checked struct {
	endOfLoad *audit.Audit
	// settled is the audit after settle (nil: it did not finish).
	settled  *audit.Audit
	repaired map[string]int64
	// incomplete names the phase that did not finish, err says why.
	incomplete string
	err        error
	phases     []results.Phase
	shardAcks  []inventory.Ack
	shard      *results.ShardInfo
}

// check audits at the end of load, settles, and audits again — even after
// Ctrl-C: what was measured is reported. A phase that overruns its
// deadline (or fails) ends the chain: the run keeps its load figures and
// names the phase in Incomplete. A generator of several settles only and
// hands its acks to the parent, which audits once.
func check(p paths, e registry.Entry, o Options, b built, sv served, ld loaded) (checked, error) {
	ps := &phases{w: o.Progress, name: e.Name}
	settleTO, auditTO := o.deadlines(len(b.stock), sv.acks.len(), pendingOf(sv.strat))
	if o.Segment.Partial() {
		ck, err := settleShard(ps, p, o, sv, ld, settleTO, auditTO)
		ck.phases = ps.list
		return ck, err
	}
	ck := auditAround(ps, p, e, o, sv, ld, settleTO, auditTO)
	ck.phases = ps.list
	return ck, nil
}

// auditAround audits at the end of load, settles and audits again; the
// first phase that does not finish ends it.
func auditAround(ps *phases, p paths, e registry.Entry, o Options, sv served, ld loaded, settleTO, auditTO time.Duration) checked {
	var ck checked
	auditor := audit.Auditor{DB: p.conns.DB, LimitPerBuyer: o.Params.LimitPerBuyer, Ledger: sv.book.snapshot()}
	if e.UsesRedis {
		auditor.Redis, auditor.RedisReservations = p.conns.Redis, e.RedisReservations
	}
	endOfLoad, err := auditWithin(ps, PhaseAuditEndOfLoad, auditor, sv.acks, auditTO, nil)
	if err != nil {
		ck.incomplete, ck.err = PhaseAuditEndOfLoad, err
		return ck
	}
	attachProbe(ld.probed, &endOfLoad)
	ck.endOfLoad = &endOfLoad
	auditor.StaleBefore = time.Now()
	if err := settleWithin(ps, p, sv.strat, settleTO); err != nil {
		ck.incomplete, ck.err = PhaseSettle, err
		return ck
	}
	// What settle repaired compares like with like: the node-agreement
	// check runs only after settle, so it stays out of the difference.
	var repaired map[string]int64
	settled, err := auditWithin(ps, PhaseAudit, auditor, sv.acks, auditTO, func(ctx context.Context, a *audit.Audit) error {
		attachProbe(ld.probed, a)
		repaired = audit.Repaired(endOfLoad, *a)
		return checkNodes(ctx, p.conns, a)
	})
	if err != nil {
		ck.incomplete, ck.err = PhaseAudit, err
		return ck
	}
	ck.settled, ck.repaired = &settled, repaired
	return ck
}

// settleWithin runs the strategy's Settle as a phase, within deadline.
func settleWithin(ps *phases, p paths, s strategies.Strategy, deadline time.Duration) error {
	ph := ps.start(PhaseSettle, "", 0)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := s.Settle(ctx); err != nil {
		ph.end(true)
		// The pool's state says whether settle waited for a connection
		// (held by something that never gave it back) or for the store.
		st := p.sconns.DB.Stats()
		return fmt.Errorf("settle (deadline %s; MySQL pool %d open, %d in use): %w",
			deadline, st.OpenConnections, st.InUse, err)
	}
	ph.end(false)
	return nil
}

// settleShard is a generator's checks: settle, then hand the acks and
// this process's part to the parent, which audits once, after every
// generator settled.
func settleShard(ps *phases, p paths, o Options, sv served, ld loaded, settleTO, auditTO time.Duration) (checked, error) {
	var ck checked
	settleFrom := time.Now()
	if err := settleWithin(ps, p, sv.strat, settleTO); err != nil {
		ck.incomplete, ck.err = PhaseSettle, err
	}
	actx, cancel := context.WithTimeout(context.Background(), auditTO)
	acks, err := sv.acks.all(actx)
	cancel()
	if err != nil {
		return ck, err
	}
	ck.shardAcks = acks
	host, _ := os.Hostname()
	ck.shard = &results.ShardInfo{Index: o.Segment.Index, Of: o.Segment.Of, Host: host, PID: os.Getpid(),
		HarnessCPUPct: ld.cpuPct["harness"], Cores: runtime.NumCPU(), SettleFrom: settleFrom}
	return ck, nil
}
