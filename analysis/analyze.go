package analysis

import (
	"fmt"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/results"
)

// SafetyKind is the verdict on whether a row's stores kept every rule.
type SafetyKind string

const (
	// Safe: every repeat was audited to the end and the auditor found no
	// anomaly of an UNSAFE class (audit.Classes).
	Safe SafetyKind = "ok"
	// Unsafe: the auditor found at least one anomaly of an UNSAFE class in
	// some repeat. It is proof, so it stands even when another repeat's
	// audit did not finish.
	Unsafe SafetyKind = "unsafe"
	// Unproven: no anomaly was found, but some repeat's audit did not
	// finish (or never ran, or the load was cut): nothing says the stores
	// kept the rules, so the row is never ranked or gated as safe.
	Unproven SafetyKind = "unproven"
	// NotAudited: the harness-cost probe (the null strategy) touches no
	// store, so there is nothing to audit: the auditor's counts of its
	// run (every ack "lost") say nothing about safety. Never ranked.
	NotAudited SafetyKind = "probe"
)

// Phases that can leave a run unproven, beside the runner's own phase
// names (settle, audit_end_of_load, audit) that results.Run.Incomplete
// carries.
const (
	// PhaseInterrupted: the load was cut (Ctrl-C) before its end.
	PhaseInterrupted = "interrupted"
	// PhaseNoAudit: the run records its phases, and no audit among them.
	PhaseNoAudit = "no_audit"
)

// ClassCount is one anomaly class and how many the auditor counted of it,
// summed over a row's repeats.
type ClassCount struct {
	Key   string `json:"key"`
	Title string `json:"title"`
	Unit  string `json:"unit"`
	N     int64  `json:"n"`
}

// Safety is the one safety verdict of a row (or a strategy): the kind, and
// what it rests on — the UNSAFE classes found, or the phase that did not
// finish.
type Safety struct {
	Kind SafetyKind `json:"kind"`
	// Classes are the UNSAFE classes found (Kind Unsafe only), in
	// audit.Classes order.
	Classes []ClassCount `json:"classes,omitempty"`
	// Phase names what did not finish (Kind Unproven only): a runner
	// phase (settle, audit_end_of_load, audit), PhaseInterrupted,
	// PhaseNoAudit or results.IncompleteGeneratorLost.
	Phase string `json:"phase,omitempty"`
}

// SafetyOf is the safety decision, the only one: runs are the repeats of
// one row (or every row of one strategy). Any UNSAFE anomaly in any run
// makes it Unsafe; else any run not audited to the end makes it Unproven;
// else it is Safe. An empty list is Unproven: nothing was audited.
func SafetyOf(runs []results.Run) Safety {
	if len(runs) == 0 {
		return Safety{Kind: Unproven, Phase: PhaseNoAudit}
	}
	if allProbes(runs) {
		return Safety{Kind: NotAudited}
	}
	var found []ClassCount
	for _, c := range audit.Classes {
		if c.Severity != audit.Unsafe {
			continue
		}
		var n int64
		for _, run := range runs {
			n += c.Of(run.Audit)
		}
		if n > 0 {
			found = append(found, ClassCount{Key: c.Key, Title: c.Title, Unit: c.Unit, N: n})
		}
	}
	if len(found) > 0 {
		return Safety{Kind: Unsafe, Classes: found}
	}
	for _, run := range runs {
		if p := unfinished(run); p != "" {
			return Safety{Kind: Unproven, Phase: p}
		}
	}
	return Safety{Kind: Safe}
}

// allProbes says whether every run is the harness-cost probe's.
func allProbes(runs []results.Run) bool {
	for _, run := range runs {
		if run.Cost == nil || !run.Cost.Probe {
			return false
		}
	}
	return true
}

// unfinished names what a run did not finish of what proves it, or "".
func unfinished(run results.Run) string {
	switch {
	case run.Incomplete != "":
		return run.Incomplete
	case run.Interrupted:
		return PhaseInterrupted
	case len(run.Phases) > 0 && !audited(run.Phases):
		return PhaseNoAudit
	}
	return ""
}

// audited reports whether the final audit is among phases and finished.
func audited(phases []results.Phase) bool {
	for _, p := range phases {
		if p.Name == "audit" && !p.Incomplete {
			return true
		}
	}
	return false
}

// Anomalies is the total count of the UNSAFE classes found.
func (s Safety) Anomalies() int64 {
	var n int64
	for _, c := range s.Classes {
		n += c.N
	}
	return n
}

