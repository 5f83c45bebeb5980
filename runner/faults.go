package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/faults"
	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// Stores are what a run under faults needs besides its pools: where the
// servers answer (the proxy of network faults is put in front of them) and
// how to pause, kill and restart them (nil: no process faults, as on the
// external backend).
type Stores struct {
	Endpoints servers.Endpoints
	servers.Conns
	Faulter servers.Faulter
}

// errCrashed is why an operation in flight on a crashed instance ended.
var errCrashed = errors.New("app-crash: the service instance was dropped")

// instance is one running strategy instance: the strategy, its background
// loop, and the context every operation on it runs under (cancelled when
// the instance crashes).
type instance struct {
	s      strategies.Strategy
	ctx    context.Context
	cancel context.CancelCauseFunc
	bgDone chan struct{}
	// replaced is closed once a new instance serves in this one's place.
	replaced chan struct{}
	// ran is how long the background loop ran (set when it returned,
	// before bgDone closes).
	ran time.Duration
}

func startInstance(s strategies.Strategy) *instance {
	ctx, cancel := context.WithCancelCause(context.Background())
	in := &instance{s: s, ctx: ctx, cancel: cancel, bgDone: make(chan struct{}), replaced: make(chan struct{})}
	go func() {
		defer close(in.bgDone)
		t0 := time.Now()
		_ = s.Run(ctx)
		in.ran = time.Since(t0)
	}()
	return in
}

// stop ends the instance's background loop and in-flight operations, and
// waits for the loop.
func (in *instance) stop(cause error) {
	in.cancel(cause)
	<-in.bgDone
}

// service stands for the service process the buyers talk to: one strategy
// instance at a time. crash drops the current instance as a process crash
// would — every operation in flight on it ends at whatever point it had
// reached (its context is cancelled: between Try and Confirm, between the
// MySQL commit and the Redis update…), its background loop stops, it is
// closed — and starts a new instance on the same stores (the registry's
// constructor, then Setup, which never overwrites live stock), whose
// background loop is the recovery. Operations that arrive while the new
// instance is starting fail on the dead one, as calls to a restarting
// service do. Safe for concurrent use.
type service struct {
	e     registry.Entry
	cfg   strategies.Config
	stock []inventory.Stock

	mu      sync.RWMutex
	cur     *instance
	crashes atomic.Int64
	// counters of the dropped instances, summed
	past map[string]float64
}

var _ strategies.Strategy = (*service)(nil)

func newService(e registry.Entry, cfg strategies.Config, stock []inventory.Stock, s strategies.Strategy) *service {
	return &service{e: e, cfg: cfg, stock: stock, cur: startInstance(s), past: map[string]float64{}}
}

func (sv *service) current() *instance {
	sv.mu.RLock()
	defer sv.mu.RUnlock()
	return sv.cur
}

