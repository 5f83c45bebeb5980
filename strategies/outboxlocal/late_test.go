package outboxlocal

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
)

// lateLease is the members' lease in these tests: short, so a member
// without a heartbeat is presumed dead soon; asserted nowhere (the tests
// wait for the event, not for the time).
const lateLease = 300 * time.Millisecond

// silentMember starts an instance on dir (the stores already loaded with
// total units of sku) without its background loop: it beats, relays and
// sweeps only when the test calls it — a process paused (SIGSTOP) until
// the test resumes it. Its relay never runs by itself.
func silentMember(t *testing.T, dir string, total int64) *Strategy {
	t.Helper()
	s, err := New(strategies.Config{DB: env.DB, Redis: env.Redis, LocalDir: dir,
		OutboxPeriod: time.Hour, ReconcilePeriod: time.Hour, SweepPeriod: time.Hour})
	must(t, "new", err)
	t.Cleanup(func() { _ = s.Close() })
	s.rs.Fence.Lease = lateLease
	must(t, "setup", s.Setup(context.Background(), []inventory.Stock{{SKU: sku, Total: total, Available: total}}))
	return s
}

// waitSilent waits until member's heartbeat is older than the lease, as
// the other members see it.
func waitSilent(t *testing.T, member string) {
	t.Helper()
	waitfor.Until(t, "the silent member's lease ran out", func() bool {
		var n int
		err := env.DB.QueryRow("SELECT COUNT(*) FROM redis_fence WHERE instance=? AND beat > NOW(6) - INTERVAL ? MICROSECOND",
			member, lateLease.Microseconds()).Scan(&n)
		return err == nil && n == 0
	})
}

// lateCase is one row of the late-member tests: what the silent member b
// did before its lease ran out, what a does after the restart, and what
// the audit must then show.
type lateCase struct {
	name         string
	total        int64
	bRelayed     bool // b's reserve reached MySQL before b fell silent
	bConfirms    bool // b confirmed its order (acknowledged) before falling silent
	aWant        error
	restart      bool  // b comes back as a new process on its directory, not resumed
	wantRefused  int64 // b's acknowledged late decisions the current stores refused
	wantResViol  int   // reserve acks no store holds (b's refused reserve)
	wantLostAcks int   // confirm acks lost (b's refused confirm)
}

var lateCases = []lateCase{
	{name: "a sells the unit b's late decisions held", total: 1, bConfirms: true,
		wantRefused: 2, wantResViol: 1, wantLostAcks: 1},
	{name: "b restarted on its directory", total: 1, bConfirms: true, restart: true,
		wantRefused: 2, wantResViol: 1, wantLostAcks: 1},
	{name: "a sells the unit b's late reserve held", total: 1,
		wantRefused: 1, wantResViol: 1},
	{name: "units enough for both", total: 2, bConfirms: true},
	{name: "b's reserve reached MySQL, its confirm is late", total: 1, bRelayed: true, bConfirms: true,
		aWant: inventory.ErrOutOfStock},
}

// resumeAndAudit brings b back (resumed, or restarted on dir), settles
// both instances and checks the audit and b's counters against c.
func resumeAndAudit(t *testing.T, c lateCase, a, b *Strategy, dir string, acks []inventory.Ack) {
	t.Helper()
	ctx := context.Background()
	if c.restart {
		must(t, "close b", b.Close())
		b = silentMember(t, dir, c.total)
	}
	must(t, "settle b", b.Settle(ctx))
	must(t, "settle a", a.Settle(ctx))
	au, err := audit.Auditor{DB: env.DB, Redis: env.Redis, RedisReservations: true,
		Ledger: map[string]int64{sku: c.total}}.Audit(ctx, acks)
	must(t, "audit", err)
	if au.OversoldUnits != 0 || au.DriftUnits != 0 || au.ReserveAckViolations != c.wantResViol || au.LostAcks != c.wantLostAcks ||
		au.Anomalies != int64(c.wantResViol+c.wantLostAcks) {
		t.Fatalf("audit after settle: oversold %d, drift %d, reserve-ack violations %d, lost acks %d, anomalies %d (%v); want 0, 0, %d, %d, %d",
			au.OversoldUnits, au.DriftUnits, au.ReserveAckViolations, au.LostAcks, au.Anomalies, au.Violations,
			c.wantResViol, c.wantLostAcks, c.wantResViol+c.wantLostAcks)
	}
	if got := b.Counters()["outbox_local_late_refused"]; got != float64(c.wantRefused) {
		t.Fatalf("b's late decisions refused: %v, want %d", got, c.wantRefused)
	}
	var sold, reserved int64
	must(t, "read inventory", env.DB.QueryRow("SELECT sold, occupied FROM inventory WHERE sku=?", sku).Scan(&sold, &reserved))
	if sold+reserved > c.total {
		t.Fatalf("MySQL sold %d + reserved %d of %d", sold, reserved, c.total)
	}
}

