package reports

import (
	"fmt"

	"github.com/stockbench/stockbench/analysis"
)

// repeatRows lists every run of a repeated row, one line each, for the
// table below the headline: the figures the headline's medians and
// min–max come from. Empty when nothing was repeated.
func repeatRows(a *analysis.Analysis) table {
	repeated := false
	for _, row := range a.Rows {
		repeated = repeated || len(row.Runs) > 1
	}
	if !repeated {
		return table{}
	}
	t := table{Head: []string{"strategy", "scenario", "repeat", "TPS", "flow P99 ms", "flows", "oversold units", "oversell %", "anomalies"}, Align: "llrrrrrrr"}
	for _, row := range a.Rows {
		for _, run := range row.Runs {
			t.Rows = append(t.Rows, []string{run.Strategy, rowLabel(row), fmt.Sprint(max(run.Repeat, 1)), f1(run.TPS),
				f2(run.LatencyMS["flow"].P99), fmt.Sprint(run.Flows), fmt.Sprint(run.Audit.OversoldUnits),
				pct(run.Audit.OversellRate), fmt.Sprint(run.Audit.Count())})
		}
	}
	return t
}
