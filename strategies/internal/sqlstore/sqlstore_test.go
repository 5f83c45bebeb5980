package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers/servertest"
)

var env servertest.Env

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, &env)) }

// TestRetryPause checks the pause between transaction retries: none after
// the first failure, then a draw from a window doubling from firstPause to
// maxPause, and a give-up once the pause would end past the time left.
func TestRetryPause(t *testing.T) {
	highest := func(n time.Duration) time.Duration { return n - 1 }
	long := time.Hour
	cases := []struct {
		name       string
		attempt    int
		left       time.Duration
		want       time.Duration
		wantGiveUp bool
	}{
		{"first retry is immediate", 1, long, 0, false},
		{"second draws up to firstPause", 2, long, firstPause, false},
		{"then the window doubles", 4, long, 4 * firstPause, false},
		{"up to maxPause", 9, long, maxPause, false},
		{"and stays there, however many attempts", 10000, long, maxPause, false},
		{"a pause ending past the deadline gives up", 9, maxPause - 1, maxPause, true},
		{"no time left: give up even an immediate retry", 1, 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, giveUp := retryPause(c.attempt, c.left, highest)
			if got != c.want || giveUp != c.wantGiveUp {
				t.Fatalf("retryPause(%d, %s) = %s, %v; want %s, %v", c.attempt, c.left, got, giveUp, c.want, c.wantGiveUp)
			}
		})
	}
}

// conflict is the error a deadlock, a Galera certification failure and a
// brute-force abort all reach the client as.
var conflict = &mysql.MySQLError{Number: errDeadlock, Message: "Deadlock found when trying to get lock; try restarting transaction"}

// TestInTxRetriesPastAnyCount: without a deadline a transaction that keeps
// conflicting is retried until it goes through — far more often than the
// 40 attempts a fixed count used to allow, which a hot row written on
// several Galera primaries exceeded.
func TestInTxRetriesPastAnyCount(t *testing.T) {
	const failures = 60
	attempts := 0
	err := InTx(context.Background(), env.DB, func(tx *sql.Tx) error {
		attempts++
		if attempts <= failures {
			return conflict
		}
		return nil
	})
	if err != nil || attempts != failures+1 {
		t.Fatalf("InTx = %v after %d attempts, want success after %d", err, attempts, failures+1)
	}
}

// deadlineSoon is a context whose deadline has come but that has not been
// cancelled yet: the moment just before the operation timeout fires.
type deadlineSoon struct{ context.Context }

func (deadlineSoon) Deadline() (time.Time, bool) { return time.Now(), true }

// TestInTxGivesUpAsConflict: when no retry can finish before the deadline,
// InTx gives up with the conflict itself — classified as a deadlock (or,
// on a cluster, a certification failure), not as a timeout — and does not
// run the transaction again.
func TestInTxGivesUpAsConflict(t *testing.T) {
	attempts := 0
	err := InTx(deadlineSoon{context.Background()}, env.DB, func(tx *sql.Tx) error {
		attempts++
		return conflict
	})
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != errDeadlock || errors.Is(err, context.DeadlineExceeded) || attempts != 1 {
		t.Fatalf("InTx = %v after %d attempts, want the deadlock error after 1", err, attempts)
	}
}

// TestInTxStopsWhenCancelled: a cancelled context stops the retries; the
// error says both why it stopped and what the last attempt met.
func TestInTxStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	attempts := 0
	err := InTx(ctx, env.DB, func(tx *sql.Tx) error {
		attempts++
		if attempts == 3 {
			cancel()
		}
		return conflict
	})
	var me *mysql.MySQLError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &me) || attempts != 3 {
		t.Fatalf("InTx = %v after %d attempts, want canceled with the deadlock after 3", err, attempts)
	}
}

