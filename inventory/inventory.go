// Package inventory holds the domain of stockbench: stock of a SKU, orders and
// their states, the sentinel errors every strategy speaks and the typed
// outcome classes they are counted in, acks, the shared MySQL schema and
// Redis key layout, and the run lock. The Strategy contract is in
// strategies; the auditor in audit.
package inventory

import (
	"errors"
	"time"
)

// Stock is the stock of one SKU. The invariant is
// Total = Available + Occupied + Sold with every field ≥ 0.
type Stock struct {
	SKU       string `json:"sku"`
	Total     int64  `json:"total"`
	Available int64  `json:"available"`
	Occupied  int64  `json:"occupied"`
	Sold      int64  `json:"sold"`
}

// OrderState is the state of an order in the orders table.
type OrderState string

// The order states. An order moves Reserved → Confirmed | Cancelled | Expired
// exactly once, and a confirmed order may then move once more, to Refunded
// (its units go back from sold to available); every state but Reserved is
// final for a reserve, confirm or cancel.
const (
	StateReserved  OrderState = "reserved"
	StateConfirmed OrderState = "confirmed"
	StateCancelled OrderState = "cancelled"
	StateExpired   OrderState = "expired"
	StateRefunded  OrderState = "refunded"
)

// Final reports whether s is one of the final states.
func (s OrderState) Final() bool {
	return s == StateConfirmed || s == StateCancelled || s == StateExpired || s == StateRefunded
}

// Reservation asks for Qty units of SKU on behalf of order OrderID, to be
// confirmed before Deadline or released.
type Reservation struct {
	OrderID  string
	SKU      string
	Qty      int64
	Deadline time.Time
	// Buyer names who reserves ("" for no one in particular). A
	// reservation with a Buyer is counted against the buyer's allowance
	// of SKU while it is reserved or confirmed (a cancel or expiry gives
	// it back), and its order row carries the buyer.
	Buyer string
	// Limit, when positive, caps the units Buyer may hold (reserved or
	// confirmed) of SKU: a reserve that would pass it fails with
	// ErrLimitExceeded and changes nothing. 0: no limit. Ignored without
	// a Buyer.
	Limit int64
}

// Restock is one restock: Qty units added to the SKU's total and available.
// ID names it uniquely within a run (the harness issues it); the stores
// journal it in the same transaction as the total, so a restock applies at
// most once per ID and the journal says whether it applied.
type Restock struct {
	ID  string
	SKU string
	Qty int64
}

// DeadlineResolution is the one resolution at which every store keeps a
// reservation's deadline: Redis as Unix milliseconds, MySQL's DATETIME(6)
// truncated to the same millisecond. With one resolution, "past its
// deadline" means the same instant in both stores, so the auditor's stale
// rule and the sweepers need no slack between them.
const DeadlineResolution = time.Millisecond

// StoredDeadline is d as every store keeps it: truncated to
// DeadlineResolution (as time.UnixMilli truncates), in UTC. The zero time
// stays zero. Pure; safe for concurrent use.
func StoredDeadline(d time.Time) time.Time {
	if d.IsZero() {
		return d
	}
	return time.UnixMilli(d.UnixMilli()).UTC()
}

// OrderRef names an existing (or, for a cancel, possibly unknown) order. The
// SKU is the one the client reserved; strategies read the quantity from their
// own records, never from the caller.
type OrderRef struct {
	OrderID string
	SKU     string
}

// Sentinel errors. Strategies wrap them with %w; callers classify with errors.Is.
var (
	// ErrOutOfStock: the reservation was refused because too little stock was available.
	ErrOutOfStock = errors.New("out of stock")
	// ErrConflict: optimistic retries were exhausted; nothing changed.
	ErrConflict = errors.New("conflict: retries exhausted")
	// ErrAlreadyFinal: the order is already in a final state that the
	// operation cannot move it out of (confirm after cancel, cancel after
	// confirm, reserve after cancel, refund after cancel or expiry, confirm
	// or cancel after refund). Nothing changed.
	ErrAlreadyFinal = errors.New("order already final")
	// ErrUnknownOrder: confirm or refund of an order the strategy never
	// reserved.
	ErrUnknownOrder = errors.New("unknown order")
	// ErrNotConfirmed: refund of an order that is reserved but not
	// confirmed (nothing was sold to give back). Nothing changed.
	ErrNotConfirmed = errors.New("order not confirmed")
	// ErrLimitExceeded: the reservation was refused because the buyer
	// already holds Reservation.Limit units of the SKU (or would pass it);
	// nothing changed. Not a lack of stock.
	ErrLimitExceeded = errors.New("per-buyer limit reached")
	// ErrOutcomeUnknown: the operation may or may not have taken effect (for
	// example a commit whose answer was lost). Unlike the other sentinels it
	// does not mean "nothing changed".
	ErrOutcomeUnknown = errors.New("outcome unknown")
)
