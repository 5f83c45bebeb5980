package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/results"
)

// gateFile writes a report directory (its results.json) of one sustained rowlock run whose
// measured seconds made flows[i] flows at a flow P99 of p99 ms each.
func gateFile(t *testing.T, dir, name string, flows []int64, p99 float64) string {
	t.Helper()
	r := results.Run{Strategy: "rowlock", Scenario: "sustained", DurationSec: float64(len(flows)),
		LatencyMS: map[string]results.Percentiles{"flow": {P99: p99}},
		Phases:    []results.Phase{{Name: "load"}, {Name: "audit_end_of_load"}, {Name: "settle"}, {Name: "audit"}}}
	r.Audit.ConfirmedUnits = 100
	for i, f := range flows {
		r.Series = append(r.Series, results.SeriesPoint{Second: i + 1, Flows: f, FlowP99MS: p99})
		r.Flows += f
	}
	r.TPS = float64(r.Flows) / r.DurationSec
	path := filepath.Join(dir, name)
	if err := results.WriteJSON(path, &results.Results{Format: results.Format, Runs: []results.Run{r}}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCompareCLI: at the default thresholds, a re-run whose mean is past
// the limit but inside its seconds' noise exits 0 with a note giving the
// margin; a true 30 % drop exits 1 and the last line names the row.
func TestCompareCLI(t *testing.T) {
	dir := t.TempDir()
	old := gateFile(t, dir, "old.json", []int64{1150, 850, 1000, 1200, 800, 1100, 900, 1050, 950, 1000}, 100)
	cases := []struct {
		name       string
		new        string
		code       int
		out, errst string
	}{
		{"within the run's noise", gateFile(t, dir, "noise.json", []int64{900, 700, 1000, 750, 1050, 800, 950, 700, 1000, 850}, 100),
			exitOK, "TPS dropped 13.0 % (limit 10.0 %) within the run's own noise (± ", ""},
		{"30 % drop", gateFile(t, dir, "drop.json", []int64{700, 710, 690, 705, 695, 700, 700, 710, 690, 700}, 100),
			exitFailed, "REGRESSION: TPS dropped 30.0 % (limit 10.0 %) beyond the run's own noise (± ", "1 of 1 comparisons regressed: rowlock on sustained"},
		{"P99 doubles", gateFile(t, dir, "p99.json", []int64{1150, 850, 1000, 1200, 800, 1100, 900, 1050, 950, 1000}, 200),
			exitFailed, "REGRESSION: P99 rose 100.0 % (limit 20.0 %) beyond the run's own noise", "1 of 1 comparisons regressed: rowlock on sustained"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), []string{"compare", old, c.new}, &out, &errb)
			if code != c.code || !strings.Contains(out.String(), c.out) || !strings.Contains(errb.String(), c.errst) {
				t.Fatalf("exit %d, want %d; stdout %q (want %q); stderr %q (want %q)", code, c.code, out.String(), c.out, errb.String(), c.errst)
			}
		})
	}
}
