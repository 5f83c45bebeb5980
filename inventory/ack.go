package inventory

// AckRefused is the state an Ack carries for a confirm refused after the
// order's reserve was acknowledged — with ErrOutOfStock, ErrUnknownOrder,
// or ErrAlreadyFinal before the reservation's deadline (the client did not
// cancel it): a paid buyer turned away, which the auditor counts as an
// anomaly.
const AckRefused OrderState = "refused"

// AckRestocked and AckRestockUnknown are the states an Ack carries for a
// restock the harness issued (OrderID is then the restock id, Qty its
// units): Restock returned nil, or returned an error after which the restock
// may or may not have been applied. The auditor matches both against the
// restock journal: an acknowledged restock must be in it, an unknown one is
// counted exactly as the journal says, and a journal row no ack names is
// stock nobody put in.
const (
	AckRestocked      OrderState = "restocked"
	AckRestockUnknown OrderState = "restock-unknown"
)

// IsRestock reports whether the ack is about a restock, not an order.
func (a Ack) IsRestock() bool { return a.State == AckRestocked || a.State == AckRestockUnknown }

// Ack is what a client was told about an order: State is StateReserved
// (Reserve returned nil), StateConfirmed (Confirm returned nil),
// StateCancelled (Cancel returned nil), StateRefunded (Refund returned nil)
// or AckRefused — or about a restock
// (AckRestocked, AckRestockUnknown; Qty set). SKU may be empty except for
// reserve acks of strategies whose reservations live in Redis, and restocks.
type Ack struct {
	OrderID string     `json:"order_id"`
	SKU     string     `json:"sku,omitempty"`
	State   OrderState `json:"state"`
	Qty     int64      `json:"qty,omitempty"`
}
