package sqlstore

import (
	"context"
	"database/sql"
	"errors"
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
