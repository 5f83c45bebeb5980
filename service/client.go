package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
)

// Balance is how a Client with several instances picks one per call.
type Balance string

// The balancing policies.
const (
	// RoundRobin sends each call to the next instance in turn.
	RoundRobin Balance = "round-robin"
	// BySKU sends every call about a SKU to the same instance (a hash of
	// the SKU), so one instance sees all of a SKU's traffic.
	BySKU Balance = "sku"
)

// ClientOptions shape a Client.
type ClientOptions struct {
	// Name is what Name returns: the strategy the instances serve.
	Name string
	// Balance picks an instance per call (default RoundRobin).
	Balance Balance
	// Conns bounds the idle keep-alive connections kept per instance
	// (default 256).
	Conns int
}

// Client calls one or more service instances over the API and implements
// strategies.Strategy, so the runner drives remote instances as it drives
// a strategy in its own process: every answer comes back as the sentinel
// error the strategy gave (inventory.Classify agrees on both sides). Safe
// for concurrent use. A call is sent once; a reply that was lost after the
// request may have reached the instance is ErrOutcomeUnknown, and a retry
// with the same order id is safe (the API is idempotent by order id). A
// call refused at connect (the instance is down) is ErrUnavailable, which
// wraps inventory.ErrBusy: it had no effect.
type Client struct {
	o    ClientOptions
	urls []string
	next atomic.Uint64
	hc   *http.Client
	bufs sync.Pool
}

var _ strategies.Strategy = (*Client)(nil)

// NewClient calls the instances at urls (base URLs, http://host:port).
func NewClient(o ClientOptions, urls ...string) (*Client, error) {
	if len(urls) == 0 {
		return nil, errors.New("service client: no instance URL")
	}
	if o.Balance == "" {
		o.Balance = RoundRobin
	}
	if o.Balance != RoundRobin && o.Balance != BySKU {
		return nil, fmt.Errorf("service client: balance %q: want %s or %s", o.Balance, RoundRobin, BySKU)
	}
	if o.Conns <= 0 {
		o.Conns = 256
	}
	c := &Client{o: o, urls: make([]string, len(urls))}
	for i, u := range urls {
		c.urls[i] = strings.TrimSuffix(u, "/")
	}
	c.hc = &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        o.Conns * len(urls),
		MaxIdleConnsPerHost: o.Conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
	c.bufs.New = func() any { return new(bytes.Buffer) }
	return c, nil
}

// URLs are the instances' base URLs.
func (c *Client) URLs() []string { return c.urls }

// Name is ClientOptions.Name.
func (c *Client) Name() string { return c.o.Name }

// setupWait bounds how long Setup waits for an instance that announced
// itself to answer its health check: only a dead or hung instance takes it.
const setupWait = 2 * time.Minute

// Setup waits until every instance answers its health check with 200 (the
// instances set up their strategies themselves when they start), at most
// setupWait; stock is not sent.
func (c *Client) Setup(ctx context.Context, _ []inventory.Stock) error {
	ctx, cancel := context.WithTimeout(ctx, setupWait)
	defer cancel()
	for _, u := range c.urls {
		if err := WaitHealthy(ctx, c.hc, u); err != nil {
			return err
		}
	}
	return nil
}

// Reserve sends POST /v1/reserve with the reservation's deadline as Unix
// milliseconds, so a retry carries the same reservation.
func (c *Client) Reserve(ctx context.Context, r inventory.Reservation) error {
	return c.call(ctx, "reserve", PathReserve, r.SKU, r.OrderID, ReserveRequest{OrderID: r.OrderID, SKU: r.SKU, Qty: r.Qty,
		Buyer: r.Buyer, Limit: r.Limit, DeadlineMillis: r.Deadline.UnixMilli()})
}

// Confirm sends POST /v1/confirm.
func (c *Client) Confirm(ctx context.Context, o inventory.OrderRef) error {
	return c.call(ctx, "confirm", PathConfirm, o.SKU, o.OrderID, OrderRequest(o))
}

// Cancel sends POST /v1/cancel.
func (c *Client) Cancel(ctx context.Context, o inventory.OrderRef) error {
	return c.call(ctx, "cancel", PathCancel, o.SKU, o.OrderID, OrderRequest(o))
}

// Refund sends POST /v1/refund.
func (c *Client) Refund(ctx context.Context, o inventory.OrderRef) error {
	return c.call(ctx, "refund", PathRefund, o.SKU, o.OrderID, OrderRequest(o))
}

// Restock sends POST /v1/restock.
func (c *Client) Restock(ctx context.Context, r inventory.Restock) error {
	return c.call(ctx, "restock", PathRestock, r.SKU, r.ID, RestockRequest(r))
}

