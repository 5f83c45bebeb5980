package analysis

import (
	"fmt"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/results"
)

// MinTailFlows is the fewest flows per run whose P99 the gate judges:
// under it the "P99" is one of the slowest handful of flows (of a
// 100-unit flash sale's 100 flows, the slowest), a single observation
// that moves with the machine, so a rise is a note, not a regression.
const MinTailFlows = 1000

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
	// the repeats or the runs' own noise, so they are not counted as
	// regressions.
	Notes []string
	// TPSNoisePct and P99NoisePct are the noise margins of single runs
	// (tpsNoisePct, p99NoisePct), in percent; 0 when not measured (repeats,
	// a run too short, or no change past a threshold to judge).
	TPSNoisePct, P99NoisePct float64
	// Missing is true when the row is in OLD and not in NEW.
	Missing bool
	// OldSafety and NewSafety are the row's verdicts in each file.
	OldSafety, NewSafety Safety
}

// Regressed reports whether the verdict fails the gate.
func (v Verdict) Regressed() bool { return len(v.Problems) > 0 }

// Comparison is the compare gate's whole verdict: one Verdict per row of
// OLD, and how many regressed (any one fails the gate).
type Comparison struct {
	Verdicts  []Verdict
	Regressed int
}

// Compare matches the rows of old and new by strategy, scenario and sweep
// value, and flags as a regression:
//   - a row of OLD missing from NEW (a strategy or a whole scenario);
//   - a row of NEW that is Unproven (its audit did not finish, or the
//     run was cut): nothing shows it kept the rules, so it never passes;
//   - any anomaly class (audit.Classes) whose worst repeat in NEW exceeds
//     its worst repeat in OLD — unless the row is Unsafe in both files (a
//     strategy unsafe by design, such as naive, whose anomaly count varies
//     from run to run): then the rise is a note; a Safe row turning Unsafe
//     always fails;
//   - a median TPS drop past th.MaxTPSDropPct, or a median P99 rise past
//     th.MaxP99RisePct, that is also beyond what the runs' own variation
//     explains (judgeSpeed): with repeats, NEW's best repeat worse than
//     OLD's worst; with one run per file, a change larger than the noise
//     margin of the two runs' per-second series. A change past the
//     threshold inside the noise is a note, and so is one of a run too
//     short to show its noise, or a P99 of a row with fewer than
//     MinTailFlows flows in some run (too few samples for a tail).
func Compare(old, new *Analysis, th Thresholds) Comparison {
	type key struct{ strategy, scenario, value string }
	newRows := map[key]Row{}
	for _, r := range new.Rows {
		newRows[key{r.Strategy, r.Scenario, r.Value}] = r
	}
	tps := func(r results.Run) float64 { return r.TPS }
	p99 := func(r results.Run) float64 { return r.LatencyMS["flow"].P99 }
	var pairs [][2][]results.Run
	for _, o := range old.Rows {
		if n, ok := newRows[key{o.Strategy, o.Scenario, o.Value}]; ok {
			pairs = append(pairs, [2][]results.Run{o.Runs, n.Runs})
		}
	}
	rn := noiseOfRows(pairs)
	var out Comparison
	add := func(v Verdict) {
		out.Verdicts = append(out.Verdicts, v)
		if v.Regressed() {
			out.Regressed++
		}
	}
	for _, o := range old.Rows {
		v := Verdict{Strategy: o.Strategy, Scenario: o.Scenario, Param: o.Param, Value: o.Value,
			OldTPS: results.SpreadOf(o.Runs, tps), OldP99: results.SpreadOf(o.Runs, p99), OldSafety: o.Safety}
		n, ok := newRows[key{o.Strategy, o.Scenario, o.Value}]
		if !ok {
			v.Missing = true
			v.Problems = append(v.Problems, "missing from NEW")
			add(v)
			continue
		}
		v.NewSafety = n.Safety
		if n.Safety.Kind == Unproven {
			v.Problems = append(v.Problems, "unproven in NEW: "+n.Safety.Why())
		}
		byDesign := o.Safety.Kind == Unsafe && n.Safety.Kind == Unsafe
		v.NewTPS, v.NewP99 = results.SpreadOf(n.Runs, tps), results.SpreadOf(n.Runs, p99)
		v.judgeSpeed(o.Runs, n.Runs, th, rn)
		for _, c := range audit.Classes {
			was, now := worst(o.Runs, c), worst(n.Runs, c)
			var msg string
			switch {
			case now > was && was == 0:
				msg = fmt.Sprintf("%d %s, none before", now, c.Title)
			case now > was:
				msg = fmt.Sprintf("%s rose from %d to %d", c.Title, was, now)
			default:
				continue
			}
			if byDesign {
				v.Notes = append(v.Notes, msg+" (UNSAFE in both files)")
			} else {
				v.Problems = append(v.Problems, msg)
			}
		}
		add(v)
	}
	// A row only NEW has is still gated on being proven.
	oldRows := map[key]bool{}
	for _, o := range old.Rows {
		oldRows[key{o.Strategy, o.Scenario, o.Value}] = true
	}
	for _, n := range new.Rows {
		if n.Safety.Kind != Unproven || oldRows[key{n.Strategy, n.Scenario, n.Value}] {
			continue
		}
		add(Verdict{Strategy: n.Strategy, Scenario: n.Scenario, Param: n.Param, Value: n.Value,
			NewTPS: results.SpreadOf(n.Runs, tps), NewP99: results.SpreadOf(n.Runs, p99), NewSafety: n.Safety,
			Problems: []string{"unproven in NEW: " + n.Safety.Why()}})
	}
	return out
}

