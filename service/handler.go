package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
)

// HandlerOptions shape a Handler.
type HandlerOptions struct {
	// OpTimeout bounds each operation in the strategy (0: no bound beyond
	// the request's own context).
	OpTimeout time.Duration
	// Inflight bounds the operations running in the strategy at once
	// (0: no bound). A call beyond it waits for a slot while fewer than
	// Queue others wait, and is otherwise answered busy (429) at once,
	// without reaching the store.
	Inflight int
	// Queue is how many calls may wait for a slot (with Inflight > 0).
	Queue int
}

// maxBody bounds a request body: every request is a few short fields.
const maxBody = 64 << 10

// outcomes lists the outcome classes a Handler counts, in a fixed order.
var outcomes = []inventory.Outcome{inventory.OK, inventory.OutOfStock, inventory.LimitExceeded, inventory.AlreadyFinal,
	inventory.UnknownOrder, inventory.NotConfirmed, inventory.Conflict, inventory.Busy, OutcomeBadRequest, inventory.OutcomeUnknown,
	inventory.Canceled, inventory.Timeout, inventory.LockWaitTimeout, inventory.Deadlock, inventory.Failure}

// Handler serves the order API over one strategy instance. It is safe for
// concurrent use: each request runs the strategy's method on the request's
// context (bounded by OpTimeout), so concurrent requests are concurrent
// calls of the strategy, whose idempotency by order id the API keeps: a
// repeated request gets the outcome the strategy gives a repeat. The
// strategy's background loop (Run) is not the handler's: Instance runs it.
type Handler struct {
	s         strategies.Strategy
	o         HandlerOptions
	mux       *http.ServeMux
	slots     chan struct{}
	waiting   atomic.Int64
	inflight  atomic.Int64
	draining  atomic.Bool
	served    []atomic.Int64 // by index in outcomes
	okReply   []byte
	healthPID int
	// quiesce stops the background loop (set by Instance; nil: the
	// handler has no loop to stop, and quiesce answers ok at once).
	quiesce  func()
	quiesced atomic.Bool
}

// NewHandler serves s.
func NewHandler(s strategies.Strategy, o HandlerOptions) *Handler {
	h := &Handler{s: s, o: o, mux: http.NewServeMux(), served: make([]atomic.Int64, len(outcomes)), healthPID: os.Getpid()}
	if o.Inflight > 0 {
		h.slots = make(chan struct{}, o.Inflight)
	}
	h.okReply, _ = json.Marshal(Reply{Outcome: inventory.OK})
	h.okReply = append(h.okReply, '\n')
	h.mux.HandleFunc("POST "+PathReserve, h.reserve)
	h.mux.HandleFunc("POST "+PathConfirm, h.confirm)
	h.mux.HandleFunc("POST "+PathCancel, h.cancel)
	h.mux.HandleFunc("POST "+PathRefund, h.refund)
	h.mux.HandleFunc("POST "+PathRestock, h.restock)
	h.mux.HandleFunc("POST "+PathSettle, h.settle)
	h.mux.HandleFunc("POST "+PathQuiesce, h.quiesceBackground)
	h.mux.HandleFunc("GET "+PathHealth, h.health)
	return h
}

// ServeHTTP routes a request; an unknown path is 404, a wrong method 405.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Drain marks the instance as shutting down: health answers 503 from now
// on, so balancers stop sending to it. Operations still run. Idempotent.
func (h *Handler) Drain() { h.draining.Store(true) }

func (h *Handler) reserve(w http.ResponseWriter, r *http.Request) {
	var req ReserveRequest
	if !h.decode(w, r, &req) {
		return
	}
	var deadline time.Time
	switch {
	case req.OrderID == "" || req.SKU == "":
		h.bad(w, errors.New("order_id and sku are required"))
		return
	case req.Qty <= 0:
		h.bad(w, errors.New("qty must be positive"))
		return
	case req.Limit < 0:
		h.bad(w, errors.New("limit must not be negative"))
		return
	case (req.TTLMillis > 0) == (req.DeadlineMillis > 0):
		h.bad(w, errors.New("give one of ttl_ms or deadline_ms, positive"))
		return
	case req.TTLMillis > 0:
		deadline = clock.Now().Add(time.Duration(req.TTLMillis) * time.Millisecond)
	default:
		deadline = time.UnixMilli(req.DeadlineMillis)
	}
	res := inventory.Reservation{OrderID: req.OrderID, SKU: req.SKU, Qty: req.Qty, Deadline: deadline, Buyer: req.Buyer, Limit: req.Limit}
	h.run(w, r, func(ctx context.Context) error { return h.s.Reserve(ctx, res) })
}

func (h *Handler) confirm(w http.ResponseWriter, r *http.Request) {
	var req OrderRequest
	if !h.decodeOrder(w, r, &req) {
		return
	}
	h.run(w, r, func(ctx context.Context) error { return h.s.Confirm(ctx, inventory.OrderRef(req)) })
}