// TestInTxKeep: fn's one error decides — nil commits, an error rolls back
// and comes back, Keep(outcome) commits and the outcome comes back.
func TestInTxKeep(t *testing.T) {
	ctx := context.Background()
	if _, err := env.DB.Exec("CREATE TABLE IF NOT EXISTS keep_probe (id VARCHAR(100) PRIMARY KEY) COMMENT='stockbench'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.DB.Exec("DROP TABLE IF EXISTS keep_probe") })
	failed := errors.New("business rule broken")
	cases := []struct {
		name        string
		ret         error
		want        error // nil: InTx returns nil
		wantRowKept bool
	}{
		{"nil commits", nil, nil, true},
		{"an error rolls back and is returned", failed, failed, false},
		{"Keep commits and returns the outcome", Keep(inventory.ErrAlreadyFinal), inventory.ErrAlreadyFinal, true},
		{"Keep(nil) is a plain commit", Keep(nil), nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := InTx(ctx, env.DB, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO keep_probe VALUES (?)", c.name); err != nil {
					return err
				}
				return c.ret
			})
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("InTx = %v, want %v", err, c.want)
			}
			var n int
			if err := env.DB.QueryRow("SELECT COUNT(*) FROM keep_probe WHERE id=?", c.name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if (n == 1) != c.wantRowKept {
				t.Fatalf("row kept = %v, want %v", n == 1, c.wantRowKept)
			}
		})
	}
}

