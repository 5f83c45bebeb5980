package outboxlocal

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
)

// start empties the stores, loads one SKU (sku) of total units and starts
// outbox-local on it with cfg (DB, Redis and, when empty, LocalDir filled
// in).
func start(t *testing.T, cfg strategies.Config, total int64) *Strategy {
	t.Helper()
	ctx := context.Background()
	must(t, "reset mysql", inventory.ResetMySQL(ctx, env.DB))
	must(t, "reset redis", inventory.ResetRedis(ctx, env.Redis))
	stock := []inventory.Stock{{SKU: sku, Total: total, Available: total}}
	must(t, "load", inventory.LoadStock(ctx, env.DB, stock))
	cfg.DB, cfg.Redis = env.DB, env.Redis
	if cfg.LocalDir == "" {
		cfg.LocalDir = t.TempDir()
	}
	s, err := New(cfg)
	must(t, "new", err)
	t.Cleanup(func() { _ = s.Close() })
	must(t, "setup", s.Setup(ctx, stock))
	return s
}

// lockLocal takes the local table's write lock from a connection of its
// own (another process holding the file), so that every local write of s
// blocks; the returned function lets go of it.
func lockLocal(t *testing.T, dir string) (release func()) {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName))
	must(t, "open the local file", err)
	conn, err := db.Conn(ctx)
	must(t, "connect to the local file", err)
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("lock the local file: %v", err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		_, _ = conn.ExecContext(ctx, "ROLLBACK")
		_ = conn.Close()
		_ = db.Close()
	}
	t.Cleanup(release)
	return release
}

// redisState is the state of order id's Redis reservation ("" for none).
func redisState(t *testing.T, id string) inventory.OrderState {
	t.Helper()
	st, err := env.Redis.HGet(context.Background(), inventory.RedisReservationKey(sku, id), "state").Result()
	if err != nil && err.Error() != "redis: nil" {
		t.Fatalf("read %s in redis: %v", id, err)
	}
	return inventory.OrderState(st)
}

// auditClean settles s and fails the test on any anomaly the auditor
// finds against acks (the ledger being total units of sku).
func auditClean(t *testing.T, s *Strategy, total int64, acks []inventory.Ack) {
	t.Helper()
	ctx := context.Background()
	must(t, "settle", s.Settle(ctx))
	a, err := audit.Auditor{DB: env.DB, Redis: env.Redis, RedisReservations: true,
		Ledger: map[string]int64{sku: total}}.Audit(ctx, acks)
	must(t, "audit", err)
	if a.Anomalies != 0 {
		t.Fatalf("audit after settle: %d anomalies: %v", a.Anomalies, a.Violations)
	}
}

// TestRepeatNotAckedBeforeDurable is finding 4 of issue 42: while the
// first attempt of a reserve waits on the local table (another process
// holds its lock), a repeat of it must not be acknowledged — the first
// one's event is not durable, and it may still fail. The first attempt
// honours its operation deadline (1 s here, against SQLite's busy wait)
// and answers "outcome unknown", and the reservation it made is not voided
// behind the back of a later, acknowledged repeat: confirming it works.
func TestRepeatNotAckedBeforeDurable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := start(t, strategies.Config{LocalDir: dir, OpTimeout: time.Second}, 10)
	release := lockLocal(t, dir)
	first := make(chan error, 1)
	go func() { first <- s.Reserve(ctx, resFor("o", "", 0)) }()
	waitfor.Until(t, "the first reserve's Try ran", func() bool { return redisState(t, "o") == inventory.StateReserved })
	if err := s.Reserve(ctx, resFor("o", "", 0)); !errors.Is(err, inventory.ErrOutcomeUnknown) {
		t.Fatalf("repeat while the first reserve's event is not durable: %v, want %v", err, inventory.ErrOutcomeUnknown)
	}
	err := <-first // the lock is still held: only the deadline ends it
	if !errors.Is(err, inventory.ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first reserve, its append blocked: %v, want %v past its deadline", err, inventory.ErrOutcomeUnknown)
	}
	release()
	must(t, "reserve again once the table is free", s.Reserve(ctx, resFor("o", "", 0)))
	must(t, "confirm the acknowledged reserve", s.Confirm(ctx, ref("o")))
	auditClean(t, s, 10, []inventory.Ack{{OrderID: "o", SKU: sku, State: inventory.StateReserved},
		{OrderID: "o", SKU: sku, State: inventory.StateConfirmed}})
}

