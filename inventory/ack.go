package inventory

// AckRefused is the state an Ack carries for a confirm refused with
// ErrOutOfStock after the order's reserve was acknowledged: a paid buyer
// turned away, which the auditor counts as an anomaly.
const AckRefused OrderState = "refused"

// Ack is what a client was told about an order: State is StateReserved
// (Reserve returned nil), StateConfirmed (Confirm returned nil),
// StateCancelled (Cancel returned nil) or AckRefused. SKU may be empty
// except for reserve acks of strategies whose reservations live in Redis.
type Ack struct {
	OrderID string     `json:"order_id"`
	SKU     string     `json:"sku,omitempty"`
	State   OrderState `json:"state"`
}
