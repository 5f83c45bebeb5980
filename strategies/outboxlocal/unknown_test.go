package outboxlocal

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
)

// TestUnknownAfterRebuildIsNotGuessed is issue 42's "refused after
// reserve" under svc-pause + redis-restart: after Redis lost its data and
// was rebuilt, a member asked about an order the rebuilt Redis does not
// hold answered "unknown order" — final, and wrong — when the order was
// decided before the loss (a client's repeat of a confirm whose answer a
// paused instance never sent: MySQL holds it confirmed, the rebuild
// records only reserved orders), or when its acknowledged reserve was
// still in the table of a member the round went on without (paused past
// its lease, not caught up yet). A cancel left a marker there, which the
// late member's replay then met and refused. The member must answer
// what MySQL holds, or "outcome unknown" while a late member may hold
// the order; once that member has caught up the repeat succeeds, and the
// audit after settle is clean.
func TestUnknownAfterRebuildIsNotGuessed(t *testing.T) {
	ctx := context.Background()
	confirm := func(s *Strategy, id string) error { return s.Confirm(ctx, ref(id)) }
	cancel := func(s *Strategy, id string) error { return s.Cancel(ctx, ref(id)) }
	cases := []struct {
		name  string
		prior inventory.OrderState // what a decided before the loss ("" none; reserved: b holds it, late)
		op    func(s *Strategy, id string) error
		opAck inventory.OrderState // the ack a successful op gives
		want  error                // the op's answer right after the rebuild
		after error                // its answer once the late member caught up (late cases)
	}{
		{"repeat confirm of an order mysql holds confirmed", inventory.StateConfirmed, confirm, inventory.StateConfirmed, nil, nil},
		{"cancel of an order mysql holds confirmed", inventory.StateConfirmed, cancel, inventory.StateCancelled, inventory.ErrAlreadyFinal, nil},
		{"repeat cancel of an order mysql holds cancelled", inventory.StateCancelled, cancel, inventory.StateCancelled, nil, nil},
		{"confirm of an order mysql holds cancelled", inventory.StateCancelled, confirm, inventory.StateConfirmed, inventory.ErrAlreadyFinal, nil},
		{"confirm of an order only a late member holds", inventory.StateReserved, confirm, inventory.StateConfirmed, inventory.ErrOutcomeUnknown, nil},
		{"cancel of an order only a late member holds", inventory.StateReserved, cancel, inventory.StateCancelled, inventory.ErrOutcomeUnknown, nil},
		{"confirm of an order nobody holds", "", confirm, inventory.StateConfirmed, inventory.ErrUnknownOrder, nil},
		{"cancel of an order nobody holds (a marker)", "", cancel, inventory.StateCancelled, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := start(t, strategies.Config{OutboxPeriod: time.Hour, ReconcilePeriod: time.Hour, SweepPeriod: time.Hour}, 2)
			a.rs.Fence.Lease = lateLease
			var acks []inventory.Ack
			var b *Strategy
			switch c.prior {
			case inventory.StateReserved:
				b = silentMember(t, t.TempDir(), 2)
				must(t, "reserve o on b", b.Reserve(ctx, resFor("o", "", 0)))
				acks = append(acks, inventory.Ack{OrderID: "o", SKU: sku, State: inventory.StateReserved})
				waitSilent(t, b.rs.Fence.Member)
			case inventory.StateConfirmed, inventory.StateCancelled:
				must(t, "reserve o", a.Reserve(ctx, resFor("o", "", 0)))
				op := confirm
				if c.prior == inventory.StateCancelled {
					op = cancel
				}
				must(t, "decide o", op(a, "o"))
				acks = append(acks, inventory.Ack{OrderID: "o", SKU: sku, State: inventory.StateReserved},
					inventory.Ack{OrderID: "o", SKU: sku, State: c.prior})
				must(t, "relay o", a.drain(ctx))
			}
			must(t, "lose redis's data", inventory.ResetRedis(ctx, env.Redis))
			must(t, "flush scripts", env.Redis.ScriptFlush(ctx).Err())
			err := c.op(a, "o")
			if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("after the rebuild: %v, want %v", err, c.want)
			}
			if b != nil {
				must(t, "b comes back and settles (catches up)", b.Settle(ctx))
				err = c.op(a, "o")
				if (c.after == nil) != (err == nil) || (c.after != nil && !errors.Is(err, c.after)) {
					t.Fatalf("once b caught up: %v, want %v", err, c.after)
				}
				if got := b.Counters()["outbox_local_late_refused"]; got != 0 {
					t.Fatalf("b's late decisions refused: %v, want 0", got)
				}
			}
			if err == nil {
				acks = append(acks, inventory.Ack{OrderID: "o", SKU: sku, State: c.opAck})
			}
			auditClean(t, a, 2, acks)
		})
	}
}

// TestLateReserveDecidedSinceStands: member b's acknowledged reserve is
// in its table only when Redis restarts and a's round goes on without b;
// the client, its answer lost, repeats the reserve through a (the rebuilt
// Redis counts the order) and then decides it there. When b catches up,
// its reserve meets that record: the order's reserve stood, so nothing of
// b's was refused — outbox_local_late_refused stays 0 (it counted one
// when the decision was a cancel) and the audit after settle is clean.
func TestLateReserveDecidedSinceStands(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		decide func(s *Strategy) error
		ack    inventory.OrderState
	}{
		{"cancelled through a", func(s *Strategy) error { return s.Cancel(ctx, ref("o")) }, inventory.StateCancelled},
		{"confirmed through a", func(s *Strategy) error { return s.Confirm(ctx, ref("o")) }, inventory.StateConfirmed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := start(t, strategies.Config{OutboxPeriod: time.Hour, ReconcilePeriod: time.Hour, SweepPeriod: time.Hour}, 2)
			a.rs.Fence.Lease = lateLease
			b := silentMember(t, t.TempDir(), 2)
			must(t, "reserve o on b", b.Reserve(ctx, resFor("o", "", 0)))
			waitSilent(t, b.rs.Fence.Member)
			must(t, "lose redis's data", inventory.ResetRedis(ctx, env.Redis))
			must(t, "flush scripts", env.Redis.ScriptFlush(ctx).Err())
			must(t, "the client's repeat of the reserve through a", a.Reserve(ctx, resFor("o", "", 0)))
			must(t, "decide o through a", c.decide(a))
			must(t, "b comes back and settles (catches up)", b.Settle(ctx))
			if got := b.Counters()["outbox_local_late_refused"]; got != 0 {
				t.Fatalf("b's late decisions refused: %v, want 0", got)
			}
			if b.rs.Fence.CatchUps() != 1 {
				t.Fatalf("b caught up %d times, want 1", b.rs.Fence.CatchUps())
			}
			auditClean(t, a, 2, []inventory.Ack{{OrderID: "o", SKU: sku, State: inventory.StateReserved},
				{OrderID: "o", SKU: sku, State: inventory.StateReserved}, {OrderID: "o", SKU: sku, State: c.ack}})
			if st, _ := mysqlOrder(t, "o"); st != c.ack {
				t.Fatalf("MySQL order o is %s, want %s", st, c.ack)
			}
		})
	}
}