// Run waits for ctx to end (the background loops run inside the
// instances), then stops every instance's loop.
func (c *Client) Run(ctx context.Context) error {
	<-ctx.Done()
	// The end of load (or of the run): every instance's background loop
	// is stopped (POST /v1/quiesce) before the caller audits and settles,
	// as an in-process strategy's loop is — a sweeper still deciding
	// expiries between the audit's reads of Redis and MySQL would show
	// as drift that is not there.
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var errs []error
	for _, u := range c.urls {
		if err := c.send(qctx, "quiesce", u+PathQuiesce, "", struct{}{}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Settle asks every instance to drain its asynchronous work (POST
// /v1/settle), one after the other.
func (c *Client) Settle(ctx context.Context) error {
	for _, u := range c.urls {
		if err := c.send(ctx, "settle", u+PathSettle, "", struct{}{}); err != nil {
			return err
		}
	}
	return nil
}

var _ strategies.Counters = (*Client)(nil)

// Counters gathers the strategy's own figures from every instance's health
// answer: counts are summed; a figure named as a latency, a maximum or a
// time (…_ms, …_max…, …lag…) is the largest of the instances'. An
// instance that does not answer is left out (its figures since its last
// start are lost with it; a restarted instance counts from zero).
func (c *Client) Counters() map[string]float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := map[string]float64{}
	for _, u := range c.urls {
		h, err := ReadHealth(ctx, c.hc, u)
		if err != nil {
			continue
		}
		for k, v := range h.Counters {
			out[k] = mergeCounter(k, out[k], v)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// mergeCounter folds one instance's figure v into the running a.
func mergeCounter(name string, a, v float64) float64 {
	if strings.HasSuffix(name, "_ms") || strings.Contains(name, "_max") || strings.Contains(name, "lag") {
		return max(a, v)
	}
	return a + v
}

// Close closes the idle connections. The instances keep running.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// pick is the base URL of the instance for a call about sku.
func (c *Client) pick(sku string) string {
	if len(c.urls) == 1 {
		return c.urls[0]
	}
	if c.o.Balance == BySKU {
		h := fnv.New32a()
		_, _ = h.Write([]byte(sku))
		return c.urls[h.Sum32()%uint32(len(c.urls))]
	}
	return c.urls[(c.next.Add(1)-1)%uint64(len(c.urls))]
}

func (c *Client) call(ctx context.Context, op, path, sku, key string, body any) error {
	return c.send(ctx, op, c.pick(sku)+path, key, body)
}

// send posts body to url and maps the answer to an error. key, when set,
// goes in the Idempotency-Key header: the call is idempotent by it, which
// lets the transport resend a request whose reused keep-alive connection
// the server had closed before reading it.
func (c *Client) send(ctx context.Context, op, url, key string, body any) error {
	buf := c.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer c.bufs.Put(buf)
	if err := json.NewEncoder(buf).Encode(body); err != nil {
		return fmt.Errorf("service %s: %w", op, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(buf.Bytes()))
	if err != nil {
		return fmt.Errorf("service %s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return transportError(ctx, op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	var rep Reply
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&rep); err != nil || rep.Outcome == "" {
		if ctx.Err() != nil {
			return transportError(ctx, op, ctx.Err())
		}
		// Not an answer of this API (a proxy's page?): the call may have
		// done anything.
		return fmt.Errorf("service %s: HTTP %d without an outcome: %w", op, resp.StatusCode, inventory.ErrOutcomeUnknown)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return NewRemoteError(op, rep.Outcome, rep.Error)
}

// transportError classifies a call that got no answer: the caller's own
// context ended (its error, as in process), the connection was refused
// (nothing was sent: ErrUnavailable), or the request may have arrived and
// its reply was lost (ErrOutcomeUnknown).
func transportError(ctx context.Context, op string, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("service %s: %w", op, ctx.Err())
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("service %s: %w: %w (%v)", op, ErrUnavailable, inventory.ErrBusy, err)
	default:
		return fmt.Errorf("service %s: %w: %w", op, inventory.ErrOutcomeUnknown, err)
	}
}

// WaitHealthy waits until GET url/v1/health answers 200, or ctx ends. It
// polls with a growing pause (1ms to 100ms): readiness is an event only
// the instance can announce. hc nil: http.DefaultClient.
func WaitHealthy(ctx context.Context, hc *http.Client, url string) error {
	if hc == nil {
		hc = http.DefaultClient
	}
	pause := time.Millisecond
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+PathHealth, nil)
		if err != nil {
			return fmt.Errorf("health: %w", err)
		}
		resp, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("health of %s: %w", url, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// ReadHealth reads GET url/v1/health (whatever its status: a draining
// instance answers 503 with its figures). hc nil: http.DefaultClient.
func ReadHealth(ctx context.Context, hc *http.Client, url string) (Health, error) {
	var h Health
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+PathHealth, nil)
	if err != nil {
		return h, fmt.Errorf("health: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return h, fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&h); err != nil {
		return h, fmt.Errorf("health of %s: HTTP %d: %w", url, resp.StatusCode, err)
	}
	return h, nil
}
