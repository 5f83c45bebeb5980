package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/stockbench/stockbench/inventory"
)

// TestClassify: every error a strategy returns lands in one outcome class,
// wrapped or not, and only ok, out_of_stock, already_final and busy are answers.
func TestClassify(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		want   inventory.Outcome
		failed bool
	}{
		{"nil", nil, inventory.OK, false},
		{"out of stock, wrapped", fmt.Errorf("reserve x: %w", inventory.ErrOutOfStock), inventory.OutOfStock, false},
		{"already final", inventory.ErrAlreadyFinal, inventory.AlreadyFinal, false},
		{"shed by the service model", fmt.Errorf("reserve: %w", inventory.ErrBusy), inventory.Busy, false},
		{"conflict", inventory.ErrConflict, inventory.Conflict, true},
		{"unknown order", inventory.ErrUnknownOrder, inventory.UnknownOrder, true},
		{"refund of an unpaid order", inventory.ErrNotConfirmed, inventory.NotConfirmed, false},
		{"outcome unknown", fmt.Errorf("%w: commit: broken pipe", inventory.ErrOutcomeUnknown), inventory.OutcomeUnknown, true},
		{"deadline", fmt.Errorf("reserve: %w", context.DeadlineExceeded), inventory.Timeout, true},
		{"canceled", context.Canceled, inventory.Canceled, true},
		{"read cut at the deadline (go-redis)", fmt.Errorf("evalsha: %w", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), inventory.Timeout, true},
		{"deadlock (or a Galera certification failure)", &mysql.MySQLError{Number: inventory.MySQLDeadlock}, inventory.Deadlock, true},
		{"lock wait timeout, wrapped", fmt.Errorf("confirm: %w", &mysql.MySQLError{Number: inventory.MySQLLockWaitTimeout}), inventory.LockWaitTimeout, true},
		{"another server error", &mysql.MySQLError{Number: 1146}, inventory.Failure, true},
		{"anything else", errors.New("connection refused"), inventory.Failure, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := inventory.Classify(c.err)
			if got != c.want || got.Failed() != c.failed {
				t.Fatalf("Classify = %q (failed %v), want %q (failed %v)", got, got.Failed(), c.want, c.failed)
			}
		})
	}
}
