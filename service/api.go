// Package service is the order API in front of one strategy instance: the
// HTTP/1.1 JSON handler that `stockbench serve` runs (Handler, Instance) and
// the typed client (Client) that speaks it and implements
// strategies.Strategy, so the runner can drive a remote instance exactly as
// it drives one in its own process. docs/api.md documents the protocol.
//
// Every answer carries an outcome — one of inventory's outcome classes — in
// its JSON body and a distinct HTTP status per sentinel error (Statuses);
// the client maps the outcome back to the same sentinel, so errors.Is and
// inventory.Classify give the same answer on both sides of the wire.
// Idempotency is the strategy's: every call is keyed by its order (or
// restock) id, and a retry of a call whose reply was lost gets the same
// outcome.
package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-sql-driver/mysql"

	"github.com/stockbench/stockbench/inventory"
)

// The API's paths. Every operation is a POST of a JSON body; health is a GET.
const (
	PathReserve = "/v1/reserve"
	PathConfirm = "/v1/confirm"
	PathCancel  = "/v1/cancel"
	PathRefund  = "/v1/refund"
	PathRestock = "/v1/restock"
	PathSettle  = "/v1/settle"
	PathQuiesce = "/v1/quiesce"
	PathHealth  = "/v1/health"
)

// ReserveRequest is the body of POST /v1/reserve. The deadline is given
// either as TTLMillis (from the moment the service receives the call) or as
// DeadlineMillis (Unix milliseconds: what the typed client sends, so that a
// retry carries the very same reservation); exactly one of them.
type ReserveRequest struct {
	OrderID        string `json:"order_id"`
	SKU            string `json:"sku"`
	Qty            int64  `json:"qty"`
	Buyer          string `json:"buyer,omitempty"`
	Limit          int64  `json:"limit,omitempty"`
	TTLMillis      int64  `json:"ttl_ms,omitempty"`
	DeadlineMillis int64  `json:"deadline_ms,omitempty"`
}

// OrderRequest is the body of POST /v1/confirm, /v1/cancel and /v1/refund.
type OrderRequest struct {
	OrderID string `json:"order_id"`
	SKU     string `json:"sku"`
}

