// Package analysis draws the verdicts from a run's results, once, for every
// renderer: the recommendation (safety first, then weighted scores) and the
// compare gate between two results files. It reads results only; reports
// renders what it decides.
package analysis

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/scenarios"
)

// Weights weigh the four dimensions of the recommendation.
type Weights struct {
	Consistency, Throughput, Latency, Complexity float64
}

// DefaultWeights put consistency first, as a stock system must.
var DefaultWeights = Weights{Consistency: 0.4, Throughput: 0.25, Latency: 0.2, Complexity: 0.15}

// ParseWeights reads "consistency=0.4,throughput=0.3,latency=0.2,complexity=0.1".
// Omitted dimensions weigh 0; each weight is between 0 and 1, a dimension
// is named once, and the weights sum to 1: they are never renormalised,
// so what the report prints is what the user asked for.
func ParseWeights(s string) (Weights, error) {
	var w Weights
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil {
			return w, fmt.Errorf("weights %q: want name=weight pairs such as consistency=0.5,throughput=0.5", s)
		}
		if f < 0 || f > 1 || math.IsNaN(f) {
			return w, fmt.Errorf("weights %q: %s=%s is not between 0 and 1", s, k, v)
		}
		if seen[k] {
			return w, fmt.Errorf("weights %q: %s given twice", s, k)
		}
		seen[k] = true
		switch k {
		case "consistency":
			w.Consistency = f
		case "throughput":
			w.Throughput = f
		case "latency":
			w.Latency = f
		case "complexity":
			w.Complexity = f
		default:
			return w, fmt.Errorf("weights %q: unknown dimension %q (want consistency, throughput, latency, complexity)", s, k)
		}
	}
	if sum := w.Consistency + w.Throughput + w.Latency + w.Complexity; math.Abs(sum-1) > 1e-6 {
		return w, fmt.Errorf("weights %q: sum to %g, want 1", s, sum)
	}
	return w, nil
}

// String formats the weights the way ParseWeights reads them.
func (w Weights) String() string {
	g := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	return "consistency=" + g(w.Consistency) + ",throughput=" + g(w.Throughput) + ",latency=" + g(w.Latency) + ",complexity=" + g(w.Complexity)
}

// Recommendation is one strategy's place in the ranking.
type Recommendation struct {
	Rank     int     `json:"rank"`
	Strategy string  `json:"strategy"`
	Score    float64 `json:"score"`
	// Scores per dimension, each in [0, 1], 1 the best.
	Consistency float64 `json:"consistency"`
	Throughput  float64 `json:"throughput"`
	Latency     float64 `json:"latency"`
	Complexity  float64 `json:"complexity"`
	// Safety is the strategy's verdict over its runs (SafetyOf): Unsafe
	// ranks after every other, Unproven after every Safe one, whatever
	// the score.
	Safety Safety `json:"safety"`
	// NotFor lists the fault classes (results.FaultClass) under which the
	// auditor found an anomaly in this strategy's runs: it is not
	// recommended where the stores or the service can fail that way.
	NotFor []string `json:"not_for,omitempty"`
	// Unsold is the units a flash sale of this strategy left unsold while
	// buyers were turned away (audit class unsold_units, the most of any
	// run): a strategy that did not sell out ranks after every one in its
	// group that did.
	Unsold int64  `json:"unsold_units,omitempty"`
	Reason string `json:"reason"`
}

// Label is the recommendation's safety cell: the safety label, or "did
// not sell out" for a safe strategy that left units unsold.
func (rec Recommendation) Label() string {
	if rec.Safety.Kind == Safe && rec.Unsold > 0 {
		return "did not sell out"
	}
	return rec.Safety.Label()
}

// Recommend ranks the strategies of r with weights w: Analyze(r)'s
// recommendation under other weights.
func Recommend(r *results.Results, w Weights) []Recommendation {
	if r.Sweep != nil {
		return nil
	}
	var rows []Row
	for _, row := range results.Rows(r) {
		rows = append(rows, Row{Row: row, Safety: SafetyOf(row.Runs)})
	}
	return recommend(rows, results.Scenarios(r), w)
}

