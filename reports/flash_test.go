package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/results"
)

// flashFixture: two safe strategies on one flash sale, one sold out, the
// other left 300 units unsold while it shed buyers, and an unsafe one.
func flashFixture() *results.Results {
	rss, cpu := 48.0, 12.5
	timeline := []results.FlashBucket{{AtMS: 0, UnitsLeft: 600, Reserves: 400, Refusals: 0, Sheds: 50}, {AtMS: 10, UnitsLeft: 0, Reserves: 600, Refusals: 900, Sheds: 2000, Sold: 10}}
	sale := func(sold int64, unsold int64) *results.Flash {
		return &results.Flash{Stock: 1000, Buyers: 100000, Reserved: sold, Sold: sold, SoldOut: sold >= 1000, SoldOutMS: 512.5, ReservedOutMS: 20,
			Served: sold, Refused: 90000, Shed: 10000 - sold, RefusalMS: results.Percentiles{P50: 1.5, P99: 7.25}, WinnerMS: results.Percentiles{P50: 2, P99: 9},
			EarlyBuyers: 1000, EarlyWon: 800, FairPct: 80, TurnedAway: 99000, UnsoldUnits: unsold, BucketMS: 10, Timeline: timeline}
	}
	run := func(name string, tps float64, f *results.Flash, a audit.Audit) results.Run {
		return results.Run{Strategy: name, Scenario: "flash", TPS: tps, LatencyMS: map[string]results.Percentiles{"flow": {Count: 10, P99: 10}},
			CoreLines: 300, Flash: f, Audit: a, Harness: results.Harness{PeakRSSMB: &rss, HarnessCPUMSPer1kBuyers: &cpu},
			Service: &results.Service{Inflight: 64, Queue: 256, Shed: 10000, PeakQueue: 256}}
	}
	return &results.Results{Format: results.Format, Env: results.Env{Backend: "local", Cores: 2},
		Runs: []results.Run{
			// The faster one undersold: it must still rank after the one that sold out.
			run("lua-tcc", 2000, sale(700, 300), audit.Audit{ConfirmedUnits: 700, UnsoldUnits: 300}),
			run("batched", 1000, sale(1000, 0), audit.Audit{ConfirmedUnits: 1000}),
			run("naive", 3000, sale(1200, 0), audit.Audit{ConfirmedUnits: 1200, OversoldUnits: 200, OversellRate: 200.0 / 1200}),
		}}
}

// TestFlashReport: every output format carries the sale's figures, the
// timeline charts are drawn, and undersell counts in the recommendation.
func TestFlashReport(t *testing.T) {
	r := flashFixture()
	var tb bytes.Buffer
	Table(&tb, analysis.Analyze(r))
	md := Summary(analysis.Analyze(r))
	page, err := htmlPage(analysis.Analyze(r), nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ where, text, want string }{
		{"table", tb.String(), "refusal P99"},
		{"table", tb.String(), "1000/1000"},
		{"table", tb.String(), "not sold out"},
		{"table", tb.String(), "batched, lua-tcc (did not sell out); then, UNSAFE: naive"},
		{"summary", md, "## Flash sale"},
		{"summary", md, "| lua-tcc | flash | 700 / 1000 | 20.0 | did not sell out | 100000 | 700 | 90000 | 9300 | 0 | 1.50 / 7.25 | 2.00 / 9.00 | 80.0 | 300 | 0 | 48 | 12.5 |"},
		{"summary", md, "service model 64 calls in flight, queue 256"},
		{"summary", md, "Did not sell out: up to 300 units unsold"},
		{"html", string(page), `<h2 id="flash">Flash sale</h2>`},
		{"html", string(page), "did not sell out"},
	}
	for _, c := range cases {
		if !strings.Contains(c.text, c.want) {
			t.Errorf("%s lacks %q:\n%s", c.where, c.want, c.text)
		}
	}
	charts, err := Charts(analysis.Analyze(r))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, c := range charts {
		names[c.Name] = true
	}
	for _, want := range []string{"flash-units-left", "flash-events-lua-tcc-0", "flash-events-naive-2"} {
		if !names[want] {
			t.Errorf("no chart %s among %v", want, names)
		}
	}
	recs := analysis.Recommend(r, analysis.DefaultWeights)
	if recs[0].Strategy != "batched" || recs[1].Strategy != "lua-tcc" || recs[1].Unsold != 300 || recs[2].Strategy != "naive" {
		t.Fatalf("ranking %+v", recs)
	}
}
