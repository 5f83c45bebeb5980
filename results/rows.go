package results

import (
	"slices"
	"sort"
)

// Row is one strategy on one scenario (and sweep value), its repeats
// folded to medians: the unit every chart and the recommendation work on.
type Row struct {
	Strategy, Scenario string
	// Param and Value name the swept parameter and its value (sweeps only).
	Param, Value           string
	Runs                   []Run
	TPS, P99, OversellRate float64
	ServerCPU              float64
	HasCPU                 bool
	CASRetries             float64
	HasCASRetries          bool
	CoreLines              int
	// Anomalies counts every UNSAFE anomaly class (audit.Classes) over
	// the repeats. What it means for the row's safety is decided in one
	// place, analysis.SafetyOf.
	Anomalies int64
}

// Rows groups the runs by scenario, sweep value and strategy, in the order
// they first appear.
func Rows(r *Results) []Row {
	type key struct{ strategy, scenario, value string }
	var order []key
	by := map[key][]Run{}
	for _, run := range r.Runs {
		k := key{run.Strategy, run.Scenario, run.Value}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], run)
	}
	out := make([]Row, 0, len(order))
	for _, k := range order {
		runs := by[k]
		row := Row{Strategy: k.strategy, Scenario: k.scenario, Param: runs[0].Param, Value: k.value, Runs: runs, CoreLines: runs[0].CoreLines}
		row.TPS = median(runs, func(r Run) float64 { return r.TPS })
		row.P99 = median(runs, func(r Run) float64 { return r.LatencyMS["flow"].P99 })
		row.OversellRate = median(runs, func(r Run) float64 { return r.Audit.OversellRate })
		if runs[0].Harness.ServerCPUPct != nil {
			row.HasCPU = true
			row.ServerCPU = median(runs, ServerCPU)
		}
		if _, ok := runs[0].Counters["cas_retries_per_success"]; ok {
			row.HasCASRetries = true
			row.CASRetries = median(runs, func(r Run) float64 { return r.Counters["cas_retries_per_success"] })
		}
		for _, run := range runs {
			row.Anomalies += run.Audit.Count()
		}
		out = append(out, row)
	}
	return out
}

// ServerCPU is the run's MySQL + Redis CPU (percent of one core), 0 when
// it was not sampled.
func ServerCPU(r Run) float64 {
	if p := r.Harness.ServerCPUPct; p != nil {
		return *p
	}
	return 0
}

// Scenarios lists the scenarios of the results in order of appearance.
func Scenarios(r *Results) []string {
	var out []string
	for _, run := range r.Runs {
		if !slices.Contains(out, run.Scenario) {
			out = append(out, run.Scenario)
		}
	}
	return out
}

func median(runs []Run, f func(Run) float64) float64 { return SpreadOf(runs, f).Median }

// spreadOf is min / median / max of f over runs (the median of an even
// count is the mean of the middle two).
func SpreadOf(runs []Run, f func(Run) float64) Spread {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	return SpreadOfValues(xs)
}

// SpreadOfValues is the min / median / max of xs, which it sorts.
func SpreadOfValues(xs []float64) Spread {
	sort.Float64s(xs)
	n := len(xs)
	if n == 0 {
		return Spread{}
	}
	med := xs[n/2]
	if n%2 == 0 {
		med = (xs[n/2-1] + xs[n/2]) / 2
	}
	return Spread{Min: xs[0], Median: med, Max: xs[n-1]}
}

// Aggregates computes min / median / max of the headline figures over the
// repeats of each strategy, scenario and sweep value.
func Aggregates(r *Results) []Aggregate {
	rows := Rows(r)
	out := make([]Aggregate, len(rows))
	for i, row := range rows {
		rs := row.Runs
		out[i] = Aggregate{Strategy: row.Strategy, Scenario: row.Scenario, Value: row.Value, Repeats: len(rs),
			TPS:          SpreadOf(rs, func(r Run) float64 { return r.TPS }),
			FlowP99MS:    SpreadOf(rs, func(r Run) float64 { return r.LatencyMS["flow"].P99 }),
			OversellRate: SpreadOf(rs, func(r Run) float64 { return r.Audit.OversellRate }),
			ServerCPUPct: SpreadOf(rs, ServerCPU),
		}
	}
	return out
}
