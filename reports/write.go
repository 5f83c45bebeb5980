// Package reports renders a results.Results — read back from disk or fresh
// from a run — into the terminal table, summary.md, CSV, gonum/plot charts,
// index.html, the compare verdicts and the recommendation. It only renders:
// the model lives in the results package.
package reports

import (
	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

// WriteAll renders every output from r into dir: results.json,
// summary.md, summary.csv, series.csv, charts/*.png|svg and index.html.
func WriteAll(dir string, a *analysis.Analysis) error {
	if err := results.WriteJSON(dir, a.Results); err != nil {
		return err
	}
	return Render(dir, a)
}

// Render re-renders everything but results.json from r into dir.
func Render(dir string, a *analysis.Analysis) error {
	r := a.Results
	if err := writeSummary(dir, a); err != nil {
		return err
	}
	if err := writeCSV(dir, r); err != nil {
		return err
	}
	charts, err := writeCharts(dir, a)
	if err != nil {
		return err
	}
	if c, err := writeCurveChart(dir, r); err != nil {
		return err
	} else if c != nil {
		charts = append([]Chart{*c}, charts...)
	}
	return writeHTML(dir, a, charts)
}
