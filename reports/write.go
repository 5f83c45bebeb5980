// Package reports renders a results.Results — read back from disk or fresh
// from a run — into the terminal table, summary.md, CSV, gonum/plot charts,
// index.html, the compare verdicts and the recommendation. It only renders:
// the model lives in the results package.
package reports

import "github.com/stockbench/stockbench/results"

// WriteAll renders every output from r into dir: results.json,
// summary.md, summary.csv, series.csv, charts/*.png|svg and index.html.
func WriteAll(dir string, r *results.Results) error {
	if err := results.WriteJSON(dir, r); err != nil {
		return err
	}
	return Render(dir, r)
}

// Render re-renders everything but results.json from r into dir.
func Render(dir string, r *results.Results) error {
	if err := WriteSummary(dir, r); err != nil {
		return err
	}
	if err := WriteCSV(dir, r); err != nil {
		return err
	}
	charts, err := WriteCharts(dir, r)
	if err != nil {
		return err
	}
	if c, err := writeCurveChart(dir, r); err != nil {
		return err
	} else if c != nil {
		charts = append([]Chart{*c}, charts...)
	}
	return WriteHTML(dir, r, charts)
}
