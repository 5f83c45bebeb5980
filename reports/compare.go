package reports

import (
	"fmt"
	"io"
	"strings"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

// CompareTable writes the gate's verdicts side by side. TPS and P99 are
// medians, with min–max when a file holds repeats.
func CompareTable(w io.Writer, c analysis.Comparison) {
	t := table{Head: []string{"strategy", "scenario", "old TPS", "new TPS", "Δ%", "old P99 ms", "new P99 ms", "Δ%", "verdict"}}
	t.Align = figuresAlign(len(t.Head))
	for _, v := range c.Verdicts {
		sc := v.Scenario
		if v.Param != "" || v.Value != "" {
			sc += " " + v.Param + "=" + v.Value
		}
		verdict := "ok"
		if len(v.Notes) > 0 {
			verdict = "ok (" + strings.Join(v.Notes, "; ") + ")"
		}
		if v.Regressed() {
			verdict = "REGRESSION: " + strings.Join(v.Problems, "; ")
		}
		newTPS, newP99, dTPS, dP99 := spreadCell(v.NewTPS, f1), spreadCell(v.NewP99, f2), fmt.Sprintf("%+.1f", v.TPSChangePct), fmt.Sprintf("%+.1f", v.P99ChangePct)
		oldTPS, oldP99 := spreadCell(v.OldTPS, f1), spreadCell(v.OldP99, f2)
		switch {
		case v.Missing:
			newTPS, newP99, dTPS, dP99 = "missing", "missing", "", ""
		case v.OldSafety.Kind == "":
			// A row only NEW has.
			oldTPS, oldP99, dTPS, dP99 = "missing", "missing", "", ""
		}
		t.Rows = append(t.Rows, []string{v.Strategy, sc, oldTPS, newTPS, dTPS, oldP99, newP99, dP99, verdict})
	}
	t.terminal(w)
}

// spreadCell formats a spread as its median, with min–max when they differ.
func spreadCell(s results.Spread, format func(float64) string) string {
	if s.Min == s.Max {
		return format(s.Median)
	}
	return format(s.Median) + " (" + format(s.Min) + "–" + format(s.Max) + ")"
}
