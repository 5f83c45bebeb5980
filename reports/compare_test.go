package reports

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/analysis"

	"github.com/stockbench/stockbench/results"
)

// TestCompare: a file against itself passes; each constructed regression
// is caught, and only it.
func TestCompare(t *testing.T) {
	th := analysis.Thresholds{MaxTPSDropPct: 10, MaxP99RisePct: 20}
	// Fixture runs: 0-5 flash (rowlock, cas, conditional, lua-tcc, outbox,
	// naive), 6-11 sustained in the same order; naive oversells in both,
	// outbox in sustained (with drift).
	cases := []struct {
		name   string
		mutate func(r *results.Results)
		want   string // substring of every expected problem; "" = none
		n      int    // how many problems (1 when want is set and n is 0)
	}{
		// The same file: nothing to report.
		{"identical", func(r *results.Results) {}, "", 0},
		// A drop inside the 10 % threshold.
		{"small TPS drop within limit", func(r *results.Results) { r.Runs[0].TPS *= 0.95 }, "", 0},
		// A drop past the threshold, single runs, each second of the run
		// (rowlock sustained: 898, 827, 878 flows) 40 % down: beyond the
		// run's own noise.
		{"TPS drop", func(r *results.Results) { scaleRun(&r.Runs[6], 0.6, 1) }, "TPS dropped 40.0 % (limit 10.0 %) beyond the run's own noise", 0},
		// The same drop of a flash sale, over in half a second: its one
		// second shows nothing of its noise, so it is a note.
		{"TPS drop of a run too short to show its noise", func(r *results.Results) { scaleRun(&r.Runs[0], 0.6, 1) }, "", 0},
		// A P99 doubling in each second (rowlock sustained, thousands of
		// flows, per-second P99s 148, 154, 153 ms).
		{"P99 rise", func(r *results.Results) { scaleRun(&r.Runs[6], 1, 2) }, "P99 rose 100.0 % (limit 20.0 %) beyond the run's own noise", 0},
		// A 50 % rise of cas sustained, whose per-second P99s are 712,
		// 1143 and 1893 ms in three seconds: inside its own noise.
		{"P99 rise within the run's noise", func(r *results.Results) { scaleRun(&r.Runs[7], 1, 1.5) }, "", 0},
		// The same rise in a 100-unit flash sale: its P99 is its slowest
		// flow, a note (analysis.MinTailFlows).
		{"P99 rise over too few flows", func(r *results.Results) {
			p := r.Runs[1].LatencyMS["flow"]
			p.P99 *= 1.5
			r.Runs[1].LatencyMS["flow"] = p
		}, "", 0},
		// A clean strategy oversells.
		{"oversell appears", func(r *results.Results) { r.Runs[0].Audit.OversoldUnits = 3 }, "oversold units, none before", 0},
		// An unsafe strategy gets worse: outbox 1678 → 4000 oversold. It is
		// UNSAFE in both files, so its count moving is a note, not a
		// regression (naive's varies from run to run by design).
		{"oversell grows in a strategy unsafe in both", func(r *results.Results) { r.Runs[10].Audit.OversoldUnits = 4000 }, "", 0},
		// A clean strategy's oversell grows past an old anomaly.
		{"oversell grows", func(r *results.Results) { r.Runs[3].Audit.OversoldUnits = 4 }, "oversold units, none before", 0},
		// Fewer anomalies are no regression.
		{"oversell shrinks", func(r *results.Results) { r.Runs[5].Audit.OversoldUnits = 10 }, "", 0},
		// Leaked units appear.
		{"leak appears", func(r *results.Results) { r.Runs[3].Audit.LeakedUnits = 4 }, "leaked units", 0},
		// Drift appears in a clean strategy.
		{"drift appears", func(r *results.Results) { r.Runs[9].Audit.DriftUnits = 7 }, "drift units", 0},
		// Drift grows in one unsafe in both files: a note.
		{"drift grows in a strategy unsafe in both", func(r *results.Results) { r.Runs[10].Audit.DriftUnits = 471 }, "", 0},
		// A run of NEW whose audit did not finish: unproven, never passed.
		{"audit unfinished", func(r *results.Results) { r.Runs[6].Incomplete = "audit" }, "unproven in NEW: the audit did not finish", 0},
		// A run of NEW cut by Ctrl-C: unproven too.
		{"interrupted", func(r *results.Results) { r.Runs[7].Interrupted = true }, "unproven in NEW: the run was interrupted", 0},
		// A confirm ack the orders table contradicts.
		{"lost ack appears", func(r *results.Results) { r.Runs[2].Audit.LostAcks = 1 }, "lost acks", 0},
		// A cancel ack for an order that ended confirmed.
		{"cancel-ack violation appears", func(r *results.Results) { r.Runs[2].Audit.CancelAckViolations = 1 }, "cancel-ack violations", 0},
		// A broken invariant.
		{"violation appears", func(r *results.Results) { r.Runs[3].Audit.InvariantViolations = 2 }, "invariant", 0},
		// A strategy absent from NEW.
		{"strategy missing", func(r *results.Results) { r.Runs = r.Runs[1:] }, "missing from NEW", 0},
		// A whole scenario absent from NEW: each of its six rows.
		{"scenario missing", func(r *results.Results) { r.Runs = r.Runs[:6] }, "missing from NEW", 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := fixtureResults(t)
			cur := fixtureResults(t)
			c.mutate(cur)
			checkCompare(t, old, cur, th, c.want, c.n)
		})
	}
}