// call runs fn on the current instance under a context that also ends when
// that instance crashes.
func (sv *service) call(ctx context.Context, fn func(context.Context, strategies.Strategy) error) error {
	in := sv.current()
	if err := context.Cause(in.ctx); err != nil {
		// The service is down: the call fails once the new instance is up
		// (as a client's connect to a restarting service hangs, then
		// fails), not at once in a tight loop.
		select {
		case <-in.replaced:
		case <-ctx.Done():
		}
		return fmt.Errorf("%w: %w", context.Canceled, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(in.ctx, func() { cancel(errCrashed) })
	defer stop()
	return fn(ctx, in.s)
}

func (sv *service) Name() string { return sv.e.Name }
func (sv *service) Setup(ctx context.Context, stock []inventory.Stock) error {
	return sv.current().s.Setup(ctx, stock)
}
func (sv *service) Reserve(ctx context.Context, r inventory.Reservation) error {
	return sv.call(ctx, func(ctx context.Context, s strategies.Strategy) error { return s.Reserve(ctx, r) })
}
func (sv *service) Confirm(ctx context.Context, o inventory.OrderRef) error {
	return sv.call(ctx, func(ctx context.Context, s strategies.Strategy) error { return s.Confirm(ctx, o) })
}
func (sv *service) Cancel(ctx context.Context, o inventory.OrderRef) error {
	return sv.call(ctx, func(ctx context.Context, s strategies.Strategy) error { return s.Cancel(ctx, o) })
}
func (sv *service) Restock(ctx context.Context, r inventory.Restock) error {
	return sv.call(ctx, func(ctx context.Context, s strategies.Strategy) error { return s.Restock(ctx, r) })
}

// Run is not used: each instance runs its own loop from its start.
func (sv *service) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// Settle settles through the live instance.
func (sv *service) Settle(ctx context.Context) error { return sv.current().s.Settle(ctx) }

// Close stops and closes the live instance.
func (sv *service) Close() error {
	in := sv.current()
	in.stop(context.Canceled)
	return in.s.Close()
}

// stopBackground stops the live instance's loop (end of load) without
// closing it: Settle still runs on it.
// stopBackground stops the live instance's background loop and returns
// how long it ran: from the instance's start (before the load) to now,
// unless it returned early.
func (sv *service) stopBackground() time.Duration {
	in := sv.current()
	in.stop(context.Canceled)
	return in.ran
}

// Counters are the live instance's, plus those of the dropped ones
// (summed); the number of crashes is a harness figure (crashes).
func (sv *service) Counters() map[string]float64 {
	out := map[string]float64{}
	sv.mu.RLock()
	for k, v := range sv.past {
		out[k] = v
	}
	s := sv.cur.s
	sv.mu.RUnlock()
	if c, ok := s.(strategies.Counters); ok {
		for k, v := range c.Counters() {
			out[k] += v
		}
	}
	return out
}

// crash drops the live instance and starts a new one on the same stores.
func (sv *service) crash(ctx context.Context) error {
	old := sv.current()
	old.stop(errCrashed)
	_ = old.s.Close()
	sv.crashes.Add(1)
	if c, ok := old.s.(strategies.Counters); ok {
		sv.mu.Lock()
		for k, v := range c.Counters() {
			sv.past[k] += v
		}
		sv.mu.Unlock()
	}
	s, err := sv.e.New(sv.cfg)
	if err != nil {
		close(old.replaced)
		return fmt.Errorf("restart %s: %w", sv.e.Name, err)
	}
	// Setup on running stores re-sells nothing (a live stock hash is never
	// overwritten); it is what a restarted service does first.
	for {
		err = s.Setup(ctx, sv.stock)
		if err == nil || !clock.Sleep(ctx, 100*time.Millisecond) {
			break
		}
	}
	if err != nil {
		close(old.replaced)
		return fmt.Errorf("restart %s: setup: %w", sv.e.Name, err)
	}
	sv.mu.Lock()
	sv.cur = startInstance(s)
	sv.mu.Unlock()
	close(old.replaced)
	return nil
}

// hasAppCrash reports whether a plan crashes the service.
func hasAppCrash(p faults.Plan) bool {
	for _, f := range p {
		if f.Kind == faults.AppCrash {
			return true
		}
	}
	return false
}

// timeline turns the injector's events into results.json's fault timeline.
func timeline(events []faults.Event) []results.FaultEvent {
	out := make([]results.FaultEvent, len(events))
	for i, e := range events {
		out[i] = results.FaultEvent{Spec: e.Fault.String(), Kind: string(e.Fault.Kind), Target: string(e.Fault.Target),
			StartSec: e.Start.Seconds(), EndSec: e.End.Seconds(), Applied: !e.Applied.IsZero(), Error: e.Err}
		if !out[i].Applied {
			out[i].StartSec, out[i].EndSec = e.Fault.At.Seconds(), e.Fault.End().Seconds()
		}
	}
	return out
}

// windowGrace extends each fault window past the fault's end: the second
// in which clients find the store back (reconnect, retry) belongs to it.
const windowGrace = time.Second

// impact measures what the faults did, from the per-second buckets of the
// measured phase and the settled audit.
func impact(series []bucket, failedAt []map[string]int64, fs []results.FaultEvent, settled results.Run) *results.FaultImpact {
	im := &results.FaultImpact{ErrorsInWindow: map[string]int64{}, ErrorsOutside: map[string]int64{},
		UnitsResold: settled.Audit.OversoldUnits, UnitsLost: settled.Audit.LeakedUnits}
	var first, last float64 = math.Inf(1), math.Inf(-1)
	var wins [][2]float64
	for _, f := range fs {
		if !f.Applied {
			continue
		}
		first, last = math.Min(first, f.StartSec), math.Max(last, f.EndSec)
		wins = append(wins, [2]float64{f.StartSec, f.EndSec + windowGrace.Seconds()})
	}
	inside := func(i int) bool {
		for _, w := range wins {
			if float64(i+1) > w[0] && float64(i) < w[1] {
				return true
			}
		}
		return false
	}
	for i, b := range series {
		if b.flows == 0 {
			im.OutageSec++
			if !inside(i) {
				im.OutageOutsideSec++
			}
		}
	}
	for i, m := range failedAt {
		dst := im.ErrorsOutside
		if inside(i) {
			dst = im.ErrorsInWindow
		}
		for cls, n := range m {
			dst[cls] += n
		}
	}
	if len(wins) == 0 {
		return im
	}
	// The pre-fault rate: whole seconds before the first fault.
	pre := int(math.Floor(first))
	if pre > 0 && pre <= len(series) {
		var n int64
		for _, b := range series[:pre] {
			n += b.flows
		}
		im.PreFaultTPS = float64(n) / float64(pre)
	}
	if im.PreFaultTPS > 0 {
		rec := -1.0
		for i := max(0, int(math.Floor(last))); i < len(series); i++ {
			if float64(series[i].flows) >= im.PreFaultTPS/2 {
				rec = math.Max(0, float64(i+1)-last)
				break
			}
		}
		im.RecoverSec = &rec
	}
	return im
}
