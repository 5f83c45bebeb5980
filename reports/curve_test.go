package reports

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/analysis"
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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := results.CurveVerdict(c.run, 50)
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("verdict %q, want %q", got, c.want)
			}
		})
	}
}

// TestCurveReport: results with a curve get the P99-vs-load chart and the
// curve table in index.html; results without one get neither.
func TestCurveReport(t *testing.T) {
	r, err := results.ReadJSON("testdata/results.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, withCurve := range []bool{false, true} {
		r := *r
		if withCurve {
			r.Runs = nil
			for _, rate := range []string{"100", "200", "400"} {
				for _, s := range []string{"rowlock", "batched"} {
					r.Runs = append(r.Runs, results.Run{Strategy: s, Scenario: "sustained", Param: "rate", Value: rate, Flows: 1,
						LatencyMS: map[string]results.Percentiles{"flow": {P99: float64(len(rate) * len(s))}}})
				}
			}
			r.Sweep = &results.Sweep{Param: "rate", Values: []string{"100", "200", "400"}}
			r.Curve = &results.Curve{SLOP99MS: 50, Strategies: []results.CurvePoint{{Strategy: "rowlock", MaxRate: 200, StoppedAt: 400, Why: "P99 70.0 ms > 50 ms"}, {Strategy: "batched", MaxRate: 400}}}
		}
		dir := t.TempDir()
		if err := Render(dir, analysis.Analyze(&r)); err != nil {
			t.Fatal(err)
		}
		_, err := os.Stat(filepath.Join(dir, "charts", "curve-p99.png"))
		if withCurve != (err == nil) {
			t.Errorf("curve %v: curve-p99.png exists: %v", withCurve, err == nil)
		}
		html, err := os.ReadFile(filepath.Join(dir, "index.html"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(html), "highest rate under P99"); got != withCurve {
			t.Errorf("curve %v: index.html has the curve table: %v", withCurve, got)
		}
	}
}