// judgeSpeed sets the TPS and P99 changes of v from the medians of old's
// and new's runs, and turns a change past th into a problem or a note.
// The noise is what the runs' own variation explains. With repeats in
// either file, a change inside the repeats' spread (NEW's best repeat no
// worse than OLD's worst) is a note. Then the per-second series of the
// runs (all repeats' seconds pooled) decide: a change larger than their
// noise margin (tpsNoisePct, p99NoisePct) is a regression, a smaller one a
// note. Runs too short to measure that margin: with repeats the spread
// alone decides; a single run's change is a note.
func (v *Verdict) judgeSpeed(old, new []results.Run, th Thresholds, rn rowNoise) {
	spread := len(old) > 1 || len(new) > 1
	if v.OldTPS.Median > 0 {
		v.TPSChangePct = 100 * (v.NewTPS.Median - v.OldTPS.Median) / v.OldTPS.Median
		if -v.TPSChangePct > th.MaxTPSDropPct {
			msg := fmt.Sprintf("TPS dropped %.1f %% (limit %.1f %%)", -v.TPSChangePct, th.MaxTPSDropPct)
			if v.NewTPS.Max >= v.OldTPS.Min {
				v.Notes = append(v.Notes, msg+" within the repeats' spread")
			} else {
				noise, ok := tpsNoisePct(old, new)
				margin := noiseMargin{noise, rn.tpsDropPct(), rn.tpsRows}
				v.TPSNoisePct = margin.pct()
				v.judgeNoise(msg, -v.TPSChangePct, margin, ok, spread, old, new)
			}
		}
	}
	if v.OldP99.Median > 0 {
		v.P99ChangePct = 100 * (v.NewP99.Median - v.OldP99.Median) / v.OldP99.Median
		if v.P99ChangePct > th.MaxP99RisePct {
			msg := fmt.Sprintf("P99 rose %.1f %% (limit %.1f %%)", v.P99ChangePct, th.MaxP99RisePct)
			switch {
			case fewest(old, new) < MinTailFlows:
				v.Notes = append(v.Notes, fmt.Sprintf("%s over %d flows, too few for a tail", msg, fewest(old, new)))
			case v.NewP99.Min <= v.OldP99.Max:
				v.Notes = append(v.Notes, msg+" within the repeats' spread")
			default:
				noise, ok := p99NoisePct(old, new)
				margin := noiseMargin{noise, rn.p99RisePct(), rn.p99Rows}
				v.P99NoisePct = margin.pct()
				v.judgeNoise(msg, v.P99ChangePct, margin, ok, spread, old, new)
			}
		}
	}
}

// noiseMargin is what a row's change is judged against: the noise margin
// of its runs' seconds, and the two files' run-to-run noise (rowNoise,
// over rows rows; 0 when not measured), in percent.
type noiseMargin struct {
	seconds, rowToRow float64
	rows              int
}

// pct is the wider of the two margins.
func (m noiseMargin) pct() float64 { return max(m.seconds, m.rowToRow) }

// String gives the margin, and which noise it is when the run-to-run
// noise is the wider.
func (m noiseMargin) String() string {
	if m.rowToRow > m.seconds {
		return fmt.Sprintf("± %.1f %% run to run over %d rows, ± %.1f %% second to second", m.rowToRow, m.rows, m.seconds)
	}
	return fmt.Sprintf("± %.1f %%", m.seconds)
}

// judgeNoise files a change of change percent past its threshold (msg),
// and beyond the repeats' spread when spread, as a problem when it is
// larger than the noise margin, else as a note that gives the margin.
// When the runs were too short to measure their seconds' noise, the
// repeats' spread decides (spread), or a single run's change is a note
// that says so.
func (v *Verdict) judgeNoise(msg string, change float64, m noiseMargin, ok, spread bool, old, new []results.Run) {
	if spread {
		msg += " beyond the repeats' spread"
	}
	switch {
	case !ok && spread:
		v.Problems = append(v.Problems, msg)
	case !ok:
		v.Notes = append(v.Notes, fmt.Sprintf("%s, but a run of %d whole seconds is too short to show its own noise (%d needed): gate it with --repeat",
			msg, min(len(wholeSeconds(old[0])), len(wholeSeconds(new[0]))), MinNoiseSeconds))
	case change <= m.pct() && spread:
		v.Notes = append(v.Notes, fmt.Sprintf("%s but within the runs' own noise (%s)", msg, m))
	case change <= m.pct():
		v.Notes = append(v.Notes, fmt.Sprintf("%s within the run's own noise (%s)", msg, m))
	case spread:
		v.Problems = append(v.Problems, fmt.Sprintf("%s and the runs' own noise (%s)", msg, m))
	default:
		v.Problems = append(v.Problems, fmt.Sprintf("%s beyond the run's own noise (%s)", msg, m))
	}
}

// fewest is the smallest flow count of any run of either row.
func fewest(a, b []results.Run) int64 {
	n := int64(-1)
	for _, r := range append(append([]results.Run{}, a...), b...) {
		if n < 0 || r.Flows < n {
			n = r.Flows
		}
	}
	return max(n, 0)
}

// worst is the largest count of anomaly class c over runs.
func worst(runs []results.Run, c audit.Class) int64 {
	var n int64
	for _, r := range runs {
		n = max(n, c.Of(r.Audit))
	}
	return n
}
