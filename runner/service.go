package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

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
	err := fn(ctx, in.s)
	if err != nil && errors.Is(context.Cause(ctx), errCrashed) {
		// Cut by the crash at whatever point it had reached: it may have
		// happened, so its outcome is unknown — and a client with
		// --client-retry retries it (a definite answer that raced the
		// crash, out of stock say, still classifies as itself).
		return fmt.Errorf("%w: %w: %w", inventory.ErrOutcomeUnknown, errCrashed, err)
	}
	return err
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
func (sv *service) Refund(ctx context.Context, o inventory.OrderRef) error {
	return sv.call(ctx, func(ctx context.Context, s strategies.Strategy) error { return s.Refund(ctx, o) })
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
