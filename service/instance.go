package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
)

// Instance is one serving strategy instance: the Handler on a listener and
// the strategy's background loop (Run: expiry, relay, reconciler), both
// started by Start and stopped by Shutdown. Its methods are safe for
// concurrent use; Shutdown is idempotent in effect (the second call finds
// everything stopped).
type Instance struct {
	s       strategies.Strategy
	h       *Handler
	srv     *http.Server
	addr    string
	stopBg  context.CancelFunc
	bgDone  chan struct{}
	failed  chan error
	once    sync.Once
	shutErr error
}

// Start serves s on ln and starts s.Run. s must be set up already (Setup
// returned); the instance owns it from here and closes it on Shutdown.
func Start(s strategies.Strategy, ln net.Listener, o HandlerOptions) *Instance {
	in := &Instance{s: s, h: NewHandler(s, o), addr: ln.Addr().String(),
		bgDone: make(chan struct{}), failed: make(chan error, 2)}
	in.h.quiesce = in.stopBackground
	in.srv = &http.Server{Handler: in.h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	bg, stop := context.WithCancel(context.Background())
	in.stopBg = stop
	go func() {
		defer close(in.bgDone)
		if err := s.Run(bg); err != nil && bg.Err() == nil {
			in.failed <- fmt.Errorf("background loop: %w", err)
		}
	}()
	go func() {
		if err := in.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			in.failed <- fmt.Errorf("serve: %w", err)
		}
	}()
	return in
}

// stopBackground stops the background loop and waits for it to return.
// Idempotent; safe for concurrent use.
func (in *Instance) stopBackground() {
	in.stopBg()
	<-in.bgDone
}

// Addr is the address the instance listens on (host:port).
func (in *Instance) Addr() string { return in.addr }

// URL is the instance's base URL.
func (in *Instance) URL() string { return "http://" + in.addr }

// Failed delivers an error when the instance stops serving on its own
// (the listener failed, or the background loop returned an error).
func (in *Instance) Failed() <-chan error { return in.failed }

// Shutdown drains the instance: health turns to 503, no new connection is
// accepted, the calls in flight finish (until ctx ends: then they are cut,
// their callers learn nothing, as in a crash), the background loop stops,
// and the strategy is closed. What a strategy keeps in its state directory
// (outbox-local's message table) stays there for the next instance.
func (in *Instance) Shutdown(ctx context.Context) error {
	in.once.Do(func() {
		in.h.Drain()
		err := in.srv.Shutdown(ctx)
		if err != nil {
			err = errors.Join(err, in.srv.Close())
		}
		in.stopBg()
		<-in.bgDone
		in.shutErr = errors.Join(err, in.s.Close())
	})
	return in.shutErr
}

// ReadStock reads every SKU's stock from the inventory table: what a
// restarted instance hands its strategy's Setup (which, on live stores,
// must not clobber anything).
func ReadStock(ctx context.Context, db *sql.DB) ([]inventory.Stock, error) {
	rows, err := db.QueryContext(ctx, "SELECT sku, total, available, occupied, sold FROM inventory ORDER BY sku")
	if err != nil {
		return nil, fmt.Errorf("read stock: %w", err)
	}
	defer rows.Close()
	var out []inventory.Stock
	for rows.Next() {
		var s inventory.Stock
		if err := rows.Scan(&s.SKU, &s.Total, &s.Available, &s.Occupied, &s.Sold); err != nil {
			return nil, fmt.Errorf("read stock: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read stock: %w", err)
	}
	return out, nil
}