// serverCount is one of the server's global status counters (Questions:
// statements received; Com_commit: commits).
func serverCount(t *testing.T, name string) int64 {
	t.Helper()
	var n int64
	if err := env.DB.QueryRow("SHOW GLOBAL STATUS LIKE ?", name).Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestExpireDueInBatches fails if the expiry decides due orders one
// transaction each: a backlog must cost a commit (and a wait for the
// SKU's stock row) per batch of a SKU's orders, and about one statement per
// order (its move) plus one per buyer hold given back. Under load one
// transaction per order expired fewer orders a second than buyers
// abandoned, and an hour's backlog outgrew settle's deadline (issue #27).
// It counts commits and statements on the server, never time; orders not
// due or already decided are left alone, and each expiry is reported once.
// Pending (what settle's deadline grows with) counts the reserved orders.
func TestExpireDueInBatches(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name         string
		skus, orders int // due orders, spread over skus SKUs
	}{
		{"nothing due", 1, 0},
		{"a few of one SKU share one transaction", 1, 5},
		{"a backlog of several SKUs: batches per SKU", 3, 1000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			past := time.Now().Add(-time.Minute)
			var rows []Order
			occupied := map[string]int64{}
			held := map[[2]string]int64{}
			buyers := 0
			for i := range c.orders {
				o := Order{ID: fmt.Sprintf("due-%04d", i), SKU: fmt.Sprintf("sku-%d", i%c.skus), Qty: 1 + int64(i%2),
					State: inventory.StateReserved, ExpiresAt: sql.NullTime{Time: past, Valid: true}}
				if i%2 == 0 {
					o.Buyer = fmt.Sprintf("buyer-%d", i%7)
					held[[2]string{o.SKU, o.Buyer}] += o.Qty
					buyers++
				}
				occupied[o.SKU] += o.Qty
				rows = append(rows, o)
			}
			// Left alone: a reservation not yet due, an order already confirmed.
			live := Order{ID: "live", SKU: "sku-0", Qty: 1, State: inventory.StateReserved,
				ExpiresAt: sql.NullTime{Time: time.Now().Add(time.Hour), Valid: true}}
			sold := Order{ID: "sold", SKU: "sku-0", Qty: 1, State: inventory.StateConfirmed, ExpiresAt: sql.NullTime{Time: past, Valid: true}}
			occupied["sku-0"]++
			rows = append(rows, live, sold)
			var stock []inventory.Stock
			for i := range c.skus {
				sku := fmt.Sprintf("sku-%d", i)
				stock = append(stock, inventory.Stock{SKU: sku, Total: 5000, Available: 5000 - occupied[sku], Occupied: occupied[sku]})
			}
			if err := inventory.LoadStock(ctx, env.DB, stock); err != nil {
				t.Fatal(err)
			}
			for start := 0; start < len(rows); start += 500 {
				if err := InsertOrderRows(ctx, env.DB, rows[start:min(start+500, len(rows))]); err != nil {
					t.Fatal(err)
				}
			}
			for k, n := range held {
				if _, err := env.DB.Exec("INSERT INTO buyer_holds (sku, buyer, held) VALUES (?,?,?)", k[0], k[1], n); err != nil {
					t.Fatal(err)
				}
			}

			reported := map[string]int{}
			o := Orders{DB: env.DB, Move: GuardedMove, OnFinal: func(_ context.Context, ref inventory.OrderRef, to inventory.OrderState, marker bool) {
				if to == inventory.StateExpired && !marker {
					reported[ref.OrderID]++
				}
			}}
			base := Base{Orders: o}
			if n, err := base.Pending(ctx); err != nil || n != int64(c.orders+1) {
				t.Fatalf("Pending = %d, %v; want the %d reserved orders", n, err, c.orders+1)
			}
			commits0, stmts0 := serverCount(t, "Com_commit"), serverCount(t, "Questions")
			n, err := o.ExpireDue(ctx)
			commits := serverCount(t, "Com_commit") - commits0
			stmts := serverCount(t, "Questions") - stmts0 - 2 // the two SHOW STATUS after ExpireDue
			if err != nil || n != c.orders {
				t.Fatalf("ExpireDue = %d, %v; want %d expired", n, err, c.orders)
			}
			t.Logf("%d due orders of %d SKUs: %d commits, %d statements", c.orders, c.skus, commits, stmts)

			listings := int64(c.orders/expireBatchSize + 1)
			maxCommits := int64(c.orders/expireTxOrders) + listings*int64(c.skus)
			if c.orders == 0 {
				maxCommits = 0
			}
			// Per order its move, per buyer hold its release; per
			// transaction begin, lock, states, commit; per listing one query.
			maxStmts := int64(c.orders+buyers) + 4*maxCommits + listings
			if commits > maxCommits {
				t.Errorf("%d commits for %d due orders, want at most %d (a transaction per order?)", commits, c.orders, maxCommits)
			}
			if stmts > maxStmts {
				t.Errorf("%d statements for %d due orders, want at most %d", stmts, c.orders, maxStmts)
			}

			if n, err := base.Pending(ctx); err != nil || n != 1 {
				t.Errorf("Pending after the expiry = %d, %v; want 1 (the live reservation)", n, err)
			}
			if len(reported) != c.orders {
				t.Errorf("OnFinal reported %d expiries, want %d", len(reported), c.orders)
			}
			for id, k := range reported {
				if k != 1 {
					t.Errorf("OnFinal reported %s %d times", id, k)
				}
			}
			for _, r := range rows {
				st, err := StateOf(ctx, env.DB, r.ID)
				want := inventory.StateExpired
				if r.ID == live.ID || r.ID == sold.ID {
					want = r.State
				}
				if err != nil || st != want {
					t.Fatalf("order %s is %s (%v), want %s", r.ID, st, err, want)
				}
			}
			for _, s := range stock {
				var avail, occ int64
				if err := env.DB.QueryRow("SELECT available, occupied FROM inventory WHERE sku=?", s.SKU).Scan(&avail, &occ); err != nil {
					t.Fatal(err)
				}
				wantOcc := int64(0)
				if s.SKU == "sku-0" {
					wantOcc = 1 // the live reservation
				}
				if occ != wantOcc || avail != s.Total-wantOcc {
					t.Errorf("%s: available %d, occupied %d; want %d, %d", s.SKU, avail, occ, s.Total-wantOcc, wantOcc)
				}
			}
			var stillHeld int64
			if err := env.DB.QueryRow("SELECT COALESCE(SUM(held),0) FROM buyer_holds").Scan(&stillHeld); err != nil {
				t.Fatal(err)
			}
			if stillHeld != 0 {
				t.Errorf("buyers still hold %d units after every order of theirs expired", stillHeld)
			}
		})
	}
}
