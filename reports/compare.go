package reports

import (
	"fmt"
	"io"
	"strings"
)

// Thresholds bound how much worse NEW may be than OLD, in percent.
type Thresholds struct {
	MaxTPSDropPct, MaxP99RisePct float64
}

// Verdict is the comparison of one strategy on one scenario.
type Verdict struct {
	Strategy, Scenario, Value  string
	OldTPS, NewTPS             float64
	OldP99, NewP99             float64
	TPSChangePct, P99ChangePct float64
	Problems                   []string
	Missing                    bool // in OLD, not in NEW
}

// Compare matches the runs of old and new by strategy, scenario and sweep
// value (medians over repeats) and flags a TPS drop or P99 rise past the
// thresholds, and any oversell, lost or contradicted ack, or invariant
// violation that NEW shows and OLD did not.
func Compare(old, new *Results, th Thresholds) []Verdict {
	newRows := map[[3]string]Row{}
	for _, r := range Rows(new) {
		newRows[[3]string{r.Strategy, r.Scenario, r.Value}] = r
	}
	var out []Verdict
	for _, o := range Rows(old) {
		v := Verdict{Strategy: o.Strategy, Scenario: o.Scenario, Value: o.Value, OldTPS: o.TPS, OldP99: o.P99}
		n, ok := newRows[[3]string{o.Strategy, o.Scenario, o.Value}]
		if !ok {
			v.Missing = true
			v.Problems = append(v.Problems, "missing from NEW")
			out = append(out, v)
			continue
		}
		v.NewTPS, v.NewP99 = n.TPS, n.P99
		if o.TPS > 0 {
			v.TPSChangePct = 100 * (n.TPS - o.TPS) / o.TPS
			if -v.TPSChangePct > th.MaxTPSDropPct {
				v.Problems = append(v.Problems, fmt.Sprintf("TPS dropped %.1f %% (limit %.1f %%)", -v.TPSChangePct, th.MaxTPSDropPct))
			}
		}
		if o.P99 > 0 {
			v.P99ChangePct = 100 * (n.P99 - o.P99) / o.P99
			if v.P99ChangePct > th.MaxP99RisePct {
				v.Problems = append(v.Problems, fmt.Sprintf("P99 rose %.1f %% (limit %.1f %%)", v.P99ChangePct, th.MaxP99RisePct))
			}
		}
		for _, c := range []struct {
			name string
			f    func(Run) int64
		}{
			{"oversold units", func(r Run) int64 { return r.Audit.OversoldUnits }},
			{"lost or contradicted acks", func(r Run) int64 { return int64(r.Audit.LostAcks + r.Audit.CancelAckViolations) }},
			{"invariant violations", func(r Run) int64 { return int64(r.Audit.InvariantViolations) }},
		} {
			was, now := sum(o.Runs, c.f), sum(n.Runs, c.f)
			if now > 0 && was == 0 {
				v.Problems = append(v.Problems, fmt.Sprintf("%d %s, none before", now, c.name))
			}
		}
		out = append(out, v)
	}
	return out
}

func sum(runs []Run, f func(Run) int64) int64 {
	var n int64
	for _, r := range runs {
		n += f(r)
	}
	return n
}

// CompareTable writes the side-by-side table and returns the number of
// regressions.
func CompareTable(w io.Writer, vs []Verdict) int {
	fmt.Fprintf(w, "%-12s %-22s %10s %10s %8s %10s %10s %8s  %s\n", "strategy", "scenario", "old TPS", "new TPS", "Δ%", "old P99", "new P99", "Δ%", "verdict")
	bad := 0
	for _, v := range vs {
		sc := v.Scenario
		if v.Value != "" {
			sc += " =" + v.Value
		}
		verdict := "ok"
		if len(v.Problems) > 0 {
			bad++
			verdict = "REGRESSION: " + strings.Join(v.Problems, "; ")
		}
		fmt.Fprintf(w, "%-12s %-22s %10.1f %10.1f %+8.1f %10.2f %10.2f %+8.1f  %s\n", v.Strategy, sc, v.OldTPS, v.NewTPS,
			v.TPSChangePct, v.OldP99, v.NewP99, v.P99ChangePct, verdict)
	}
	return bad
}
