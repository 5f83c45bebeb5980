package reports

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

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
