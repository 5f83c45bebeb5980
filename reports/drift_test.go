package reports

import (
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

func TestDriftPerMinuteLines(t *testing.T) {
	metric := func(name string) driftMetric {
		for _, m := range driftMetrics {
			if m.name == name {
				return m
			}
		}
		t.Fatalf("no drift metric %q", name)
		return driftMetric{}
	}
	share := func(steal float64) *results.MachineShare { return &results.MachineShare{StealPct: steal} }
	minutes := []results.DriftWindow{
		{FromSec: 0, ToSec: 60, FlowsPerSec: 100, Machine: share(2)},
		{FromSec: 60, ToSec: 120, FlowsPerSec: 80}, // no /proc/stat sample
		{FromSec: 120, ToSec: 180, FlowsPerSec: 60, Machine: share(25)},
		{FromSec: 180, ToSec: 190, FlowsPerSec: 1, Machine: share(90)}, // a 10 s tail
	}
	for _, tc := range []struct {
		metric  string
		minutes []results.DriftWindow
		want    plotter.XYs
	}{
		{"flows", minutes, plotter.XYs{{X: 1, Y: 100}, {X: 2, Y: 80}, {X: 3, Y: 60}}},
		{"steal", minutes, plotter.XYs{{X: 1, Y: 2}, {X: 3, Y: 25}}},
		{"steal", minutes[1:2], nil},
		{"steal", minutes[3:], plotter.XYs{{X: 190.0 / 60, Y: 90}}}, // a run of one short minute keeps it
	} {
		got := metric(tc.metric).xy(&results.Drift{Minutes: tc.minutes})
		if len(got) != len(tc.want) {
			t.Errorf("%s of %d minutes: %v, want %v", tc.metric, len(tc.minutes), got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s of %d minutes: point %d %v, want %v", tc.metric, len(tc.minutes), i, got[i], tc.want[i])
			}
		}
	}
}

func TestStolen(t *testing.T) {
	for _, tc := range []struct {
		first, last *results.MachineShare
		want        string
	}{
		{&results.MachineShare{StealPct: 4.04}, &results.MachineShare{StealPct: 3.9}, "4.0 → 3.9"},
		{&results.MachineShare{}, &results.MachineShare{StealPct: 25.26}, "0.0 → 25.3"},
		{nil, &results.MachineShare{StealPct: 1}, "–"},
		{&results.MachineShare{StealPct: 1}, nil, "–"},
	} {
		if got := stolen(tc.first, tc.last); got != tc.want {
			t.Errorf("stolen(%v, %v) = %q, want %q", tc.first, tc.last, got, tc.want)
		}
	}
}

// TestDriftInHTML: index.html carries the drift section (table, stolen
// share, verdicts) when a run has drift, and no such section otherwise.
func TestDriftInHTML(t *testing.T) {
	for _, tc := range []struct {
		name   string
		r      *results.Results
		want   []string
		absent []string
	}{
		{"with drift", everySection(t), []string{`<h2 id="drift">`, `href="#drift"`, "cores stolen %", "1.5 → 12.2", "<b class=\"bad\">relay falling behind: the oldest unapplied event's age grew from at most 0.1 s in the first 60 s to 5.0 s in the last</b>",
			"the hypervisor gave more of the machine's cores to other guests"}, []string{"10 s</td>"}},
		{"without drift", fixtureResults(t), nil, []string{`id="drift"`, `href="#drift"`, "cores stolen %"}},
	} {
		b, err := htmlPage(analysis.Analyze(tc.r), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(b), w) && !strings.Contains(string(b), strings.ReplaceAll(w, "'", "&#39;")) {
				t.Errorf("%s: index.html lacks %q", tc.name, w)
			}
		}
		for _, a := range tc.absent {
			if strings.Contains(string(b), a) {
				t.Errorf("%s: index.html has %q", tc.name, a)
			}
		}
	}
}
