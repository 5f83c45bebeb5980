package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stockbench/stockbench/inventory"
)

// TestRefusedAfterReserve: which refusals of a confirm contradict the
// reserve acknowledged before it (issue 42, finding 3: outbox-local's
// "unknown order" after a Redis loss was not counted).
func TestRefusedAfterReserve(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	wrap := func(err error) error { return fmt.Errorf("confirm o: %w", err) }
	cases := []struct {
		name     string
		err      error
		deadline time.Time
		want     bool
	}{
		{"out of stock", wrap(inventory.ErrOutOfStock), now.Add(time.Minute), true},
		{"unknown order", wrap(inventory.ErrUnknownOrder), now.Add(time.Minute), true},
		{"cancelled before its deadline", wrap(inventory.ErrAlreadyFinal), now.Add(time.Minute), true},
		{"expired past its deadline", wrap(inventory.ErrAlreadyFinal), now.Add(-time.Millisecond), false},
		{"final at its deadline's millisecond", wrap(inventory.ErrAlreadyFinal), now.Add(500 * time.Microsecond), false},
		{"final, no deadline known", wrap(inventory.ErrAlreadyFinal), time.Time{}, false},
		{"outcome unknown", wrap(inventory.ErrOutcomeUnknown), now.Add(time.Minute), false},
		{"conflict", wrap(inventory.ErrConflict), now.Add(time.Minute), false},
		{"infrastructure", errors.New("connection refused"), now.Add(time.Minute), false},
	}
	for _, c := range cases {
		if got := refusedAfterReserve(c.err, c.deadline, now); got != c.want {
			t.Errorf("%s: refusedAfterReserve %v, want %v", c.name, got, c.want)
		}
	}
}

// answerer answers every confirm with err and every reserve and cancel
// with nil: the ledger's bookkeeping without stores.
type answerer struct {
	refuser
	err error
}

func (a answerer) Confirm(context.Context, inventory.OrderRef) error { return a.err }
func (answerer) Cancel(context.Context, inventory.OrderRef) error    { return nil }

// TestLedgerRefusals: every class of refusal of a confirm after an
// acknowledged reserve is a refused ack, unless the client cancelled the
// order itself first.
func TestLedgerRefusals(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name      string
		err       error
		cancel    bool // the client cancels before it confirms
		wantAcked bool
	}{
		{"unknown order", inventory.ErrUnknownOrder, false, true},
		{"cancelled behind the client's back", inventory.ErrAlreadyFinal, false, true},
		{"cancelled by the client", inventory.ErrAlreadyFinal, true, false},
		{"outcome unknown", inventory.ErrOutcomeUnknown, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			acks, err := newAckLog()
			if err != nil {
				t.Fatal(err)
			}
			defer acks.Close()
			l := newLedger(answerer{err: c.err}, nil, acks, time.Hour)
			r := inventory.Reservation{OrderID: "o", SKU: "S", Qty: 1, Deadline: time.Now().Add(time.Hour)}
			if err := l.Reserve(ctx, r); err != nil {
				t.Fatal(err)
			}
			if c.cancel {
				if err := l.Cancel(ctx, inventory.OrderRef{OrderID: "o", SKU: "S"}); err != nil {
					t.Fatal(err)
				}
			}
			_ = l.Confirm(ctx, inventory.OrderRef{OrderID: "o", SKU: "S"})
			refused := 0
			if err := acks.EachAck(ctx, func(b []inventory.Ack) error {
				for _, a := range b {
					if a.State == inventory.AckRefused {
						refused++
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if (refused == 1) != c.wantAcked || refused > 1 {
				t.Fatalf("%d refused acks, want refused %v", refused, c.wantAcked)
			}
		})
	}
}