func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	var req OrderRequest
	if !h.decodeOrder(w, r, &req) {
		return
	}
	h.run(w, r, func(ctx context.Context) error { return h.s.Cancel(ctx, inventory.OrderRef(req)) })
}

func (h *Handler) refund(w http.ResponseWriter, r *http.Request) {
	var req OrderRequest
	if !h.decodeOrder(w, r, &req) {
		return
	}
	h.run(w, r, func(ctx context.Context) error { return h.s.Refund(ctx, inventory.OrderRef(req)) })
}

func (h *Handler) restock(w http.ResponseWriter, r *http.Request) {
	var req RestockRequest
	if !h.decode(w, r, &req) {
		return
	}
	if req.ID == "" || req.SKU == "" || req.Qty <= 0 {
		h.bad(w, errors.New("id, sku and a positive qty are required"))
		return
	}
	h.run(w, r, func(ctx context.Context) error {
		return h.s.Restock(ctx, inventory.Restock(req))
	})
}

// settle drains the strategy's asynchronous work (Strategy.Settle): what a
// run does before its final audit. It is not bounded by OpTimeout, only by
// the request.
func (h *Handler) settle(w http.ResponseWriter, r *http.Request) {
	err := h.s.Settle(r.Context())
	h.answer(w, inventory.Classify(err), err)
}

// quiesceBackground stops the instance's background loop (expiry sweeper,
// relay, reconciler) and answers once it has returned: what a run does at
// the end of load, so that its audits and its settle see the stores still
// (as the in-process instance's loop is stopped then). Operations and
// settle still work; the loop is not started again. Idempotent.
func (h *Handler) quiesceBackground(w http.ResponseWriter, r *http.Request) {
	if h.quiesce != nil {
		h.quiesce()
	}
	h.quiesced.Store(true)
	h.answer(w, inventory.OK, nil)
}

func (h *Handler) health(w http.ResponseWriter, r *http.Request) {
	hl := Health{Status: "ok", Strategy: h.s.Name(), PID: h.healthPID, Inflight: h.inflight.Load(),
		Served: make(map[inventory.Outcome]int64, len(outcomes)), ClockOffsetMillis: clock.Offset().Milliseconds(), Background: "running"}
	if h.quiesced.Load() {
		hl.Background = "stopped"
	}
	if c, ok := h.s.(strategies.Counters); ok {
		hl.Counters = c.Counters()
	}
	for i, o := range outcomes {
		if n := h.served[i].Load(); n > 0 {
			hl.Served[o] = n
		}
	}
	status := http.StatusOK
	if h.draining.Load() {
		hl.Status, status = "draining", http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(hl)
}

func (h *Handler) decodeOrder(w http.ResponseWriter, r *http.Request, req *OrderRequest) bool {
	if !h.decode(w, r, req) {
		return false
	}
	if req.OrderID == "" || req.SKU == "" {
		h.bad(w, errors.New("order_id and sku are required"))
		return false
	}
	return true
}

// decode reads the JSON body into v; unknown fields are refused, so a
// misspelt field is an error rather than a silent default.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		h.bad(w, fmt.Errorf("body: %w", err))
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		h.bad(w, errors.New("body: one JSON object expected"))
		return false
	}
	return true
}

func (h *Handler) bad(w http.ResponseWriter, err error) { h.answer(w, OutcomeBadRequest, err) }

// run calls op under the in-flight bound and the operation timeout and
// answers with its outcome.
func (h *Handler) run(w http.ResponseWriter, r *http.Request, op func(context.Context) error) {
	if h.slots != nil {
		select {
		case h.slots <- struct{}{}:
		default:
			if h.waiting.Add(1) > int64(h.o.Queue) {
				h.waiting.Add(-1)
				h.answer(w, inventory.Busy, inventory.ErrBusy)
				return
			}
			select {
			case h.slots <- struct{}{}:
				h.waiting.Add(-1)
			case <-r.Context().Done():
				h.waiting.Add(-1)
				h.answer(w, inventory.Busy, inventory.ErrBusy)
				return
			}
		}
		defer func() { <-h.slots }()
	}
	ctx := r.Context()
	if h.o.OpTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.o.OpTimeout)
		defer cancel()
	}
	h.inflight.Add(1)
	err := op(ctx)
	h.inflight.Add(-1)
	h.answer(w, inventory.Classify(err), err)
}

// answer writes outcome o (err's message when not ok) with its status.
func (h *Handler) answer(w http.ResponseWriter, o inventory.Outcome, err error) {
	for i, c := range outcomes {
		if c == o {
			h.served[i].Add(1)
			break
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(statusOf(o))
	if o == inventory.OK {
		_, _ = w.Write(h.okReply)
		return
	}
	rep := Reply{Outcome: o}
	if err != nil {
		rep.Error = err.Error()
	}
	_ = json.NewEncoder(w).Encode(rep)
}
