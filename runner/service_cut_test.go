package runner

import (
	"context"
	"testing"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// idle is a strategy whose background loop waits for its end; the test's
// calls are the functions it passes to service.call.
type idle struct{ strategies.Strategy }

func (idle) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// TestCrashCutIsUnknown (issue 42, finding 12): a call an app crash cuts
// has an unknown outcome — it may have happened — so a client with
// --client-retry retries it; a definite answer that raced the crash stays
// what it was, and a call its own client gave up on is not the crash's.
func TestCrashCutIsUnknown(t *testing.T) {
	cases := []struct {
		name  string
		crash bool                        // the instance crashes during the call
		give  func(context.Context) error // what the strategy answers once the call's context ends
		want  inventory.Outcome
		retry bool
	}{
		{"cut by the crash", true, func(ctx context.Context) error { return ctx.Err() }, inventory.OutcomeUnknown, true},
		{"a store error as the crash cut it", true, func(context.Context) error { return context.Canceled }, inventory.OutcomeUnknown, true},
		{"a definite answer racing the crash", true, func(context.Context) error { return inventory.ErrOutOfStock }, inventory.OutOfStock, false},
		{"the client gave up", false, func(ctx context.Context) error { return ctx.Err() }, inventory.Canceled, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sv := newService(registry.Entry{Name: "idle"}, strategies.Config{}, nil, idle{})
			defer sv.current().stop(context.Canceled)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			inside := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- sv.call(ctx, func(ctx context.Context, _ strategies.Strategy) error {
					close(inside)
					<-ctx.Done()
					return c.give(ctx)
				})
			}()
			<-inside
			if c.crash {
				sv.current().cancel(errCrashed)
			} else {
				cancel()
			}
			err := <-done
			if got := inventory.Classify(err); got != c.want || retryable(err) != c.retry {
				t.Fatalf("call: %v classifies %s (retried %v), want %s (retried %v)", err, got, retryable(err), c.want, c.retry)
			}
		})
	}
}