// recommend ranks the strategies on the measured figures only. Throughput
// and latency come from the scenario that measures them (sustained when the
// run has it, else the last scenario); consistency counts every anomaly the
// auditor found in any scenario; complexity is core lines. Each dimension
// scores 1 for the best strategy: throughput tps/best, latency best/p99,
// complexity fewest/lines, consistency 1 with no anomaly and 1/(1 + 100 ×
// oversell rate + anomalies per 100 confirmed units) otherwise.
//
// Safety comes first: an Unsafe strategy ranks after every other, an
// Unproven one (some audit did not finish, in any run, faults included)
// after every Safe one; the weighted score orders strategies only within
// each group. Within a group, a strategy whose flash sale did not sell out
// while it turned buyers away (audit class unsold_units, a warning) ranks
// after those that sold out.
//
// Runs under faults (--fault, stockbench faults) are judged apart: an
// anomaly under a fault puts that fault class in the strategy's NotFor
// (not recommended where the stores or the service fail that way) and
// ranks it after the strategies with fewer such classes in its group; it
// does not make the strategy Unsafe in fair weather. The scores come from
// the runs without faults; when every run had faults they come from all of
// them (TPS and P99 averaged over the faults), and a strategy with an
// anomaly under every fault is Unsafe.
func recommend(all []Row, scs []string, w Weights) []Recommendation {
	if len(all) == 0 {
		return nil
	}
	var rows, faulted []Row
	for _, row := range all {
		if c := row.Runs[0].Cost; c != nil && c.Probe {
			continue // a harness-cost probe (null) stores nothing: no strategy to rank
		}
		if results.FaultClass(row.Runs[0]) != "" {
			faulted = append(faulted, row)
		} else {
			rows = append(rows, row)
		}
	}
	onlyFaults := len(rows) == 0
	if onlyFaults {
		rows = faulted
	}
	notFor := map[string][]string{}
	classes := map[string]int{}
	// unproven is the first unproven verdict of a strategy's fault runs.
	unproven := map[string]Safety{}
	for _, row := range faulted {
		c := results.FaultClass(row.Runs[0])
		if _, ok := classes[row.Strategy+"\x00"+c]; !ok {
			classes[row.Strategy+"\x00"+c] = 1
			classes[row.Strategy]++
		}
		switch row.Safety.Kind {
		case Unsafe:
			if !slices.Contains(notFor[row.Strategy], c) {
				notFor[row.Strategy] = append(notFor[row.Strategy], c)
			}
		case Unproven:
			if _, ok := unproven[row.Strategy]; !ok {
				unproven[row.Strategy] = row.Safety
			}
		}
	}
	// Performance is read off the timed scenario when there is one.
	perf := scs[len(scs)-1]
	for _, sc := range scs {
		if scenarios.IsTimed(sc) {
			perf = sc
		}
	}
	type agg struct {
		tps, p99, oversell float64
		anomalies, units   int64
		unsold             int64
		lines, perfRows    int
		safety             Safety
	}
	by := map[string]*agg{}
	var names []string
	for _, row := range rows {
		a := by[row.Strategy]
		if a == nil {
			a = &agg{lines: row.CoreLines, safety: Safety{Kind: Safe}}
			by[row.Strategy] = a
			names = append(names, row.Strategy)
		}
		a.anomalies += row.Safety.Anomalies()
		a.safety = worse(a.safety, row.Safety)
		a.oversell = math.Max(a.oversell, row.OversellRate)
		for _, run := range row.Runs {
			a.units += run.Audit.ConfirmedUnits
			a.unsold = max(a.unsold, run.Audit.UnsoldUnits)
		}
		if row.Scenario == perf {
			if onlyFaults {
				// The mean over the fault columns.
				a.tps = (a.tps*float64(a.perfRows) + row.TPS) / float64(a.perfRows+1)
				a.p99 = (a.p99*float64(a.perfRows) + row.P99) / float64(a.perfRows+1)
				a.perfRows++
			} else {
				a.tps, a.p99 = row.TPS, row.P99
			}
		}
	}
	var bestTPS, bestP99, fewest float64 = 0, math.Inf(1), math.Inf(1)
	for _, n := range names {
		a := by[n]
		bestTPS = math.Max(bestTPS, a.tps)
		if a.p99 > 0 {
			bestP99 = math.Min(bestP99, a.p99)
		}
		if a.lines > 0 {
			fewest = math.Min(fewest, float64(a.lines))
		}
	}
	out := make([]Recommendation, 0, len(names))
	for _, n := range names {
		a := by[n]
		rec := Recommendation{Strategy: n, Consistency: 1}
		if a.anomalies > 0 {
			rec.Consistency = 1 / (1 + 100*a.oversell + 100*float64(a.anomalies)/float64(max(a.units, 1)))
		}
		if bestTPS > 0 {
			rec.Throughput = a.tps / bestTPS
		}
		if a.p99 > 0 && !math.IsInf(bestP99, 1) {
			rec.Latency = bestP99 / a.p99
		}
		if a.lines > 0 && !math.IsInf(fewest, 1) {
			rec.Complexity = fewest / float64(a.lines)
		}
		rec.Score = w.Consistency*rec.Consistency + w.Throughput*rec.Throughput + w.Latency*rec.Latency + w.Complexity*rec.Complexity
		rec.NotFor = notFor[n]
		rec.Safety = a.safety
		if onlyFaults && a.safety.Kind == Unsafe && len(rec.NotFor) < classes[n] {
			// Anomalies under some faults only: not for those, not Unsafe.
			rec.Safety = Safety{Kind: Safe}
		}
		if u, ok := unproven[n]; ok && rec.Safety.Kind == Safe {
			rec.Safety = u
		}
		rec.Reason = reason(n, rec.Safety, a.anomalies, a.oversell, a.tps, a.p99, a.lines, perf)
		if onlyFaults {
			rec.Reason = faultReason(n, rec.Safety, len(rec.NotFor), classes[n], a.tps, a.p99, a.lines, perf)
		}
		if rec.Unsold = a.unsold; a.unsold > 0 {
			rec.Reason += fmt.Sprintf(" Did not sell out: up to %d units unsold while buyers were turned away; ranks after the strategies that sold out.", a.unsold)
		}
		if len(rec.NotFor) > 0 {
			rec.Reason += " Not recommended where its stores or service may fail as in: " + strings.Join(rec.NotFor, ", ") + " (the auditor found anomalies under those faults)."
		}
		out = append(out, rec)
	}
	group := map[SafetyKind]int{Safe: 0, Unproven: 1, Unsafe: 2}
	sort.SliceStable(out, func(i, j int) bool {
		if gi, gj := group[out[i].Safety.Kind], group[out[j].Safety.Kind]; gi != gj {
			return gi < gj
		}
		if len(out[i].NotFor) != len(out[j].NotFor) {
			return len(out[i].NotFor) < len(out[j].NotFor)
		}
		if (out[i].Unsold > 0) != (out[j].Unsold > 0) {
			return out[i].Unsold == 0
		}
		return out[i].Score > out[j].Score
	})
	for i := range out {
		out[i].Rank = i + 1
	}
	return out
}

