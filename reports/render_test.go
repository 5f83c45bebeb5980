package reports

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/results"
)

func fixture() *results.Results {
	return &results.Results{Format: results.Format, Config: results.Config{Seed: 1},
		Env: results.Env{Backend: "local", MySQLVersion: "10.11", RedisVersion: "7.0", Cores: 2},
		Runs: []results.Run{
			{Strategy: "rowlock", Scenario: "flash", TPS: 170.5, LatencyMS: map[string]results.Percentiles{"flow": {Count: 100, P99: 88.1}},
				Counts: map[string]map[string]int64{"reserve": {"ok": 100, "out_of_stock": 20}}, CoreLines: 212,
				Audit: audit.Audit{ConfirmedUnits: 100}},
			{Strategy: "naive", Scenario: "flash", TPS: 230, LatencyMS: map[string]results.Percentiles{"flow": {Count: 120, P99: 25}},
				Audit: audit.Audit{ConfirmedUnits: 120, OversoldUnits: 20, OversellRate: 20.0 / 120, InvariantViolations: 1,
					Violations: []string{"mysql FLASH-1: sold 100 != confirmed orders 120"}}},
			{Strategy: "outbox", Scenario: "flash", TPS: 300, LatencyMS: map[string]results.Percentiles{"flow": {Count: 100, P99: 9}},
				Incomplete: "settle", Errors: []string{"settle (deadline 2m0s): context deadline exceeded"}},
		}}
}

// TestRendering: the table and summary carry each run's headline figures.
func TestRendering(t *testing.T) {
	r := fixture()
	r.Runs[0].Units = map[string]int64{"reserved": 100, "sold": 100, "refunded": 3}
	r.Runs[0].LatencyMS["refund"] = results.Percentiles{Count: 3, P50: 1.5, P90: 2, P99: 2.5, P999: 2.5, Max: 2.5}
	var tb bytes.Buffer
	Table(&tb, analysis.Analyze(r))
	md := Summary(analysis.Analyze(r))
	cases := []struct{ where, text, want string }{
		{"table", tb.String(), "16.667"},                 // naive's oversell %
		{"table", tb.String(), "170.5"},                  // rowlock TPS
		{"table", tb.String(), "UNSAFE"},                 // naive is marked
		{"table", tb.String(), "1 invariant violations"}, // what made naive UNSAFE
		{"table", tb.String(), "unproven"},               // outbox has no verdict, not a blank UNSAFE
		{"table", tb.String(), "UNPROVEN outbox (flash): settle did not finish"},
		{"table", tb.String(), "recommended, best first: rowlock; then, UNPROVEN (see why above): outbox; then, UNSAFE: naive"},
		{"summary", md, "lost acks"}, // lost acks and cancel-ack violations apart
		{"summary", md, "cancel-ack violations"},
		{"summary", md, "| rowlock | flash | 170.5 | 88.10 | 0 | 0 | 0.000 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | n/a | 212 | n/a | ok |"}, // classic row
		{"summary", md, "sold 100 != confirmed orders 120"},                                                                       // violation text
		{"summary", md, "reserve (ok 100, out_of_stock 20)"},                                                                      // outcome counts
		{"summary", md, "units (reserved 100, sold 100, refunded 3)"},                                                             // units moved
		{"summary", md, "| rowlock | flash | refund | 3 | 1.50 | 2.00 | 2.50 | 2.50 | 2.50 |"},                                    // refund latency
	}
	for _, c := range cases {
		if !strings.Contains(c.text, c.want) {
			t.Errorf("%s lacks %q:\n%s", c.where, c.want, c.text)
		}
	}
	if strings.Contains(tb.String(), "UNSAFE outbox") {
		t.Errorf("an incomplete run with no anomaly is called UNSAFE:\n%s", tb.String())
	}
}

// TestTableFitsTerminal: the terminal table stays within TerminalWidth
// columns, even with repeats, a sweep label and every strategy; the
// anomaly classes of an UNSAFE row are named under it.
func TestTableFitsTerminal(t *testing.T) {
	r := &results.Results{Format: results.Format}
	for _, s := range []string{"rowlock", "cas", "conditional", "lua-tcc", "outbox", "batched", "naive"} {
		for rep := 1; rep <= 3; rep++ {
			r.Runs = append(r.Runs, results.Run{Strategy: s, Scenario: "sustained", Param: "buyers", Value: "100000", Repeat: rep,
				TPS: 12345.6 * float64(rep), Flows: 1234567, LatencyMS: map[string]results.Percentiles{"flow": {P99: 12345.67}},
				Harness: results.Harness{ServerCPUPct: results.Float(187.5)}, CoreLines: 1234,
				Audit: audit.Audit{ConfirmedUnits: 1000000, OversoldUnits: 123456, OversellRate: 0.123456, StaleReservations: 7},
				// The widest cost row: a budget-bound label, six-figure costs.
				Cost: &results.Cost{Flows: 1234567, Cores: 64, MySQLCPUUSPerFlow: results.Float(123456), RedisCPUUSPerFlow: results.Float(123456),
					HarnessCPUUSPerFlow: results.Float(123456), HarnessCPUPct: results.Float(99.9), MySQLTripsPerFlow: results.Float(1234.5),
					RowLockMSPerFlow: results.Float(12345.67), PoolWaitMSPerFlow: 12345.67, Budget: &results.CPUBudget{Harness: results.Float(0.1)}}})
		}
	}
	var tb bytes.Buffer
	Table(&tb, analysis.Analyze(r))
	for _, line := range strings.Split(tb.String(), "\n") {
		if n := utf8.RuneCountInString(line); n > terminalWidth {
			t.Errorf("line of %d columns (> %d): %q", n, terminalWidth, line)
		}
	}
	if !strings.Contains(tb.String(), "harness-cpu 999%") {
		t.Errorf("no bound-by verdict in the cost table:\n%s", tb.String())
	}
	if !strings.Contains(tb.String(), "UNSAFE naive (sustained buyers=100000): 370368 oversold units, 21 stale reservations") {
		t.Errorf("no per-class line for an UNSAFE row:\n%s", tb.String())
	}
}