// bActs has b reserve (and confirm) order "b"; it returns the acks.
func bActs(t *testing.T, c lateCase, b *Strategy) []inventory.Ack {
	t.Helper()
	ctx := context.Background()
	must(t, "reserve b on b", b.Reserve(ctx, resFor("b", "", 0)))
	acks := []inventory.Ack{{OrderID: "b", SKU: sku, State: inventory.StateReserved}}
	if c.bRelayed {
		must(t, "relay b's reserve", b.drain(ctx))
	}
	if c.bConfirms {
		must(t, "confirm b on b", b.Confirm(ctx, ref("b")))
		acks = append(acks, inventory.Ack{OrderID: "b", SKU: sku, State: inventory.StateConfirmed})
	}
	if n, err := b.backlog(ctx); err != nil || n == 0 {
		t.Fatalf("b's backlog before it falls silent: %d (%v), want its events", n, err)
	}
	return acks
}

// aActs has a reserve and confirm order "a" after the restart; it returns
// the acks.
func aActs(t *testing.T, c lateCase, a *Strategy) []inventory.Ack {
	t.Helper()
	ctx := context.Background()
	err := a.Reserve(ctx, resFor("a", "", 0))
	if (c.aWant == nil && err != nil) || (c.aWant != nil && !errors.Is(err, c.aWant)) {
		t.Fatalf("a's reserve after the restart: %v, want %v", err, c.aWant)
	}
	if err != nil {
		return nil
	}
	must(t, "confirm a on a", a.Confirm(ctx, ref("a")))
	return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateReserved}, {OrderID: "a", SKU: sku, State: inventory.StateConfirmed}}
}

// TestPresumedDeadMemberCatchesUp is issue 42's open case of the fence:
// member b holds acknowledged decisions in its local table and falls
// silent past its lease (paused); Redis restarts; member a's round goes on
// without b (presumed dead) and a sells. When b comes back — resumed, or
// restarted on its directory — and relays, no unit may be sold twice
// (MySQL and Redis agree after settle), and a decision of b's the stores
// can no longer keep is refused and counted: by b's counter and, as a lost
// acknowledgement, by the auditor.
func TestPresumedDeadMemberCatchesUp(t *testing.T) {
	for _, c := range lateCases {
		t.Run(c.name, func(t *testing.T) {
			a := start(t, strategies.Config{OutboxPeriod: time.Hour, ReconcilePeriod: time.Hour, SweepPeriod: time.Hour}, c.total)
			a.rs.Fence.Lease = lateLease
			dir := t.TempDir()
			b := silentMember(t, dir, c.total)
			acks := bActs(t, c, b)
			waitSilent(t, b.rs.Fence.Member)
			restartRedis(t)
			acks = append(acks, aActs(t, c, a)...)
			resumeAndAudit(t, c, a, b, dir, acks)
			if a.rs.Fence.PresumedDead() != 1 {
				t.Fatalf("a's round presumed %d members dead, want 1 (b)", a.rs.Fence.PresumedDead())
			}
		})
	}
}

// TestFirstStartSeesExpiredMembers: an instance that starts first on a
// Redis without stock hashes (restarted empty) while the only other
// member registered is silent past its lease (crashed, or paused) must
// not arm its fence as if it were alone: the silent member's table may
// hold acknowledged decisions MySQL lacks. It runs a round (the silent one
// presumed dead), and the silent member, back, catches up as in
// TestPresumedDeadMemberCatchesUp. Without the restart, Redis kept b's
// decisions: a finds the unit taken.
func TestFirstStartSeesExpiredMembers(t *testing.T) {
	cases := []struct {
		lateCase
		redisRestarts bool
		wantDead      int64
	}{
		{lateCase{name: "redis restarted empty", total: 1, bConfirms: true,
			wantRefused: 2, wantResViol: 1, wantLostAcks: 1}, true, 1},
		{lateCase{name: "redis kept its data", total: 1, bConfirms: true, aWant: inventory.ErrOutOfStock}, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			must(t, "reset mysql", inventory.ResetMySQL(ctx, env.DB))
			must(t, "reset redis", inventory.ResetRedis(ctx, env.Redis))
			stock := []inventory.Stock{{SKU: sku, Total: c.total, Available: c.total}}
			must(t, "load", inventory.LoadStock(ctx, env.DB, stock))
			dir := t.TempDir()
			b := silentMember(t, dir, c.total)
			acks := bActs(t, c.lateCase, b)
			waitSilent(t, b.rs.Fence.Member)
			if c.redisRestarts {
				restartRedis(t)
			}
			a, err := New(strategies.Config{DB: env.DB, Redis: env.Redis, LocalDir: t.TempDir(),
				OutboxPeriod: time.Hour, ReconcilePeriod: time.Hour, SweepPeriod: time.Hour})
			must(t, "new a", err)
			t.Cleanup(func() { _ = a.Close() })
			a.rs.Fence.Lease = lateLease
			must(t, "setup a", a.Setup(ctx, stock))
			acks = append(acks, aActs(t, c.lateCase, a)...)
			resumeAndAudit(t, c.lateCase, a, b, dir, acks)
			if a.rs.Fence.PresumedDead() != c.wantDead {
				t.Fatalf("a presumed %d members dead, want %d", a.rs.Fence.PresumedDead(), c.wantDead)
			}
		})
	}
}