// TestRepeatConfirmAppends is the confirm variant of finding 4: a confirm
// whose event could not be appended answers "outcome unknown"; its repeat,
// acknowledged, must leave the decision in the local table, so that MySQL
// ends confirmed even if this instance dies before any retry of its own
// (a new instance on the same directory settles).
func TestRepeatConfirmAppends(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := strategies.Config{LocalDir: dir, OpTimeout: time.Second}
	s := start(t, cfg, 10)
	must(t, "reserve", s.Reserve(ctx, resFor("o", "", 0)))
	must(t, "drain", s.drain(ctx))
	release := lockLocal(t, dir)
	if err := s.Confirm(ctx, ref("o")); !errors.Is(err, inventory.ErrOutcomeUnknown) {
		t.Fatalf("confirm, local table locked: %v, want %v", err, inventory.ErrOutcomeUnknown)
	}
	release()
	must(t, "repeat the confirm", s.Confirm(ctx, ref("o")))
	// The instance dies: what it kept in memory is gone; the file stays.
	s.dropUnsent()
	must(t, "close", s.Close())
	cfg.DB, cfg.Redis = env.DB, env.Redis
	s2, err := New(cfg)
	must(t, "new instance", err)
	defer s2.Close()
	must(t, "setup", s2.Setup(ctx, []inventory.Stock{{SKU: sku, Total: 10, Available: 10}}))
	must(t, "drain", s2.drain(ctx))
	if st, _ := mysqlOrder(t, "o"); st != inventory.StateConfirmed {
		t.Fatalf("acknowledged confirm: MySQL order is %s before any reconciler pass, want confirmed", st)
	}
}

// TestRedisOnlyDecisionNotResold is finding 1 of issue 42: a confirm whose
// local append failed leaves the order confirmed in Redis only; Redis then
// restarts (keeping its data, losing its scripts) and is rebuilt. The
// rebuild must not offer the confirmed unit again — with or without a
// client retry of the confirm in between.
func TestRedisOnlyDecisionNotResold(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		retry bool // the client repeats the confirm once the table is free
	}{
		{"the client retries the confirm", true},
		{"nobody retries", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := start(t, strategies.Config{LocalDir: dir, OpTimeout: time.Second}, 1)
			must(t, "reserve a", s.Reserve(ctx, resFor("a", "", 0)))
			must(t, "drain", s.drain(ctx))
			release := lockLocal(t, dir)
			err := s.Confirm(ctx, ref("a"))
			if !errors.Is(err, inventory.ErrOutcomeUnknown) {
				t.Fatalf("confirm, local table locked: %v, want %v", err, inventory.ErrOutcomeUnknown)
			}
			release()
			acks := []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateReserved}}
			if c.retry {
				must(t, "repeat the confirm", s.Confirm(ctx, ref("a")))
				acks = append(acks, inventory.Ack{OrderID: "a", SKU: sku, State: inventory.StateConfirmed})
			}
			// Redis restarts with its data (AOF): the scripts are gone.
			must(t, "flush scripts", env.Redis.ScriptFlush(ctx).Err())
			if err := s.Reserve(ctx, resFor("b", "", 0)); !errors.Is(err, inventory.ErrOutOfStock) {
				t.Fatalf("reserve of the only unit, sold to a, after the rebuild: %v, want %v", err, inventory.ErrOutOfStock)
			}
			auditClean(t, s, 1, acks)
		})
	}
}

