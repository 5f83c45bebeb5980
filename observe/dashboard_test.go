package observe

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/results"
)

// TestDashboard: the page is served self-contained, and live.json carries
// each run's seconds, then its final figures.
func TestDashboard(t *testing.T) {
	if _, err := ListenDashboard("0.0.0.0:0"); err == nil {
		t.Fatal("a non-loopback dashboard was served")
	}
	d, err := ListenDashboard("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := http.Get("http://" + d.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	page := get("/")
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := page.Body.Read(buf)
		b.WriteString(string(buf[:n]))
		if err != nil {
			break
		}
	}
	page.Body.Close()
	if html := b.String(); !strings.Contains(html, "live.json") || strings.Contains(html, "http://") || strings.Contains(html, "https://") || strings.Contains(html, "src=") {
		t.Fatalf("the page is not self-contained or does not poll live.json:\n%s", html)
	}
	read := func() []DashRun {
		t.Helper()
		resp := get("/live.json")
		defer resp.Body.Close()
		var v struct{ Runs []DashRun }
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v.Runs
	}
	if runs := read(); len(runs) != 0 {
		t.Fatalf("runs before any: %+v", runs)
	}
	r := d.Begin(Labels{Strategy: "outbox", Scenario: "sustained"})
	lag := 12.5
	r.Second(Second{At: time.Second, Flows: 100, P99MS: 3, Violations: 0}, &lag, &results.StoreSecond{MySQLRowLockTimeMS: 7})
	r.Second(Second{At: 2 * time.Second, Flows: 120, P99MS: 4, Violations: 2}, nil, nil)
	runs := read()
	if len(runs) != 1 || len(runs[0].Points) != 2 || runs[0].Points[1].Flows != 120 || runs[0].Violations != 2 ||
		*runs[0].Points[0].RelayLagMS != 12.5 || runs[0].Stores.RowLockMSPerSec != 7 || runs[0].Done {
		t.Fatalf("live.json during the run: %+v", runs)
	}
	r.End(results.Run{TPS: 110, Flows: 220, Audit: audit.Audit{OversoldUnits: 2},
		Aborted: &results.Abort{Threshold: "anomaly", BreachedAtSec: 1.5, Reason: "x"}})
	runs = read()
	if f := runs[0].Final; !runs[0].Done || f == nil || f.TPS != 110 || f.Oversold != 2 || f.Anomalies == 0 || runs[0].Aborted == "" {
		t.Fatalf("live.json after the run: %+v", runs[0])
	}
	var nilRun *DashRun
	nilRun.Second(Second{}, nil, nil)
	nilRun.End(results.Run{})
}