// RestockRequest is the body of POST /v1/restock. ID names the restock: a
// repeat with the same id changes nothing.
type RestockRequest struct {
	ID  string `json:"id"`
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

// Reply is the body of every answer to an operation: the outcome class and,
// when it is not ok, the service's one-line error.
type Reply struct {
	Outcome inventory.Outcome `json:"outcome"`
	Error   string            `json:"error,omitempty"`
}

// Health is the body of GET /v1/health: 200 with status "ok" once the
// instance serves, 503 with "draining" once it is shutting down.
type Health struct {
	Status   string `json:"status"`
	Strategy string `json:"strategy"`
	PID      int    `json:"pid"`
	// Inflight is the number of operations running now.
	Inflight int64 `json:"inflight"`
	// Served counts the operations answered, by outcome class.
	Served map[inventory.Outcome]int64 `json:"served"`
	// ClockOffsetMillis is the offset of the instance's wall clock
	// (serve --clock-offset, an svc-clock fault), when it has one.
	ClockOffsetMillis int64 `json:"clock_offset_ms,omitempty"`
	// Background is "running", or "stopped" once POST /v1/quiesce
	// stopped the background loop.
	Background string `json:"background"`
	// Counters are the strategy's own figures (strategies.Counters),
	// when it keeps any: relay lag, rebuilds, refusals of a late member…
	Counters map[string]float64 `json:"counters,omitempty"`
}

// OutcomeBadRequest is the outcome of a call the service could not read
// (malformed JSON, a missing field): nothing was done.
const OutcomeBadRequest inventory.Outcome = "bad_request"

// ErrBadRequest is what the client returns for a bad_request answer.
var ErrBadRequest = errors.New("bad request")

// ErrUnavailable wraps inventory.ErrBusy for a call that never reached the
// service (its connection was refused: the instance is down or
// restarting). Like busy, it had no effect and may be retried.
var ErrUnavailable = errors.New("service unavailable")

// Statuses maps each outcome class to its HTTP status. The sentinels'
// statuses are distinct; the 5xx are failures whose body's outcome says
// which (a deadlock and any other error share 500, the two timeouts 504).
var Statuses = map[inventory.Outcome]int{
	inventory.OK:              http.StatusOK,
	inventory.OutOfStock:      http.StatusConflict,           // 409
	inventory.LimitExceeded:   http.StatusForbidden,          // 403
	inventory.AlreadyFinal:    http.StatusGone,               // 410
	inventory.UnknownOrder:    http.StatusNotFound,           // 404
	inventory.NotConfirmed:    http.StatusPreconditionFailed, // 412: refund of an unpaid order
	inventory.Conflict:        http.StatusLocked,             // 423
	inventory.Busy:            http.StatusTooManyRequests,    // 429
	OutcomeBadRequest:         http.StatusBadRequest,         // 400
	inventory.OutcomeUnknown:  http.StatusBadGateway,         // 502
	inventory.Canceled:        http.StatusServiceUnavailable, // 503: cut by a shutdown
	inventory.Timeout:         http.StatusGatewayTimeout,     // 504
	inventory.LockWaitTimeout: http.StatusGatewayTimeout,     // 504
	inventory.Deadlock:        http.StatusInternalServerError,
	inventory.Failure:         http.StatusInternalServerError,
}

// statusOf is the HTTP status of an outcome (500 for one not in Statuses).
func statusOf(o inventory.Outcome) int {
	if s, ok := Statuses[o]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// RemoteError is an error answer of the service: the operation, the
// outcome class and the service's message. It unwraps to the sentinel the
// outcome stands for (inventory.ErrOutOfStock for out_of_stock, …; a
// *mysql.MySQLError with the server's number for deadlock and
// lock_wait_timeout), so inventory.Classify of a RemoteError is its
// Outcome.
type RemoteError struct {
	Op      string
	Outcome inventory.Outcome
	Msg     string
	cause   error
}

func (e *RemoteError) Error() string {
	if e.Msg == "" {
		return "service " + e.Op + ": " + string(e.Outcome)
	}
	return "service " + e.Op + ": " + e.Msg
}

// Unwrap returns the sentinel of the outcome (nil for a plain failure).
func (e *RemoteError) Unwrap() error { return e.cause }

// NewRemoteError is the error a client reports for an answer of outcome
// o with the service's message msg: what Client returns, for code that
// reads answers itself.
func NewRemoteError(op string, o inventory.Outcome, msg string) *RemoteError {
	return &RemoteError{Op: op, Outcome: o, Msg: msg, cause: sentinelOf(o)}
}

// sentinelOf is the error an outcome class stands for on the client's side
// (nil for error and any class it does not know).
func sentinelOf(o inventory.Outcome) error {
	switch o {
	case inventory.OutOfStock:
		return inventory.ErrOutOfStock
	case inventory.LimitExceeded:
		return inventory.ErrLimitExceeded
	case inventory.AlreadyFinal:
		return inventory.ErrAlreadyFinal
	case inventory.UnknownOrder:
		return inventory.ErrUnknownOrder
	case inventory.NotConfirmed:
		return inventory.ErrNotConfirmed
	case inventory.Conflict:
		return inventory.ErrConflict
	case inventory.Busy:
		return inventory.ErrBusy
	case inventory.OutcomeUnknown, inventory.Canceled:
		// Canceled: the service cut the operation (it is shutting down):
		// whether it took effect is not known.
		return inventory.ErrOutcomeUnknown
	case inventory.Timeout:
		return errTimeout
	case inventory.Deadlock:
		return &mysql.MySQLError{Number: inventory.MySQLDeadlock, Message: "deadlock (in the service)"}
	case inventory.LockWaitTimeout:
		return &mysql.MySQLError{Number: inventory.MySQLLockWaitTimeout, Message: "lock wait timeout (in the service)"}
	case OutcomeBadRequest:
		return ErrBadRequest
	}
	return nil
}

// errTimeout is the service's operation timeout as the client reports it:
// it wraps context.DeadlineExceeded (classified timeout), though the
// client's own context did not end.
var errTimeout = fmt.Errorf("operation timed out in the service: %w", context.DeadlineExceeded)
