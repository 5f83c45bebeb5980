package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers/servertest"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// TestPeriodicAuditOverLiveOutbox runs `stockbench audit --every` beside a
// live outbox load: while the relay works, the deviation between Redis and
// the MySQL rows stays in flight and under the threshold (exit 0, no pass
// alerts); with the relay stopped (the strategy's background loop ended,
// as when the relay process dies) the unapplied events pile up and every
// pass alerts, naming the deviation (exit 1). Nothing is faked: the load,
// the relay and the audit are the real ones.
func TestPeriodicAuditOverLiveOutbox(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	env, stop, err := servertest.Start()
	if err != nil {
		t.Fatalf("servers: %v", err)
	}
	t.Cleanup(stop)
	ctx := context.Background()
	if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
		t.Fatal(err)
	}
	if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
		t.Fatal(err)
	}
	const skus = 10
	stock := make([]inventory.Stock, skus)
	for i := range stock {
		stock[i] = inventory.Stock{SKU: fmt.Sprintf("P%02d", i), Total: 1_000_000, Available: 1_000_000}
	}
	if err := inventory.LoadStock(ctx, env.DB, stock); err != nil {
		t.Fatal(err)
	}
	e, err := registry.Lookup("outbox")
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.New(strategies.Config{DB: env.DB, Redis: env.Redis, OutboxPeriod: 20 * time.Millisecond,
		OpTimeout: 10 * time.Second}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Setup(ctx, stock); err != nil {
		t.Fatal(err)
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); _ = s.Run(relayCtx) }()
	defer func() { stopRelay(); <-relayDone }()

	// Four buyers, each paced at one reserve+confirm per 20 ms.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				sku := stock[(w+i)%skus].SKU
				id := fmt.Sprintf("w%d-%d", w, i)
				if s.Reserve(loadCtx, inventory.Reservation{OrderID: id, SKU: sku, Qty: 1, Deadline: time.Now().Add(time.Minute)}) == nil {
					_ = s.Confirm(loadCtx, inventory.OrderRef{OrderID: id, SKU: sku})
				}
				select {
				case <-loadCtx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}
	defer func() { stopLoad(); wg.Wait() }()
	pending := func() int64 {
		var n int64
		if err := env.DB.QueryRow("SELECT COUNT(*) FROM outbox WHERE applied=0").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The relay deletes the events it applies: its own count says how many.
	waitfor.Until(t, "the relay applied events of the load", func() bool {
		return s.(strategies.Counters).Counters()["outbox_relayed"] >= 200
	})

	audit := func(passes int) (int, []passLine, string) {
		var out, errb bytes.Buffer
		code := Main(ctx, []string{"audit", "--mysql-dsn", env.Endpoints.MySQLDSN, "--redis-addr", env.Endpoints.RedisAddr,
			"--every", "100ms", "--passes", fmt.Sprint(passes), "--alert-over", "sku=300,total=1500"}, &out, &errb)
		var lines []passLine
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var p passLine
			if err := json.Unmarshal([]byte(l), &p); err != nil {
				t.Fatalf("not a JSON line: %q (%v)", l, err)
			}
			lines = append(lines, p)
		}
		return code, lines, out.String() + errb.String()
	}

	code, lines, text := audit(5)
	if code != exitOK || len(lines) != 5 {
		t.Fatalf("relay working: exit %d, %d lines, want 0 and 5:\n%s", code, len(lines), text)
	}
	var seen int64
	for _, l := range lines {
		if l.Alert || l.Error != "" || l.SKUs != skus {
			t.Fatalf("relay working: a pass alerted or failed:\n%s", text)
		}
		seen = max(seen, l.DeviationUnits)
	}
	t.Logf("relay working: largest total deviation %d units over 5 passes", seen)

	stopRelay()
	<-relayDone
	waitfor.Until(t, "unapplied events pile up with the relay stopped", func() bool { return pending() >= 2500 })
	code, lines, text = audit(3)
	if code != exitFailed || len(lines) != 3 {
		t.Fatalf("relay stopped: exit %d, %d lines, want 1 and 3:\n%s", code, len(lines), text)
	}
	for _, l := range lines {
		if !l.Alert || !strings.Contains(l.Reason, "total deviation") || l.OversoldUnits != 0 {
			t.Fatalf("relay stopped: a pass did not alert on the deviation:\n%s", text)
		}
	}
	t.Logf("relay stopped: %s", lines[len(lines)-1].Reason)
}