func faultReason(name string, s Safety, bad, classes int, tps, p99 float64, lines int, perf string) string {
	cons := fmt.Sprintf("clean under all %d faults", classes)
	if bad > 0 {
		cons = fmt.Sprintf("anomalies under %d of %d faults", bad, classes)
	}
	switch s.Kind {
	case Unsafe:
		cons = "UNSAFE: " + cons
	case Unproven:
		cons = "UNPROVEN (" + s.Why() + "): " + cons
	}
	return fmt.Sprintf("%s: %s; %.0f flows/s at P99 %.1f ms in %s, averaged over the faults; %d core lines.", name, cons, tps, p99, perf, lines)
}

func reason(name string, s Safety, anomalies int64, oversell, tps, p99 float64, lines int, perf string) string {
	cons := "no anomaly of any class in any scenario"
	switch s.Kind {
	case Unsafe:
		cons = fmt.Sprintf("UNSAFE: the auditor found %d anomalies (worst oversell %.3f %%)", anomalies, 100*oversell)
	case Unproven:
		cons = "UNPROVEN: " + s.Why() + ", so nothing shows the stores kept the rules"
	}
	return fmt.Sprintf("%s: %s; %.0f flows/s at P99 %.1f ms in %s; %d core lines.", name, cons, tps, p99, perf, lines)
}
