package analysis

import (
	"strings"
	"testing"

	"github.com/stockbench/stockbench/results"
)

// TestCurveVerdict: a curve step holds the SLO only with flows, no errors,
// no dropped arrivals and P99 within the bound.
func TestCurveVerdict(t *testing.T) {
	run := func(p99 float64, counts map[string]map[string]int64, dropped float64) results.Run {
		return results.Run{Flows: 10, LatencyMS: map[string]results.Percentiles{"flow": {P99: p99}}, Counts: counts,
			Harness: results.Harness{OpenDropped: int64(dropped)}}
	}
	ok := map[string]map[string]int64{"reserve": {"ok": 10, "out_of_stock": 3}, "confirm": {"ok": 10, "already_final": 1}}
	cases := []struct {
		name string
		run  results.Run
		want string // "" holds; else a word the reason must contain
	}{
		{"within the bound", run(49, ok, 0), ""},
		{"past the bound", run(51, ok, 0), "P99"},
		{"a conflict is an error", run(10, map[string]map[string]int64{"reserve": {"ok": 9, "conflict": 1}}, 0), "errors"},
		{"a timeout is an error", run(10, map[string]map[string]int64{"confirm": {"timeout": 2}}, 0), "errors"},
		{"dropped arrivals", run(10, ok, 3), "dropped"},
		{"no flows", results.Run{}, "no completed flows"},
		// A rate held by overselling is no rate held.
		{"unsafe", func() results.Run { r := run(10, ok, 0); r.Audit.OversoldUnits = 1; return r }(), "UNSAFE: 1 oversold units"},
		// A rate whose audit did not finish is not proven held.
		{"unproven", func() results.Run { r := run(10, ok, 0); r.Incomplete = "audit"; return r }(), "unproven"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CurveStepOf(c.run, 50).Why()
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("verdict %q, want %q", got, c.want)
			}
		})
	}
}
