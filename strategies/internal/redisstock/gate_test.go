package redisstock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestEnterHonoursContext: while a round holds the gated fence closed, an
// operation's Enter waits — and gives up when its context ends, with an
// error that says it was fenced (it did nothing) — and enters once the
// gate opens. A fence without Drain never waits.
func TestEnterHonoursContext(t *testing.T) {
	drain := func(context.Context) error { return nil }
	cases := []struct {
		name   string
		fence  *Fence
		closed bool // a round holds the gate
		want   error
	}{
		{"gated, open", &Fence{Drain: drain}, false, nil},
		{"gated, a round under way", &Fence{Drain: drain}, true, ErrFenced},
		{"not gated", &Fence{}, true, nil},
		{"nil fence", nil, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.closed && c.fence != nil {
				if err := c.fence.gate.close(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // ended already: a wait must not outlive it
			err := c.fence.Enter(ctx)
			if (c.want == nil) != (err == nil) || (c.want != nil && (!errors.Is(err, c.want) || !errors.Is(err, context.Canceled))) {
				t.Fatalf("Enter: %v, want %v", err, c.want)
			}
			if err == nil {
				c.fence.Leave()
			}
			if c.closed && c.fence != nil && c.fence.Drain != nil {
				entered := make(chan error, 1)
				go func() { entered <- c.fence.Enter(context.Background()) }()
				c.fence.gate.open()
				if err := <-entered; err != nil {
					t.Fatalf("Enter once the gate opened: %v", err)
				}
				c.fence.Leave()
			}
		})
	}
}

// TestCloseWaitsForInside: closing the gate waits for the operation
// inside to leave, and gives up (the gate open again) when its context
// ends first.
func TestCloseWaitsForInside(t *testing.T) {
	var g gate
	if err := g.enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := g.close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close with an operation inside: %v, want the deadline", err)
	}
	if err := g.enter(context.Background()); err != nil { // open again
		t.Fatalf("enter after a close that gave up: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- g.close(context.Background()) }()
	g.leave()
	g.leave()
	if err := <-closed; err != nil {
		t.Fatalf("close once both left: %v", err)
	}
}
