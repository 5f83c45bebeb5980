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
	// TPSNoisePct and P99NoisePct are the noise margins of the runs'
	// seconds (tpsNoisePct, p99NoisePct; repeats pooled), in percent; 0
	// when not measured (runs too short, or no change past a threshold
	// beyond the repeats' spread to judge).
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
//     explains (judgeSpeed): the repeats' spread, the noise margin of the
//     runs' per-second series, and the CPU the runs got (their flows per
//     CPU second held). A change past the threshold inside the noise is a
//     note, and so is one of a single run too short to show its noise, or
//     a P99 of a row with fewer than MinTailFlows flows in some run (too
//     few samples for a tail).
func Compare(old, new *Analysis, th Thresholds) Comparison {
	type key struct{ strategy, scenario, value string }
	newRows := map[key]Row{}
	for _, r := range new.Rows {
		newRows[key{r.Strategy, r.Scenario, r.Value}] = r
	}
	tps := func(r results.Run) float64 { return r.TPS }
	p99 := func(r results.Run) float64 { return r.LatencyMS["flow"].P99 }
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
		v.judgeSpeed(o.Runs, n.Runs, th)
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
// runs (all repeats' seconds pooled) decide: a change inside their noise
// margin (tpsNoisePct, p99NoisePct) is a note. Beyond it, the change is
// the machine's when the stores waited for a core far longer than in OLD
// (cpuShare.starved), or when the CPU the runs got explains it
// (machineShare: the flows per CPU second did not drop past the TPS limit
// or the seconds' noise); else it is a regression. Runs too short to measure a margin:
// with repeats the spread alone decides; a single run's change is a note.
func (v *Verdict) judgeSpeed(old, new []results.Run, th Thresholds) {
	spread := len(old) > 1 || len(new) > 1
	tpsNoise, tpsOK := tpsNoisePct(old, new)
	effLimit := max(th.MaxTPSDropPct, tpsNoise)
	share := machineShare(old, new)
	if v.OldTPS.Median > 0 {
		v.TPSChangePct = 100 * (v.NewTPS.Median - v.OldTPS.Median) / v.OldTPS.Median
		if -v.TPSChangePct > th.MaxTPSDropPct {
			msg := fmt.Sprintf("TPS dropped %.1f %% (limit %.1f %%)", -v.TPSChangePct, th.MaxTPSDropPct)
			if v.NewTPS.Max >= v.OldTPS.Min {
				v.Notes = append(v.Notes, msg+" within the repeats' spread")
			} else {
				v.TPSNoisePct = tpsNoise
				v.judgeNoise(msg, -v.TPSChangePct, tpsNoise, tpsOK, spread, old, new, share, effLimit)
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
				v.P99NoisePct = noise
				// A tail rises with the machine's load even where the run
				// got as much CPU: a busier machine wakes the runs later.
				// So the machine explains a rise only when the run got
				// less CPU or its own seconds' P99s swing past the limit.
				p99Share := share
				if share.cpuPct >= 0 && noise <= th.MaxP99RisePct {
					p99Share.explains = false
				}
				v.judgeNoise(msg, v.P99ChangePct, noise, ok, spread, old, new, p99Share, effLimit)
			}
		}
	}
}

// judgeNoise files a change of change percent past its threshold (msg),
// and beyond the repeats' spread when spread, against the noise margin of
// the runs' seconds (noise; ok false when the runs were too short to
// measure it): inside it, a note that gives the margin; beyond it, a
// note when the machine starved the stores (share.starved), or when the
// CPU the runs got explains the change (share.explains, and
// their flows per CPU second dropped by no more than effLimit percent),
// else a problem. When
// there is no margin the repeats' spread decides (spread), or a single
// run's change is a note that says so.
func (v *Verdict) judgeNoise(msg string, change, noise float64, ok, spread bool, old, new []results.Run, share cpuShare, effLimit float64) {
	within, beyond := " within the run's own noise", " beyond the run's own noise"
	if spread {
		msg += " beyond the repeats' spread"
		within, beyond = " but within the runs' own noise", " and the runs' own noise"
	}
	cpu, eff, measured := share.cpuPct, share.effPct, share.explains
	switch {
	case !ok && spread:
		v.Problems = append(v.Problems, msg)
	case !ok:
		v.Notes = append(v.Notes, fmt.Sprintf("%s, but a run of %d whole seconds is too short to show its own noise (%d needed): gate it with --repeat",
			msg, min(len(wholeSeconds(old[0])), len(wholeSeconds(new[0]))), MinNoiseSeconds))
	case change <= noise:
		v.Notes = append(v.Notes, fmt.Sprintf("%s%s (± %.1f %%)", msg, within, noise))
	case share.starved():
		v.Notes = append(v.Notes, fmt.Sprintf("%s%s (± %.1f %%), but the machine starved the stores: MySQL and Redis waited for a core %.0f %% of the time (was %.0f %%), so this pair says nothing about speed: run it again on a quieter machine",
			msg, beyond, noise, share.waitNew, share.waitOld))
	case measured && -eff <= effLimit:
		v.Notes = append(v.Notes, fmt.Sprintf("%s%s (± %.1f %%), but the CPU the run got explains it: CPU %+.1f %%, flows per CPU second %+.1f %% (limit %.1f %%)",
			msg, beyond, noise, cpu, eff, effLimit))
	case measured:
		v.Problems = append(v.Problems, fmt.Sprintf("%s%s (± %.1f %%), and not the CPU it got: flows per CPU second %+.1f %% (limit %.1f %%)",
			msg, beyond, noise, eff, effLimit))
	default:
		v.Problems = append(v.Problems, fmt.Sprintf("%s%s (± %.1f %%)", msg, beyond, noise))
	}
}

// cpuShare is how the CPU a row's runs got changed from old to new
// (cpuPct) and how their flows per CPU second did (effPct), in percent.
// explains is whether those figures may explain a change: false when
// either file did not sample the CPU, or when the caller rules the CPU out.
type cpuShare struct {
	cpuPct, effPct float64
	explains       bool
	// waitOld and waitNew are the stores' (MySQL + Redis) run-queue wait
	// in percent of the phase (results.Cost), median over repeats;
	// othersOld and othersNew the CPU the machine's other processes used
	// (busy cores less the run's tiers), in percent of one core;
	// waitMeasured is false when either file lacks them.
	waitOld, waitNew     float64
	othersOld, othersNew float64
	waitMeasured         bool
}

// Starvation: the stores' run-queue wait must have grown to at least
// starveFactor times the old run's and by starveMinPct points, and the
// machine's other processes must have taken starveMinPct points of a core
// more, for a change to be put on a starved machine. A lock holder
// waiting for a core holds everyone behind it, so flows per CPU second
// drop too and the CPU share cannot tell; a pool or lock regression makes
// the stores wait less, and a change that costs the stores more CPU (more
// threads, dearer queries) makes them wait longer without anything else
// on the machine getting busier.
const (
	starveFactor = 2.0
	starveMinPct = 20.0
)

// starved reports whether the new run's stores waited for a core much
// longer than the old's (starveFactor, starveMinPct).
func (c cpuShare) starved() bool {
	return c.waitMeasured && c.waitNew >= starveFactor*c.waitOld && c.waitNew-c.waitOld >= starveMinPct &&
		c.othersNew-c.othersOld >= starveMinPct
}

// machineShare is how the CPU the row's runs got (MySQL + Redis +
// harness, median over repeats) changed from old to new, and how their
// flows per CPU second did.
func machineShare(old, new []results.Run) cpuShare {
	cpu := func(r results.Run) float64 {
		h := r.Harness
		if h.ServerCPUPct == nil || h.HarnessCPUPct == nil {
			return 0
		}
		return *h.ServerCPUPct + *h.HarnessCPUPct
	}
	eff := func(r results.Run) float64 {
		if c := cpu(r); c > 0 {
			return r.TPS / c
		}
		return 0
	}
	var share cpuShare
	wo, okWO := storesWait(old)
	wn, okWN := storesWait(new)
	oo, okOO := othersCPU(old)
	on, okON := othersCPU(new)
	if okWO && okWN && okOO && okON {
		share.waitOld, share.waitNew, share.othersOld, share.othersNew, share.waitMeasured = wo, wn, oo, on, true
	}
	co, cn := results.SpreadOf(old, cpu).Median, results.SpreadOf(new, cpu).Median
	eo, en := results.SpreadOf(old, eff).Median, results.SpreadOf(new, eff).Median
	if co <= 0 || cn <= 0 || eo <= 0 || en <= 0 {
		return share
	}
	share.cpuPct, share.effPct, share.explains = 100*(cn/co-1), 100*(en/eo-1), true
	return share
}

// othersCPU is the median over runs of the CPU the machine's other
// processes used during the phase: its busy cores (machine_busy_pct of
// cores) less the run's own tiers (MySQL, Redis, harness, service), in
// percent of one core; false when a run lacks a figure.
func othersCPU(runs []results.Run) (float64, bool) {
	ok := len(runs) > 0
	w := results.SpreadOf(runs, func(r results.Run) float64 {
		c := r.Cost
		if c == nil || c.MachineBusyPct == nil || c.Cores <= 0 || c.MySQLCPUPct == nil || c.RedisCPUPct == nil || c.HarnessCPUPct == nil {
			ok = false
			return 0
		}
		own := *c.MySQLCPUPct + *c.RedisCPUPct + *c.HarnessCPUPct
		if c.ServiceCPUPct != nil {
			own += *c.ServiceCPUPct
		}
		return max(0, *c.MachineBusyPct*float64(c.Cores)-own)
	})
	return w.Median, ok
}

// storesWait is the median over runs of MySQL's plus Redis's run-queue
// wait (percent of the phase); false when a run lacks either.
func storesWait(runs []results.Run) (float64, bool) {
	ok := len(runs) > 0
	w := results.SpreadOf(runs, func(r results.Run) float64 {
		c := r.Cost
		if c == nil || c.MySQLRunQueuePct == nil || c.RedisRunQueuePct == nil {
			ok = false
			return 0
		}
		return *c.MySQLRunQueuePct + *c.RedisRunQueuePct
	})
	return w.Median, ok
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
