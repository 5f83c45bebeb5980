package reports

import (
	"fmt"
	"strings"

	"github.com/stockbench/stockbench/results"
)

// repeatRows lists every run of a repeated row, one line each, for the
// table below the headline: the figures the headline's medians and
// min–max come from. Empty when nothing was repeated.
func repeatRows(r *results.Results) (head []string, rows [][]string) {
	repeated := false
	for _, row := range results.Rows(r) {
		repeated = repeated || len(row.Runs) > 1
	}
	if !repeated {
		return nil, nil
	}
	head = []string{"strategy", "scenario", "repeat", "TPS", "flow P99 ms", "flows", "oversold units", "oversell %", "anomalies"}
	for _, row := range results.Rows(r) {
		for _, run := range row.Runs {
			rows = append(rows, []string{run.Strategy, rowLabel(row), fmt.Sprint(max(run.Repeat, 1)), f1(run.TPS),
				f2(run.LatencyMS["flow"].P99), fmt.Sprint(run.Flows), fmt.Sprint(run.Audit.OversoldUnits),
				pct(run.Audit.OversellRate), fmt.Sprint(run.Audit.Count())})
		}
	}
	return head, rows
}

// repeatsMarkdown renders the repeats table of summary.md, or "".
func repeatsMarkdown(r *results.Results) string {
	head, rows := repeatRows(r)
	if head == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Repeats (each run the headline folds)\n\n| " + strings.Join(head, " | ") + " |\n|---|---|" + strings.Repeat("---:|", len(head)-2) + "\n")
	for _, row := range rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	return b.String()
}
