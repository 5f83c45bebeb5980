package analysis

import (
	"reflect"
	"testing"

	"github.com/stockbench/stockbench/results"
)

// run is one audited sustained run of strategy with tps flows/s.
func run(strategy string, tps float64, mod func(*results.Run)) results.Run {
	r := results.Run{Strategy: strategy, Scenario: "sustained", TPS: tps, CoreLines: 100, Flows: 5000,
		LatencyMS: map[string]results.Percentiles{"flow": {P99: 10}},
		Phases:    []results.Phase{{Name: "load"}, {Name: "audit_end_of_load"}, {Name: "settle"}, {Name: "audit"}}}
	r.Audit.ConfirmedUnits = 100
	r.DurationSec = 10
	for i := range 10 {
		r.Series = append(r.Series, results.SeriesPoint{Second: i + 1, Flows: int64(tps), FlowP99MS: 10})
	}
	if mod != nil {
		mod(&r)
	}
	return r
}

func TestSafetyOf(t *testing.T) {
	cases := []struct {
		name string
		runs []results.Run
		want Safety
	}{
		// Audited to the end, nothing found.
		{"ok", []results.Run{run("a", 1, nil)}, Safety{Kind: Safe}},
		// An UNSAFE class found: its count, summed over the repeats.
		{"unsafe", []results.Run{
			run("a", 1, func(r *results.Run) { r.Audit.OversoldUnits = 2 }),
			run("a", 1, func(r *results.Run) { r.Audit.OversoldUnits = 3; r.Audit.LostAcks = 1 }),
		}, Safety{Kind: Unsafe, Classes: []ClassCount{
			{Key: "oversold_units", Title: "oversold units", Unit: "units", N: 5},
			{Key: "lost_acks", Title: "lost acks", Unit: "count", N: 1}}}},
		// A warning class alone is no anomaly.
		{"warning only", []results.Run{run("a", 1, func(r *results.Run) { r.Audit.UnsoldUnits = 7 })}, Safety{Kind: Safe}},
		// The final audit did not finish: unproven, whatever else.
		{"audit unfinished", []results.Run{run("a", 1, nil), run("a", 1, func(r *results.Run) { r.Incomplete = "audit" })},
			Safety{Kind: Unproven, Phase: "audit"}},
		// Settle did not finish.
		{"settle unfinished", []results.Run{run("a", 1, func(r *results.Run) { r.Incomplete = "settle" })},
			Safety{Kind: Unproven, Phase: "settle"}},
		// Cut by Ctrl-C (in warm-up, say): no verdict.
		{"interrupted", []results.Run{run("a", 0, func(r *results.Run) { r.Interrupted = true })},
			Safety{Kind: Unproven, Phase: PhaseInterrupted}},
		// Phases recorded and no audit among them: the audit is missing.
		{"audit missing", []results.Run{run("a", 1, func(r *results.Run) { r.Phases = r.Phases[:1] })},
			Safety{Kind: Unproven, Phase: PhaseNoAudit}},
		// No run at all.
		{"no runs", nil, Safety{Kind: Unproven, Phase: PhaseNoAudit}},
		// The null probe: its acks are all "lost" (it touches no store);
		// that is no verdict on safety.
		{"probe", []results.Run{run("null", 1, func(r *results.Run) { r.Cost = &results.Cost{Probe: true}; r.Audit.LostAcks = 9 })},
			Safety{Kind: NotAudited}},
		// A probe beside a real run is judged by the real run.
		{"probe and real", []results.Run{
			run("null", 1, func(r *results.Run) { r.Cost = &results.Cost{Probe: true} }),
			run("a", 1, func(r *results.Run) { r.Audit.LostAcks = 1 })},
			Safety{Kind: Unsafe, Classes: []ClassCount{{Key: "lost_acks", Title: "lost acks", Unit: "count", N: 1}}}},
		// Proof of an anomaly stands even when another repeat is unproven.
		{"unsafe and unproven", []results.Run{
			run("a", 1, func(r *results.Run) { r.Incomplete = "audit" }),
			run("a", 1, func(r *results.Run) { r.Audit.LeakedUnits = 1 }),
		}, Safety{Kind: Unsafe, Classes: []ClassCount{{Key: "leaked_units", Title: "leaked units", Unit: "units", N: 1}}}},
		// A file from before phases were recorded: trusted as audited.
		{"old file without phases", []results.Run{run("a", 1, func(r *results.Run) { r.Phases = nil })}, Safety{Kind: Safe}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := SafetyOf(c.runs); !reflect.DeepEqual(got, c.want) {
				t.Errorf("SafetyOf = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestSafetyLabel(t *testing.T) {
	cases := []struct {
		s    Safety
		want string
	}{
		{Safety{Kind: Safe}, "ok"},
		{Safety{Kind: Unsafe, Classes: []ClassCount{{Title: "oversold units", N: 2}}}, "UNSAFE"},
		{Safety{Kind: Unproven, Phase: "audit"}, "unproven: the audit did not finish"},
		{Safety{Kind: Unproven, Phase: "audit_end_of_load"}, "unproven: the audit did not finish"},
		{Safety{Kind: Unproven, Phase: "settle"}, "unproven: settle did not finish"},
		{Safety{Kind: Unproven, Phase: PhaseInterrupted}, "unproven: the run was interrupted"},
	}
	for _, c := range cases {
		if got := c.s.Label(); got != c.want {
			t.Errorf("%+v.Label() = %q, want %q", c.s, got, c.want)
		}
	}
}

// TestAnalyzeRanksUnprovenAfterClean: an unproven strategy, however fast,
// ranks after every proven-clean one and before the unsafe ones; its rows
// carry the verdict every renderer shows.
func TestAnalyzeRanksUnprovenAfterClean(t *testing.T) {
	r := &results.Results{Runs: []results.Run{
		run("fast-unproven", 9000, func(r *results.Run) { r.Incomplete = "audit" }),
		run("slow-clean", 100, nil),
		run("unsafe", 5000, func(r *results.Run) { r.Audit.OversoldUnits = 1 }),
		run("mid-clean", 500, nil),
	}}
	a := Analyze(r)
	var order []string
	var kinds []SafetyKind
	for _, rec := range a.Recommendation {
		order = append(order, rec.Strategy)
		kinds = append(kinds, rec.Safety.Kind)
	}
	if want := []string{"mid-clean", "slow-clean", "fast-unproven", "unsafe"}; !reflect.DeepEqual(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if want := []SafetyKind{Safe, Safe, Unproven, Unsafe}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
	row, ok := a.Row("fast-unproven", "sustained", "")
	if !ok || row.Safety.Kind != Unproven || row.Safety.Label() != "unproven: the audit did not finish" {
		t.Errorf("row %+v", row.Safety)
	}
}

// TestRecommendSkipsProbe: the null strategy's run measures the harness,
// not a strategy: it is never ranked.
func TestRecommendSkipsProbe(t *testing.T) {
	r := &results.Results{Runs: []results.Run{
		run("rowlock", 100, nil),
		run("null", 90000, func(r *results.Run) { r.Cost = &results.Cost{Probe: true}; r.Audit.ReserveAckViolations = 5 }),
	}}
	recs := Analyze(r).Recommendation
	if len(recs) != 1 || recs[0].Strategy != "rowlock" {
		t.Fatalf("recommendation %+v, want rowlock alone", recs)
	}
}

// TestAnalyzeWeights: recorded weights are used; weights that do not
// parse are named in Problems, never silently replaced.
func TestAnalyzeWeights(t *testing.T) {
	cases := []struct {
		recorded     string
		want         Weights
		wantProblems int
	}{
		{"", DefaultWeights, 0},
		{"throughput=1", Weights{Throughput: 1}, 0},
		{"speed=1", DefaultWeights, 1},
	}
	for _, c := range cases {
		r := &results.Results{Config: results.Config{Weights: c.recorded}, Runs: []results.Run{run("a", 1, nil)}}
		a := Analyze(r)
		if a.Weights != c.want || len(a.Problems) != c.wantProblems {
			t.Errorf("weights %q: got %v, problems %v", c.recorded, a.Weights, a.Problems)
		}
	}
}

// TestCompareGate: the gate fails on an unproven row of NEW with its own
// reason, and a strategy UNSAFE in both files moving its anomaly count is a
// note, while a safe one turning unsafe fails.
func TestCompareGate(t *testing.T) {
	base := func() *results.Results {
		return &results.Results{Runs: []results.Run{
			run("rowlock", 800, nil),
			run("naive", 900, func(r *results.Run) { r.Audit.OversoldUnits = 1500 }),
		}}
	}
	th := Thresholds{MaxTPSDropPct: 10, MaxP99RisePct: 20}
	cases := []struct {
		name      string
		mutate    func(*results.Results)
		regressed int
		problem   string
	}{
		{"identical", func(*results.Results) {}, 0, ""},
		{"unproven", func(r *results.Results) { r.Runs[0].Incomplete = "audit" }, 1, "unproven in NEW: the audit did not finish"},
		{"unsafe by design moves", func(r *results.Results) { r.Runs[1].Audit.OversoldUnits = 1700 }, 0, ""},
		{"safe turns unsafe", func(r *results.Results) { r.Runs[0].Audit.LostAcks = 1 }, 1, "1 lost acks, none before"},
		{"P99 rises", func(r *results.Results) {
			r.Runs[0].LatencyMS["flow"] = results.Percentiles{P99: 30}
			for i := range r.Runs[0].Series {
				r.Runs[0].Series[i].FlowP99MS = 30
			}
		}, 1, "P99 rose 200.0 % (limit 20.0 %) beyond the run's own noise (± 0.0 %)"},
		// A 100-flow sale's P99 is its slowest flow: a note.
		{"P99 rises over too few flows", func(r *results.Results) {
			r.Runs[0].Flows, r.Runs[0].LatencyMS["flow"] = 100, results.Percentiles{P99: 30}
		}, 0, ""},
		{"new unproven row", func(r *results.Results) {
			r.Runs = append(r.Runs, run("cas", 1, func(r *results.Run) { r.Interrupted = true }))
		}, 1, "unproven in NEW: the run was interrupted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cur := base()
			c.mutate(cur)
			got := Compare(Analyze(base()), Analyze(cur), th)
			if got.Regressed != c.regressed {
				t.Fatalf("regressed %d, want %d: %+v", got.Regressed, c.regressed, got.Verdicts)
			}
			if c.problem == "" {
				return
			}
			for _, v := range got.Verdicts {
				for _, p := range v.Problems {
					if p == c.problem {
						return
					}
				}
			}
			t.Errorf("no problem %q in %+v", c.problem, got.Verdicts)
		})
	}
}
