package analysis

import (
	"fmt"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/results"
)

// Thresholds bound how much worse NEW may be than OLD, in percent.
type Thresholds struct {
	MaxTPSDropPct, MaxP99RisePct float64
}

// Verdict is the comparison of one strategy on one scenario (and sweep
// value). TPS and P99 are min / median / max over the repeats of each file
// (all three equal for a single run).
type Verdict struct {
	Strategy, Scenario, Param, Value string
	OldTPS, NewTPS                   results.Spread
	OldP99, NewP99                   results.Spread
	// TPSChangePct and P99ChangePct compare the medians.
	TPSChangePct, P99ChangePct float64
	// Problems are regressions: any one fails the gate.
	Problems []string
	// Notes are changes past a threshold that stayed inside the spread of
	// the repeats, so they are not counted as regressions.
	Notes []string
	// Missing is true when the row is in OLD and not in NEW.
	Missing bool
}

// Compare matches the rows of old and new by strategy, scenario and sweep
// value, and flags as a regression:
//   - a row of OLD missing from NEW (a strategy or a whole scenario);
//   - any anomaly class (audit.Classes) whose worst repeat in NEW exceeds
//     its worst repeat in OLD: a new anomaly, or more of an old one;
//   - a median TPS drop past th.MaxTPSDropPct, or a median P99 rise past
//     th.MaxP99RisePct, that is also beyond the spread of the repeats: NEW's
//     best repeat worse than OLD's worst. With one run per file the spread
//     is the single value, so only the threshold decides.
func Compare(old, new *results.Results, th Thresholds) []Verdict {
	type key struct{ strategy, scenario, value string }
	newRows := map[key]results.Row{}
	for _, r := range results.Rows(new) {
		newRows[key{r.Strategy, r.Scenario, r.Value}] = r
	}
	tps := func(r results.Run) float64 { return r.TPS }
	p99 := func(r results.Run) float64 { return r.LatencyMS["flow"].P99 }
	var out []Verdict
	for _, o := range results.Rows(old) {
		v := Verdict{Strategy: o.Strategy, Scenario: o.Scenario, Param: o.Param, Value: o.Value,
			OldTPS: results.SpreadOf(o.Runs, tps), OldP99: results.SpreadOf(o.Runs, p99)}
		n, ok := newRows[key{o.Strategy, o.Scenario, o.Value}]
		if !ok {
			v.Missing = true
			v.Problems = append(v.Problems, "missing from NEW")
			out = append(out, v)
			continue
		}
		v.NewTPS, v.NewP99 = results.SpreadOf(n.Runs, tps), results.SpreadOf(n.Runs, p99)
		spread := len(o.Runs) > 1 || len(n.Runs) > 1
		if v.OldTPS.Median > 0 {
			v.TPSChangePct = 100 * (v.NewTPS.Median - v.OldTPS.Median) / v.OldTPS.Median
			if -v.TPSChangePct > th.MaxTPSDropPct {
				msg := fmt.Sprintf("TPS dropped %.1f %% (limit %.1f %%)", -v.TPSChangePct, th.MaxTPSDropPct)
				switch {
				case v.NewTPS.Max >= v.OldTPS.Min:
					v.Notes = append(v.Notes, msg+" within the repeats' spread")
				case spread:
					v.Problems = append(v.Problems, msg+" beyond the repeats' spread")
				default:
					v.Problems = append(v.Problems, msg)
				}
			}
		}
		if v.OldP99.Median > 0 {
			v.P99ChangePct = 100 * (v.NewP99.Median - v.OldP99.Median) / v.OldP99.Median
			if v.P99ChangePct > th.MaxP99RisePct {
				msg := fmt.Sprintf("P99 rose %.1f %% (limit %.1f %%)", v.P99ChangePct, th.MaxP99RisePct)
				switch {
				case v.NewP99.Min <= v.OldP99.Max:
					v.Notes = append(v.Notes, msg+" within the repeats' spread")
				case spread:
					v.Problems = append(v.Problems, msg+" beyond the repeats' spread")
				default:
					v.Problems = append(v.Problems, msg)
				}
			}
		}
		for _, c := range audit.Classes {
			was, now := worst(o.Runs, c), worst(n.Runs, c)
			switch {
			case now > was && was == 0:
				v.Problems = append(v.Problems, fmt.Sprintf("%d %s, none before", now, c.Title))
			case now > was:
				v.Problems = append(v.Problems, fmt.Sprintf("%s rose from %d to %d", c.Title, was, now))
			}
		}
		out = append(out, v)
	}
	return out
}

// worst is the largest count of anomaly class c over runs.
func worst(runs []results.Run, c audit.Class) int64 {
	var n int64
	for _, r := range runs {
		n = max(n, c.Of(r.Audit))
	}
	return n
}
