package reports

import (
	"bytes"
	"fmt"
	"html"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/results"
)

// TestGoldenEverySection pins summary.md and the terminal table of a
// results file that turns on every section the fixed golden run leaves
// out, and of a flash sale, so that a change to any section's layout shows
// up as a diff.
func TestGoldenEverySection(t *testing.T) {
	cases := []struct {
		name string
		r    *results.Results
	}{
		{"every-section", everySection(t)},
		{"flash", flashFixture()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			golden(t, c.name+".md", []byte(Summary(analysis.Analyze(c.r))))
			var b bytes.Buffer
			Table(&b, analysis.Analyze(c.r))
			golden(t, c.name+".term", b.Bytes())
			page, err := htmlPage(analysis.Analyze(c.r), nil)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name+".html", page)
		})
	}
}

// TestHTMLEveryClass: index.html's audit table has a column for every
// anomaly class of audit's table, and each run's count of every class
// the auditor found in it is on the page — not a hand-picked few.
func TestHTMLEveryClass(t *testing.T) {
	r := fixtureResults(t)
	page, err := htmlPage(analysis.Analyze(r), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	i := strings.Index(s, `<h2 id="audit">`)
	if i < 0 {
		t.Fatal("no audit section")
	}
	section := s[i:]
	section = section[:strings.Index(section, "</table>")]
	for _, c := range audit.Classes {
		if !strings.Contains(section, "<th>"+html.EscapeString(c.Title)+"</th>") {
			t.Errorf("the audit table has no column %q", c.Title)
		}
	}
	tripped := 0
	for _, run := range r.Runs {
		if run.Strategy != "naive" {
			continue
		}
		for _, c := range audit.Classes {
			if n := c.Of(run.Audit); n > 0 {
				tripped++
				cell := fmt.Sprintf(`<td class="bad">%d</td>`, n)
				if c.Severity != audit.Unsafe {
					cell = fmt.Sprintf(`<td>%d</td>`, n)
				}
				if !strings.Contains(section, cell) {
					t.Errorf("naive %s: %d %s not on the page", run.Scenario, n, c.Title)
				}
			}
		}
	}
	if tripped < 2 {
		t.Fatalf("the fixture's naive trips %d classes: the test shows nothing", tripped)
	}
}

// everySection is the golden fixture with every optional section of the
// report turned on: interrupted, article preset, an RTT sweep with repeats,
// two audits, faults, drift, generators, the service model.
func everySection(t *testing.T) *results.Results {
	r := fixtureResults(t)
	r.Interrupted = true
	r.Config.Preset = ArticlePreset
	r.Config.RTT = "same-zone"
	r.Config.Swept = []string{"rtt"}
	r.Env.RedisClusterNodes = 3
	r.Env.ClusterOnOneHost = true
	r.Env.LoadAverage = "1.0 2.0 3.0"
	r.Sweep = &results.Sweep{Param: "rtt", Values: []string{"0.5ms", "2ms"}}
	lag := 12.5
	for i := range r.Runs {
		run := &r.Runs[i]
		run.Param, run.Value = "rtt", r.Sweep.Values[i%2]
		run.Repeat = i%3 + 1
		m, rd := 0.5+float64(i)/10, 0.25+float64(i)/7
		run.Harness.MySQLRTTMS, run.Harness.RedisRTTMS = &m, &rd
		if i%2 == 0 {
			eol := run.Audit
			eol.LeakedUnits += 3
			run.AuditEndOfLoad = &eol
			run.SettleRepaired = map[string]int64{"leaked units": -3, "drift units": 2}
		}
		run.Errors = append(run.Errors, "boom")
		run.Audit.Violations = append(run.Audit.Violations, "v1")
		if i < 3 {
			run.Shards = []results.ShardInfo{{Index: 0, Of: 2, Host: "h", Container: "c", PID: 9, HarnessCPUPct: 190, Cores: 2, Saturated: true, Flows: 4, TPS: 2, FlowP99MS: 3}, {Index: 1, Of: 2, Host: "g"}}
			run.Faults = []results.FaultEvent{{Spec: "redis-pause@5s+3s", Kind: "pause", Target: "redis", StartSec: 5, EndSec: 8, Applied: true}, {Spec: "latency@1s", Kind: "latency", Error: "x"}}
			rec := -1.0
			if i == 1 {
				rec = 2.5
			}
			run.FaultImpact = &results.FaultImpact{OutageSec: 3, RecoverSec: &rec, ErrorsInWindow: map[string]int64{"timeout": 4, "error": 1}, UnitsLost: 1}
			// The first run's relay falls behind (a judged minute window);
			// the second's flows fall as the hypervisor takes more (a long
			// run's); the third's windows are seconds: not reported.
			firstLag, lastLag := lag, lag
			if i == 0 {
				firstLag, lastLag = 100, 5000
			}
			run.Drift = &results.Drift{WindowSec: 60, EverySec: 5, First: results.DriftWindow{FlowsPerSec: 10, FlowP99MS: 2, HarnessRSSBytes: 5 * mib, OrdersRows: 100, HistoryLength: 30, RelayLagMaxMS: &firstLag},
				Last: results.DriftWindow{FlowsPerSec: 9, FlowP99MS: 3, HarnessRSSBytes: 7 * mib, OrdersRows: 200, DiskReadsPerSec: 4, RelayLagMaxMS: &lastLag, HistoryLength: 900}, FlowsChangePct: -10, P99ChangePct: 50}
			if i == 1 {
				run.Drift.WindowSec = 300
				run.Drift.First.CPUMSPerFlow, run.Drift.First.RefCPUMS = map[string]float64{"mysql": 1, "harness": 1}, 10
				run.Drift.Last.CPUMSPerFlow, run.Drift.Last.RefCPUMS = map[string]float64{"mysql": 1.05, "harness": 1}, 10
			}
			if i == 2 {
				run.Drift.WindowSec = 10
			}
			if i < 2 { // the third run's machine was not sampled: "–"
				run.Drift.First.Machine = &results.MachineShare{KernelPct: 30, StealPct: 1.5, IdlePct: 8}
				run.Drift.Last.Machine = &results.MachineShare{KernelPct: 28, StealPct: 12.25, IdlePct: 10}
			}
			run.Service = &results.Service{Inflight: 4, Queue: 8, Shed: 2, PeakQueue: 3}
		}
	}
	r.Aggregates = []results.Aggregate{{Strategy: "a", Scenario: "b", Repeats: 3, TPS: results.Spread{Min: 1, Median: 2, Max: 3}}}
	return r
}
