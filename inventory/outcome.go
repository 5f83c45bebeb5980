package inventory

import (
	"context"
	"errors"
	"net"

	"github.com/go-sql-driver/mysql"
)

// Outcome is the class of one operation's result, as counted in
// results.json (runs[].counts) and shown in the reports.
type Outcome string

// The outcome classes.
const (
	OK         Outcome = "ok"
	OutOfStock Outcome = "out_of_stock"
	// LimitExceeded is a reserve refused because the buyer already holds
	// its per-buyer limit of the SKU (ErrLimitExceeded): an answer, and a
	// refusal of its own, not a lack of stock.
	LimitExceeded Outcome = "limit"
	Conflict      Outcome = "conflict"
	AlreadyFinal  Outcome = "already_final"
	UnknownOrder  Outcome = "unknown_order"
	// NotConfirmed is a refund refused because the order was reserved but
	// never confirmed (ErrNotConfirmed): an answer, nothing changed.
	NotConfirmed    Outcome = "not_confirmed"
	OutcomeUnknown  Outcome = "outcome_unknown"
	Deadlock        Outcome = "deadlock"
	LockWaitTimeout Outcome = "lock_wait_timeout"
	Timeout         Outcome = "timeout"
	Canceled        Outcome = "canceled"
	Failure         Outcome = "error"
	// Busy is a request the service shed before it reached the store: its
	// in-flight limit and queue were full (the harness's service model).
	// It is an answer, not an error: a refusal the buyer gets fast.
	Busy Outcome = "busy"
)

// ErrBusy is the service model's fast refusal of a request it has no room
// for. The request never reached the store, so it had no effect.
var ErrBusy = errors.New("service busy")

// MySQL server error numbers the layers agree on: a lock wait past
// innodb_lock_wait_timeout, and a deadlock victim (also how a Galera
// certification failure arrives).
const (
	MySQLLockWaitTimeout = 1205
	MySQLDeadlock        = 1213
)

// Failed reports whether the outcome is an error rather than an answer:
// ok, out of stock, the per-buyer limit, already final and not confirmed
// (a refund of an unpaid order) are answers a healthy store gives.
func (o Outcome) Failed() bool {
	return o != OK && o != OutOfStock && o != AlreadyFinal && o != Busy && o != LimitExceeded && o != NotConfirmed
}

// Classify names an operation's outcome class.
func Classify(err error) Outcome {
	var me *mysql.MySQLError
	var ne net.Error
	switch {
	case err == nil:
		return OK
	case errors.Is(err, ErrOutOfStock):
		return OutOfStock
	case errors.Is(err, ErrLimitExceeded):
		return LimitExceeded
	case errors.Is(err, ErrBusy):
		return Busy
	case errors.Is(err, ErrConflict):
		return Conflict
	case errors.Is(err, ErrAlreadyFinal):
		return AlreadyFinal
	case errors.Is(err, ErrUnknownOrder):
		return UnknownOrder
	case errors.Is(err, ErrNotConfirmed):
		return NotConfirmed
	case errors.Is(err, ErrOutcomeUnknown):
		return OutcomeUnknown
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	case errors.Is(err, context.Canceled):
		return Canceled
	// A read cut at the context's deadline (go-redis sets it on the
	// connection) arrives as an I/O timeout, not as the context's error.
	case errors.As(err, &ne) && ne.Timeout():
		return Timeout
	case errors.As(err, &me) && me.Number == MySQLDeadlock:
		return Deadlock
	case errors.As(err, &me) && me.Number == MySQLLockWaitTimeout:
		return LockWaitTimeout
	default:
		return Failure
	}
}