// scaleRun multiplies a run's TPS and each second's flows by tps, and its
// flow P99 and each second's by p99: the same run, that much faster or
// slower throughout.
func scaleRun(r *results.Run, tps, p99 float64) {
	r.TPS *= tps
	r.LatencyMS = maps.Clone(r.LatencyMS)
	p := r.LatencyMS["flow"]
	p.P99 *= p99
	r.LatencyMS["flow"] = p
	r.Series = slices.Clone(r.Series)
	for i := range r.Series {
		r.Series[i].Flows = int64(math.Round(float64(r.Series[i].Flows) * tps))
		r.Series[i].FlowP99MS *= p99
	}
}

// checkCompare runs Compare and CompareTable and checks the problems: none
// when want is empty, else n (at least 1) that all contain want.
func checkCompare(t *testing.T, old, cur *results.Results, th analysis.Thresholds, want string, n int) {
	t.Helper()
	if want != "" && n == 0 {
		n = 1
	}
	var problems []string
	rows := 0
	c := analysis.Compare(analysis.Analyze(old), analysis.Analyze(cur), th)
	for _, v := range c.Verdicts {
		problems = append(problems, v.Problems...)
		if len(v.Problems) > 0 {
			rows++
		}
	}
	var sb strings.Builder
	CompareTable(&sb, c)
	if len(problems) != n || c.Regressed != rows {
		t.Fatalf("%d problems (%d rows) %v, want %d containing %q\n%s", len(problems), c.Regressed, problems, n, want, sb.String())
	}
	for _, p := range problems {
		if !strings.Contains(p, want) {
			t.Fatalf("problem %q, want one containing %q", p, want)
		}
	}
}

// withRepeats replaces each run of r by one repeat per factor, its TPS
// (and each second's flows) multiplied and its flow P99 (and each
// second's) divided by the factor.
func withRepeats(r *results.Results, factors ...float64) *results.Results {
	var runs []results.Run
	for _, run := range r.Runs {
		for i, f := range factors {
			x := run
			x.Repeat = i + 1
			x.TPS *= f
			x.LatencyMS = map[string]results.Percentiles{}
			for k, p := range run.LatencyMS {
				x.LatencyMS[k] = p
			}
			p := x.LatencyMS["flow"]
			p.P99 /= f
			x.LatencyMS["flow"] = p
			x.Series = slices.Clone(run.Series)
			for i := range x.Series {
				x.Series[i].Flows = int64(math.Round(float64(x.Series[i].Flows) * f))
				x.Series[i].FlowP99MS /= f
			}
			runs = append(runs, x)
		}
	}
	r.Runs = runs
	return r
}

// TestCompareSpread: with repeats, a change past the threshold is a
// regression only when it is also beyond the min–max of the repeats.
func TestCompareSpread(t *testing.T) {
	th := analysis.Thresholds{MaxTPSDropPct: 10, MaxP99RisePct: 20}
	cases := []struct {
		name     string
		old, new []float64 // repeat factors of TPS (P99 divided by them)
		want     string
		n        int
	}{
		// The same repeats.
		{"identical repeats", []float64{0.8, 1, 1.2}, []float64{0.8, 1, 1.2}, "", 0},
		// A re-run whose median is 15 % lower (past 10 %) but whose repeats
		// overlap OLD's: noise, not a regression.
		{"re-run within its own spread", []float64{0.8, 1, 1.2}, []float64{0.75, 0.85, 1.15}, "", 0},
		// One NEW run inside OLD's spread.
		{"single new run within old spread", []float64{0.8, 1, 1.2}, []float64{0.85}, "", 0},
		// Every NEW repeat below every OLD one, and the median 45 % down on
		// as much CPU: TPS drops in each of the 12 rows, P99 rises in 5 of
		// the 6 sustained ones (a flash sale's 100 flows are too few for a
		// tail; cas's per-second P99s, 712 to 1893 ms, make +82 % its own
		// noise).
		{"drop beyond the spread", []float64{0.8, 1, 1.2}, []float64{0.5, 0.55, 0.6}, "beyond the repeats' spread", 17},
		// Beyond the spread but inside the threshold: no regression.
		{"tight spread, small drop", []float64{0.99, 1, 1.01}, []float64{0.95, 0.96, 0.97}, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := withRepeats(fixtureResults(t), c.old...)
			cur := withRepeats(fixtureResults(t), c.new...)
			checkCompare(t, old, cur, th, c.want, c.n)
		})
	}
}