// TestUnknownAfterLossRebuilds is finding 3 of issue 42: Redis loses its
// data (a restart without persistence) while an acknowledged reserve's
// event is still in the local table. A confirm or a cancel of that order
// must rebuild (the fence) instead of answering "unknown order" or
// leaving a marker, and the stores end as the client was told.
func TestUnknownAfterLossRebuilds(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		op   func(s *Strategy) error
		ack  inventory.OrderState
	}{
		{"confirm", func(s *Strategy) error { return s.Confirm(ctx, ref("a")) }, inventory.StateConfirmed},
		{"cancel", func(s *Strategy) error { return s.Cancel(ctx, ref("a")) }, inventory.StateCancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := start(t, strategies.Config{}, 1)
			must(t, "reserve a", s.Reserve(ctx, resFor("a", "", 0)))
			must(t, "lose redis's data", inventory.ResetRedis(ctx, env.Redis))
			must(t, "flush scripts", env.Redis.ScriptFlush(ctx).Err())
			must(t, c.name+" after the loss", c.op(s))
			auditClean(t, s, 1, []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateReserved},
				{OrderID: "a", SKU: sku, State: c.ack}})
			if st, _ := mysqlOrder(t, "a"); st != c.ack {
				t.Fatalf("MySQL order a is %s, want %s", st, c.ack)
			}
		})
	}
}

// TestSettleSettlesRedisOnly is finding 5 of issue 42: a confirm whose
// event was never appended (the instance died between the Redis decision
// and its append) must reach MySQL at Settle, not only once the
// reconciler's age window (an operation and two relay periods: 12 s by
// default) has passed.
func TestSettleSettlesRedisOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := strategies.Config{LocalDir: dir}
	s := start(t, cfg, 10)
	must(t, "reserve", s.Reserve(ctx, resFor("o", "", 0)))
	must(t, "drain", s.drain(ctx))
	// The Redis half of a confirm, then the instance dies.
	if _, err := s.rs.Finish(ctx, ref("o"), inventory.StateConfirmed, false); err != nil {
		t.Fatal(err)
	}
	must(t, "close", s.Close())
	cfg.DB, cfg.Redis = env.DB, env.Redis
	s2, err := New(cfg)
	must(t, "new instance", err)
	defer s2.Close()
	must(t, "setup", s2.Setup(ctx, []inventory.Stock{{SKU: sku, Total: 10, Available: 10}}))
	auditClean(t, s2, 10, []inventory.Ack{{OrderID: "o", SKU: sku, State: inventory.StateReserved}})
	if st, _ := mysqlOrder(t, "o"); st != inventory.StateConfirmed {
		t.Fatalf("after settle MySQL order o is %s, want confirmed (Redis decided it)", st)
	}
}

// TestReconcilerCountsRepairs is finding 8 of issue 42: a decision whose
// event is still in the local table, on its way, is no repair; one whose
// event is gone is. The order's MySQL row is made an hour old, so that the
// reconciler's age window (measured from it) lets the pass look at it.
func TestReconcilerCountsRepairs(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		lose bool // the decision's event is lost before the pass
		want int64
	}{
		{"decision on its way", false, 0},
		{"decision event lost", true, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := start(t, strategies.Config{}, 10)
			must(t, "reserve", s.Reserve(ctx, resFor("o", "", 0)))
			must(t, "drain", s.drain(ctx))
			if _, err := env.DB.Exec("UPDATE orders SET updated_at = updated_at - INTERVAL 1 HOUR WHERE order_id='o'"); err != nil {
				t.Fatal(err)
			}
			must(t, "confirm", s.Confirm(ctx, ref("o")))
			if c.lose {
				if _, err := s.local.ExecContext(ctx, "DELETE FROM events"); err != nil {
					t.Fatal(err)
				}
			}
			must(t, "reconcile", s.reconcile(ctx))
			if n := s.reconciled.Load(); n != c.want {
				t.Fatalf("outbox_local_reconciled %d, want %d", n, c.want)
			}
			must(t, "drain", s.drain(ctx))
			if st, _ := mysqlOrder(t, "o"); st != inventory.StateConfirmed {
				t.Fatalf("MySQL order o is %s, want confirmed", st)
			}
		})
	}
}

