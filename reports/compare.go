package reports

import (
	"fmt"
	"io"
	"strings"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

// CompareTable writes the side-by-side table and returns the number of
// regressed rows. TPS and P99 are medians, with min–max when a file holds
// repeats.
func CompareTable(w io.Writer, vs []analysis.Verdict) int {
	t := table{Head: []string{"strategy", "scenario", "old TPS", "new TPS", "Δ%", "old P99 ms", "new P99 ms", "Δ%", "verdict"}}
	t.Align = figuresAlign(len(t.Head))
	bad := 0
	for _, v := range vs {
		sc := v.Scenario
		if v.Param != "" || v.Value != "" {
			sc += " " + v.Param + "=" + v.Value
		}
		verdict := "ok"
		if len(v.Notes) > 0 {
			verdict = "ok (" + strings.Join(v.Notes, "; ") + ")"
		}
		if len(v.Problems) > 0 {
			bad++
			verdict = "REGRESSION: " + strings.Join(v.Problems, "; ")
		}
		newTPS, newP99, dTPS, dP99 := spreadCell(v.NewTPS, f1), spreadCell(v.NewP99, f2), fmt.Sprintf("%+.1f", v.TPSChangePct), fmt.Sprintf("%+.1f", v.P99ChangePct)
		if v.Missing {
			newTPS, newP99, dTPS, dP99 = "missing", "missing", "", ""
		}
		t.Rows = append(t.Rows, []string{v.Strategy, sc, spreadCell(v.OldTPS, f1), newTPS, dTPS, spreadCell(v.OldP99, f2), newP99, dP99, verdict})
	}
	t.terminal(w)
	return bad
}

// spreadCell formats a spread as its median, with min–max when they differ.
func spreadCell(s results.Spread, format func(float64) string) string {
	if s.Min == s.Max {
		return format(s.Median)
	}
	return format(s.Median) + " (" + format(s.Min) + "–" + format(s.Max) + ")"
}
