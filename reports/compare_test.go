package reports

import (
	"strings"
	"testing"
)

// TestCompare: a file against itself passes; each constructed regression
// is caught, and only it.
func TestCompare(t *testing.T) {
	th := Thresholds{MaxTPSDropPct: 10, MaxP99RisePct: 20}
	cases := []struct {
		name   string
		mutate func(r *Results)
		want   string // substring of the one expected problem; "" = none
	}{
		{"identical", func(r *Results) {}, ""},
		{"small TPS drop within limit", func(r *Results) { r.Runs[0].TPS *= 0.95 }, ""},
		{"TPS drop", func(r *Results) { r.Runs[0].TPS *= 0.8 }, "TPS dropped"},
		{"P99 rise", func(r *Results) { p := r.Runs[1].LatencyMS["flow"]; p.P99 *= 1.5; r.Runs[1].LatencyMS["flow"] = p }, "P99 rose"},
		{"oversell appears", func(r *Results) { r.Runs[0].Audit.OversoldUnits = 3 }, "oversold units"},
		{"lost ack appears", func(r *Results) { r.Runs[2].Audit.LostAcks = 1 }, "acks"},
		{"violation appears", func(r *Results) { r.Runs[3].Audit.InvariantViolations = 2 }, "invariant"},
		{"strategy missing", func(r *Results) { r.Runs = r.Runs[1:] }, "missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := fixtureResults(t)
			cur := fixtureResults(t)
			c.mutate(cur)
			var problems []string
			for _, v := range Compare(old, cur, th) {
				problems = append(problems, v.Problems...)
			}
			var sb strings.Builder
			bad := CompareTable(&sb, Compare(old, cur, th))
			switch {
			case c.want == "" && (len(problems) != 0 || bad != 0):
				t.Fatalf("unexpected regressions: %v", problems)
			case c.want != "" && (len(problems) != 1 || !strings.Contains(problems[0], c.want) || bad != 1):
				t.Fatalf("problems %v, want one containing %q", problems, c.want)
			}
		})
	}
	// Naive's oversell in OLD is no regression when NEW has it too.
	old := fixtureResults(t)
	if old.Runs[5].Audit.OversoldUnits == 0 {
		t.Fatal("fixture: naive should oversell")
	}
}

func TestParseWeights(t *testing.T) {
	cases := []struct {
		in      string
		want    Weights
		wantErr bool
	}{
		// Two dimensions, the rest weigh 0.
		{"consistency=0.5,throughput=0.5", Weights{Consistency: 0.5, Throughput: 0.5}, false},
		// One dimension alone.
		{"latency=1", Weights{Latency: 1}, false},
		// All four, spaces allowed.
		{"consistency=0.4, throughput=0.25, latency=0.2, complexity=0.15", DefaultWeights, false},
		// A weight above 1 is refused, not renormalised.
		{"consistency=2", Weights{}, true},
		// Weights that do not sum to 1 are refused, not renormalised.
		{"consistency=1,throughput=1", Weights{}, true},
		{"consistency=0.3,throughput=0.3", Weights{}, true},
		// An unknown dimension.
		{"speed=1", Weights{}, true},
		// All zero.
		{"consistency=0", Weights{}, true},
		// A negative weight.
		{"consistency=-1,latency=2", Weights{}, true},
		// A dimension named twice.
		{"latency=0.5,latency=0.5", Weights{}, true},
	}
	for _, c := range cases {
		got, err := ParseWeights(c.in)
		if (err != nil) != c.wantErr || !c.wantErr && got != c.want {
			t.Errorf("ParseWeights(%q) = %+v, %v", c.in, got, err)
		}
	}
	// String round-trips, at full precision.
	w := Weights{Consistency: 1.0 / 3, Throughput: 1.0 / 3, Latency: 1.0 / 3}
	if got, err := ParseWeights(w.String()); err != nil || got != w {
		t.Errorf("ParseWeights(%q) = %+v, %v", w.String(), got, err)
	}
}

// TestRecommend: the ranking follows the weights, and a strategy that
// oversells never wins on consistency.
func TestRecommend(t *testing.T) {
	r := fixtureResults(t)
	recs := Recommend(r, Weights{Consistency: 1})
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
	byTPS := Recommend(r, Weights{Throughput: 1})
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
	for _, w := range []Weights{DefaultWeights, {Throughput: 1}, {Latency: 1}, {Complexity: 1}} {
		recs := Recommend(r, w)
		var order []string
		for i, rec := range recs {
			order = append(order, rec.Strategy)
			unsafe := rec.Strategy == "outbox" || rec.Strategy == "naive"
			if rec.Unsafe != unsafe {
				t.Errorf("%v: %s unsafe=%v", w, rec.Strategy, rec.Unsafe)
			}
			if unsafe && !strings.Contains(rec.Reason, "UNSAFE") {
				t.Errorf("%v: %s reason does not say unsafe: %s", w, rec.Strategy, rec.Reason)
			}
			if i > 0 && recs[i-1].Unsafe && !rec.Unsafe {
				t.Errorf("%v: clean %s ranks after unsafe %s", w, rec.Strategy, recs[i-1].Strategy)
			}
			if i > 0 && recs[i-1].Unsafe == rec.Unsafe && recs[i-1].Score < rec.Score {
				t.Errorf("%v: within a group %s (%.2f) ranks above %s (%.2f)", w, recs[i-1].Strategy, recs[i-1].Score, rec.Strategy, rec.Score)
			}
		}
		if len(recs) != 6 || !recs[4].Unsafe || recs[3].Unsafe {
			t.Errorf("%v: order %v", w, order)
		}
	}
	md := Summary(r)
	for _, want := range []string{"| naive | UNSAFE |", "ranks after every clean one"} {
		if !strings.Contains(md, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
}