// Label is the verdict in a table cell: "ok", "UNSAFE", or "unproven: …"
// naming what did not finish.
func (s Safety) Label() string {
	switch s.Kind {
	case Safe:
		return "ok"
	case Unsafe:
		return "UNSAFE"
	case NotAudited:
		return "probe: " + s.Why()
	}
	return "unproven: " + s.Why()
}

// Why says in words what did not finish (Unproven) or what was found
// (Unsafe); empty for Safe.
func (s Safety) Why() string {
	switch s.Kind {
	case NotAudited:
		return "no store, nothing to audit"
	case Unsafe:
		out := ""
		for i, c := range s.Classes {
			if i > 0 {
				out += ", "
			}
			out += fmt.Sprintf("%d %s", c.N, c.Title)
		}
		return out
	case Unproven:
		switch s.Phase {
		case "settle":
			return "settle did not finish"
		case "audit", "audit_end_of_load":
			return "the audit did not finish"
		case PhaseInterrupted:
			return "the run was interrupted"
		case PhaseNoAudit:
			return "no audit ran"
		case results.IncompleteGeneratorLost:
			return "a generator died before its report (its load figures are missing; see lost_generators)"
		}
		return "the " + s.Phase + " phase did not finish"
	}
	return ""
}

// worse orders the kinds for folding: Unsafe over Unproven over Safe.
func worse(a, b Safety) Safety {
	rank := map[SafetyKind]int{Safe: 0, Unproven: 1, Unsafe: 2}
	if rank[b.Kind] > rank[a.Kind] {
		return b
	}
	return a
}

// Row is one results.Row with its safety verdict.
type Row struct {
	results.Row
	Safety Safety
	// BoundBy is what limited the row's runs (BoundByRow).
	BoundBy BoundBy
}

// Analysis is every verdict on one results file, decided once: the rows
// with their safety, the recommendation, the weights it used. Renderers
// read it and decide nothing.
type Analysis struct {
	// Results is what was analysed; renderers read the figures from it.
	Results *results.Results
	// Rows are results.Rows(Results), each with its Safety.
	Rows []Row
	// Weights are the recommendation's (the run's recorded ones, or the
	// defaults when none were recorded).
	Weights Weights
	// Recommendation ranks the strategies (nil for a sweep or no runs).
	Recommendation []Recommendation
	// Crossings are where two Safe strategies swap places over a numeric
	// sweep (nil otherwise).
	Crossings []Crossing
	// Drift is the verdict on every timed run's drift, in run order.
	Drift []DriftVerdict
	// Curve is the latency curve's verdict (stockbench curve; nil
	// otherwise), judged again from the runs against the recorded SLO.
	Curve *Curve
	// Scalability is the USL fit of each strategy over a sweep of buyers
	// (USLFits; nil otherwise).
	Scalability []StrategyUSL
	// Problems are what the analysis could not read as recorded (e.g.
	// weights that do not parse), each a sentence; renderers show them.
	Problems []string
}

// Analyze computes every verdict on r once. It never fails: what it
// cannot read is named in Problems and the defaults are used.
func Analyze(r *results.Results) *Analysis {
	a := &Analysis{Results: r, Weights: DefaultWeights}
	for _, row := range results.Rows(r) {
		a.Rows = append(a.Rows, Row{Row: row, Safety: SafetyOf(row.Runs), BoundBy: BoundByRow(row.Runs)})
	}
	if s := r.Config.Weights; s != "" {
		w, err := ParseWeights(s)
		if err != nil {
			a.Problems = append(a.Problems, fmt.Sprintf("the recorded weights do not parse (%v): the default weights %s were used", err, DefaultWeights))
		} else {
			a.Weights = w
		}
	}
	if r.Sweep == nil {
		a.Recommendation = recommend(a.Rows, results.Scenarios(r), a.Weights)
	}
	a.Crossings = crossings(r.Sweep, a.Rows)
	a.Drift = driftVerdicts(r.Runs)
	if c := r.Curve; c != nil {
		var names []string
		for _, p := range c.Strategies {
			names = append(names, p.Strategy)
		}
		a.Curve = CurveOf(r, names, c.SLOP99MS)
	}
	a.Scalability = USLFits(r)
	return a
}

// Row finds the analysed row of strategy on scenario (and sweep value).
func (a *Analysis) Row(strategy, scenario, value string) (Row, bool) {
	for _, row := range a.Rows {
		if row.Strategy == strategy && row.Scenario == scenario && row.Value == value {
			return row, true
		}
	}
	return Row{}, false
}
