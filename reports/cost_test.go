package reports

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

// TestUSLLines: a buyers sweep prints each strategy's fit within the
// terminal's width, and a strategy that cannot be fitted says why.
func TestUSLLines(t *testing.T) {
	u := analysis.USL{Lambda: 100, Sigma: 0.2, Kappa: 0.001}
	r := &results.Results{Format: results.Format, Sweep: &results.Sweep{Param: "buyers", Values: []string{"1", "4", "16", "64"}}}
	for i, v := range r.Sweep.Values {
		n := []float64{1, 4, 16, 64}[i]
		r.Runs = append(r.Runs, results.Run{Strategy: "outbox-local", Scenario: "sustained", Param: "buyers", Value: v, TPS: u.X(n)})
	}
	r.Runs = append(r.Runs, results.Run{Strategy: "cas", Scenario: "sustained", Param: "buyers", Value: "1", TPS: 5})
	var b bytes.Buffer
	uslLines(&b, analysis.Analyze(r))
	out := b.String()
	for _, want := range []string{"USL outbox-local (sustained): σ=0.200", "peak N*=28 buyers", "R²=1.000 over 4 runs", "USL cas (sustained): no fit"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > terminalWidth {
			t.Errorf("line of %d columns: %q", n, line)
		}
	}
}