// TestCompareSweepLabel: compare on sweep files keeps the parameter name.
func TestCompareSweepLabel(t *testing.T) {
	r := fixtureResults(t)
	for i := range r.Runs {
		r.Runs[i].Param, r.Runs[i].Value = "buyers", "50"
	}
	var sb strings.Builder
	a := analysis.Analyze(r)
	CompareTable(&sb, analysis.Compare(a, a, analysis.Thresholds{MaxTPSDropPct: 10, MaxP99RisePct: 20}))
	if !strings.Contains(sb.String(), "sustained buyers=50") {
		t.Fatalf("no parameter name:\n%s", sb.String())
	}
}

// TestRecommend: the ranking follows the weights, and a strategy that
// oversells never wins on consistency.
func TestRecommend(t *testing.T) {
	r := fixtureResults(t)
	recs := analysis.Recommend(r, analysis.Weights{Consistency: 1})
	if len(recs) != 6 {
		t.Fatalf("%d recommendations", len(recs))
	}
	last := recs[len(recs)-1]
	for _, rec := range recs {
		if rec.Strategy == "naive" && rec.Consistency >= 0.5 {
			t.Fatalf("naive scored %.2f on consistency", rec.Consistency)
		}
		if rec.Reason == "" || !strings.HasPrefix(rec.Reason, rec.Strategy) {
			t.Fatalf("no reason for %s", rec.Strategy)
		}
	}
	if last.Consistency == 1 {
		t.Fatalf("with consistency only, the last (%s) should be an inconsistent one", last.Strategy)
	}
	byTPS := analysis.Recommend(r, analysis.Weights{Throughput: 1})
	if byTPS[0].Throughput != 1 {
		t.Fatalf("with throughput only, the first should have the best TPS: %+v", byTPS[0])
	}
}

// TestRecommendSafetyFirst: whatever the weights, a strategy with any
// anomaly ranks after every clean one and is marked unsafe; the weights
// order each group. In the fixture outbox (drift, oversell) and naive
// (oversell) are unsafe, and outbox has the second best TPS.
func TestRecommendSafetyFirst(t *testing.T) {
	r := fixtureResults(t)
	for _, w := range []analysis.Weights{analysis.DefaultWeights, {Throughput: 1}, {Latency: 1}, {Complexity: 1}} {
		recs := analysis.Recommend(r, w)
		var order []string
		for i, rec := range recs {
			order = append(order, rec.Strategy)
			unsafe := rec.Strategy == "outbox" || rec.Strategy == "naive"
			if (rec.Safety.Kind == analysis.Unsafe) != unsafe {
				t.Errorf("%v: %s unsafe=%v", w, rec.Strategy, (rec.Safety.Kind == analysis.Unsafe))
			}
			if unsafe && !strings.Contains(rec.Reason, "UNSAFE") {
				t.Errorf("%v: %s reason does not say unsafe: %s", w, rec.Strategy, rec.Reason)
			}
			if i > 0 && (recs[i-1].Safety.Kind == analysis.Unsafe) && !(rec.Safety.Kind == analysis.Unsafe) {
				t.Errorf("%v: clean %s ranks after unsafe %s", w, rec.Strategy, recs[i-1].Strategy)
			}
			if i > 0 && (recs[i-1].Safety.Kind == analysis.Unsafe) == (rec.Safety.Kind == analysis.Unsafe) && recs[i-1].Score < rec.Score {
				t.Errorf("%v: within a group %s (%.2f) ranks above %s (%.2f)", w, recs[i-1].Strategy, recs[i-1].Score, rec.Strategy, rec.Score)
			}
		}
		if len(recs) != 6 || !(recs[4].Safety.Kind == analysis.Unsafe) || (recs[3].Safety.Kind == analysis.Unsafe) {
			t.Errorf("%v: order %v", w, order)
		}
	}
	md := Summary(analysis.Analyze(r))
	for _, want := range []string{"| naive | UNSAFE |", "ranks after every clean one"} {
		if !strings.Contains(md, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
}