// TestLocalFail is the local-fail fault on outbox-local: while the local
// table takes no write, a reserve and a confirm answer "outcome unknown"
// at their deadline (never ok); once it takes writes again the kept events
// reach MySQL with the next relay pass, a repeat of the reserve is
// acknowledged, and the stores end as every answer said.
func TestLocalFail(t *testing.T) {
	ctx := context.Background()
	var failing atomic.Bool
	s := start(t, strategies.Config{OpTimeout: 200 * time.Millisecond, LocalFailing: failing.Load}, 10)
	must(t, "reserve c", s.Reserve(ctx, resFor("c", "", 0)))
	failing.Store(true)
	if err := s.Reserve(ctx, resFor("r", "", 0)); !errors.Is(err, inventory.ErrOutcomeUnknown) || !errors.Is(err, errLocalFail) {
		t.Fatalf("reserve during local-fail: %v, want %v (%v)", err, inventory.ErrOutcomeUnknown, errLocalFail)
	}
	if err := s.Confirm(ctx, ref("c")); !errors.Is(err, inventory.ErrOutcomeUnknown) {
		t.Fatalf("confirm during local-fail: %v, want %v", err, inventory.ErrOutcomeUnknown)
	}
	if err := s.drain(ctx); err == nil {
		t.Fatal("drain during local-fail succeeded with events kept unsent")
	}
	failing.Store(false)
	must(t, "drain", s.drain(ctx))
	if st, _ := mysqlOrder(t, "r"); st != inventory.StateReserved {
		t.Fatalf("MySQL order r is %s, want reserved (its kept reserve event)", st)
	}
	if st, _ := mysqlOrder(t, "c"); st != inventory.StateConfirmed {
		t.Fatalf("MySQL order c is %s, want confirmed (its kept decision)", st)
	}
	must(t, "repeat reserve r", s.Reserve(ctx, resFor("r", "", 0)))
	auditClean(t, s, 10, []inventory.Ack{{OrderID: "c", SKU: sku, State: inventory.StateReserved},
		{OrderID: "r", SKU: sku, State: inventory.StateReserved}})
}

// TestReleaseRelayedBeforeRetake is finding 6 of issue 42: the sweeper
// expires a's reservation in Redis, and before its event is appended b
// takes the unit it gave back. b's reserve event must not reach the local
// table (and so MySQL, by a relay pass) before a's expiry: MySQL's
// available would read −1 and the mid-run probe cry wolf. The hooks hold
// the expiry between its Redis script and its append, and tell whether
// b's reserve finished or waits for it.
func TestReleaseRelayedBeforeRetake(t *testing.T) {
	ctx := context.Background()
	s := start(t, strategies.Config{}, 1)
	a := resFor("a", "", 0)
	a.Deadline = time.Now().Add(-time.Second) // due at once
	must(t, "reserve a", s.Reserve(ctx, a))
	must(t, "drain", s.drain(ctx))
	inWindow, release := make(chan struct{}), make(chan struct{})
	waited := make(chan struct{}, 1)
	decisionHook = func(ref inventory.OrderRef, want inventory.OrderState) {
		if ref.OrderID == "a" {
			close(inWindow)
			<-release
		}
	}
	orderWaitHook = func() {
		select {
		case waited <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { decisionHook, orderWaitHook = nil, nil })
	swept := make(chan error, 1)
	go func() { _, _, err := s.sweepBatch(ctx, sku, time.Now(), 1000); swept <- err }()
	<-inWindow
	bDone := make(chan error, 1)
	go func() { bDone <- s.Reserve(ctx, resFor("b", "", 0)) }()
	var bErr error
	finished := false
	select {
	case bErr = <-bDone:
		finished = true
	case <-waited:
	}
	_, err := s.relay(ctx)
	must(t, "relay", err)
	var avail int64
	must(t, "read available", env.DB.QueryRow("SELECT available FROM inventory WHERE sku=?", sku).Scan(&avail))
	close(release)
	must(t, "sweep", <-swept)
	if !finished {
		bErr = <-bDone
	}
	if avail < 0 {
		t.Fatalf("MySQL available %d after a relay pass between the expiry and its append (b's reserve finished first: %v)", avail, finished)
	}
	must(t, "reserve b", bErr)
	auditClean(t, s, 1, []inventory.Ack{{OrderID: "b", SKU: sku, State: inventory.StateReserved}})
}
