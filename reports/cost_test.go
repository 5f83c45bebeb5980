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

// TestBudgetLine: the header line of a budgeted run says each tier's
// cores, the pinned ones' core ids and how the backend held them; a run
// without a budget has no line.
func TestBudgetLine(t *testing.T) {
	one, half := 1.0, 0.5
	cases := []struct {
		name, backend string
		b             *results.CPUBudget
		want          string
	}{
		{"none", "local", nil, ""},
		{"quotas on docker", "docker", &results.CPUBudget{MySQL: &one, Redis: &half, Harness: &half},
			"CPU budget: MySQL 1 core, Redis 0.5 cores, harness 0.5 cores, of 2 cores (the containers' CPU quota and cpuset; the harness a cgroup)."},
		{"pinned locally, Redis unbudgeted", "local", &results.CPUBudget{MySQL: &one, Harness: &one, CPUSet: map[string]string{"mysql": "0", "harness": "1"}},
			"CPU budget: MySQL 1 core (cpu 0), Redis unbudgeted, harness 1 core (cpu 1), of 2 cores (cgroups)."},
	}
	for _, c := range cases {
		r := &results.Results{Env: results.Env{Backend: c.backend, Cores: 2}, Runs: []results.Run{{Strategy: "rowlock", Cost: &results.Cost{Budget: c.b}}}}
		got := budgetLine(r)
		if c.want == "" && got != "" || !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestUSLChartAndTable: a buyers sweep gets the usl chart (points and a
// fitted curve per strategy, σ, κ and R² in the legend) and a table row
// per strategy in summary.md; another sweep gets neither.
func TestUSLChartAndTable(t *testing.T) {
	u := analysis.USL{Lambda: 100, Sigma: 0.2, Kappa: 0.001}
	buyers := &results.Results{Format: results.Format, Sweep: &results.Sweep{Param: "buyers", Values: []string{"1", "4", "16", "64"}}}
	for i, v := range buyers.Sweep.Values {
		n := []float64{1, 4, 16, 64}[i]
		buyers.Runs = append(buyers.Runs, results.Run{Strategy: "outbox-local", Scenario: "sustained", Param: "buyers", Value: v, TPS: u.X(n)})
	}
	other := &results.Results{Format: results.Format, Sweep: &results.Sweep{Param: "skus", Values: []string{"1", "4", "16"}}}
	for _, v := range other.Sweep.Values {
		other.Runs = append(other.Runs, results.Run{Strategy: "rowlock", Scenario: "sustained", Param: "skus", Value: v, TPS: 10})
	}
	cases := []struct {
		name   string
		r      *results.Results
		chart  bool
		legend string
		md     string
	}{
		{"buyers", buyers, true, "outbox-local σ=0.20 κ=1.0e-03 R²=1.00", "| outbox-local | sustained | 0.200 | 0.001 | 100.0 | 28 |"},
		{"skus", other, false, "", ""},
	}
	for _, c := range cases {
		a := analysis.Analyze(c.r)
		charts, err := Charts(a)
		if err != nil {
			t.Fatal(err)
		}
		var svg string
		for _, ch := range charts {
			if ch.Name == "usl" {
				svg = string(ch.SVG)
			}
		}
		if (svg != "") != c.chart {
			t.Errorf("%s: usl chart %v, want %v", c.name, svg != "", c.chart)
		}
		if c.chart && !strings.Contains(svg, c.legend) {
			t.Errorf("%s: no %q in the chart's legend", c.name, c.legend)
		}
		md := Summary(a)
		if c.md != "" && !strings.Contains(md, c.md) {
			t.Errorf("%s: no %q in summary.md:\n%s", c.name, c.md, md)
		}
		if c.md == "" && strings.Contains(md, "Universal Scalability Law") {
			t.Errorf("%s: a USL section without a buyers sweep", c.name)
		}
	}
}
