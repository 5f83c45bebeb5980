package service_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/service"
)

// TestVegeta drives a served strategy with vegeta's attacker — a client
// no one here wrote — for a bounded number of requests (reserves, confirms
// and cancels racing on the same orders, idempotent repeats, restocks, and
// a hot SKU that sells out), turns the answers into the acks the clients
// got, and audits the stores: clean after settle, no unit oversold.
func TestVegeta(t *testing.T) {
	const (
		requests = 1200
		rate     = 600 // per second: about two seconds of load
	)
	for _, name := range []string{"lua-tcc", "rowlock"} {
		t.Run(name, func(t *testing.T) {
			stock := map[string]int64{"HOT": 40, "A": 10000, "B": 10000}
			s := serve(t, name, stock, service.HandlerOptions{OpTimeout: 10 * time.Second, Inflight: 64, Queue: 256})
			skus := []string{"HOT", "A", "B"}
			hdr := http.Header{"Content-Type": []string{"application/json"}}
			var n atomic.Int64
			// Target n, in four kinds by n mod 4, about order k = n/4: a
			// reserve of k; a confirm of k-8; a cancel of k-8 for every
			// fourth k (racing the confirm: exactly one may win), else a
			// repeat of k-8's confirm; a restock of HOT for every tenth k,
			// else a repeat of k's reserve. The order and what the call is
			// go in the query string, which the API ignores, so each result
			// names its call.
			targeter := func(tgt *vegeta.Target) error {
				i := n.Add(1) - 1
				if i >= requests {
					return vegeta.ErrNoTargets
				}
				k := i / 4
				op, id, sku := "reserve", fmt.Sprintf("v-%d", k), skus[k%3]
				var body any = service.ReserveRequest{OrderID: id, SKU: sku, Qty: 1, TTLMillis: 3_600_000}
				switch i % 4 {
				case 1, 2:
					op, id, sku = "confirm", fmt.Sprintf("v-%d", k-8), skus[((k-8)%3+3)%3]
					if i%4 == 2 && k%4 == 0 {
						op = "cancel"
					}
					body = service.OrderRequest{OrderID: id, SKU: sku}
				case 3:
					if k%10 == 0 {
						op, id, sku = "restock", fmt.Sprintf("r-%d", k), "HOT"
						body = service.RestockRequest{ID: id, SKU: sku, Qty: 1}
					}
				}
				b, err := json.Marshal(body)
				if err != nil {
					return err
				}
				*tgt = vegeta.Target{Method: http.MethodPost, URL: s.in.URL() + "/v1/" + op + "?order=" + id + "&sku=" + sku,
					Body: b, Header: hdr}
				return nil
			}
			atk := vegeta.NewAttacker(vegeta.KeepAlive(true), vegeta.Workers(16), vegeta.MaxWorkers(256), vegeta.Timeout(30*time.Second))
			var m vegeta.Metrics
			codes := map[uint16]int{}
			for res := range atk.Attack(targeter, vegeta.Rate{Freq: rate, Per: time.Second}, time.Minute, "stockbench") {
				if res.Error == vegeta.ErrNoTargets.Error() {
					// A worker found the targets exhausted: no request.
					continue
				}
				m.Add(res)
				codes[res.Code]++
				u, err := url.Parse(res.URL)
				if err != nil {
					t.Fatal(err)
				}
				q := u.Query()
				id, sku := q.Get("order"), q.Get("sku")
				var state inventory.OrderState
				qty := int64(0)
				switch u.Path {
				case service.PathReserve:
					state = inventory.StateReserved
				case service.PathConfirm:
					state = inventory.StateConfirmed
				case service.PathCancel:
					state = inventory.StateCancelled
				case service.PathRestock:
					state, qty = inventory.AckRestocked, 1
					if res.Code != http.StatusOK {
						state = inventory.AckRestockUnknown
					}
				}
				if res.Code == http.StatusOK || state == inventory.AckRestockUnknown {
					s.ack(inventory.Ack{OrderID: id, SKU: sku, State: state, Qty: qty})
				}
			}
			m.Close()
			t.Logf("%s: %d requests at %.0f/s achieved (asked %d/s), throughput %.0f/s, P99 %s, status codes %v",
				name, m.Requests, m.Rate, rate, m.Throughput, m.Latencies.P99, codes)
			if m.Requests != requests {
				t.Errorf("vegeta sent %d requests, want %d", m.Requests, requests)
			}
			// Every answer is one of the API's: no transport error, no 5xx.
			for code, c := range codes {
				if code == 0 || code >= 500 {
					t.Errorf("%d answers with status %d (errors: %v)", c, code, m.Errors)
				}
			}
			if codes[http.StatusConflict] == 0 {
				t.Errorf("no reserve was refused as out of stock (409): the hot SKU should sell out: %v", codes)
			}
			a := s.audit()
			t.Logf("%s: audit after settle: %d anomalies, %d confirmed units, %d oversold", name, a.Anomalies, a.ConfirmedUnits, a.OversoldUnits)
			if a.ConfirmedUnits == 0 {
				t.Error("no unit confirmed: the load did not reach the stores")
			}
		})
	}
}
