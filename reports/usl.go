package reports

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/stockbench/stockbench/analysis"
)

// uslChart draws a buyers sweep's throughput against concurrency: each
// run a point in its strategy's colour and marker, and the USL curve
// fitted to them (analysis.Scalability) as a line, its σ, κ and R² in the
// legend. nil when no strategy could be fitted.
func uslChart(a *analysis.Analysis) (*plot.Plot, error) {
	fits := a.Scalability
	if len(fits) == 0 {
		return nil, nil
	}
	xs, _, ok := analysis.SweepX(a.Results.Sweep)
	if !ok {
		return nil, nil
	}
	p := newPlot("Throughput vs concurrency, USL fit", "buyers (closed loop)", "flows / s")
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	any := false
	top := 0.0
	for _, f := range fits {
		if f.Err != "" {
			continue
		}
		var pts plotter.XYs
		lo, hi := math.Inf(1), 0.0
		for _, run := range a.Results.Runs {
			if run.Strategy != f.Strategy || run.Scenario != f.Scenario {
				continue
			}
			if n, ok := xs[run.Value]; ok && run.TPS > 0 {
				pts = append(pts, plotter.XY{X: n, Y: run.TPS})
				lo, hi, top = min(lo, n), max(hi, n), max(top, run.TPS)
			}
		}
		if len(pts) == 0 {
			continue
		}
		st := styleOf(f.Strategy)
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		sc.Color, sc.Shape, sc.Radius = st.Color, st.Marker, vg.Points(3.5)
		// The curve, sampled evenly in log N over the measured range.
		var curve plotter.XYs
		const steps = 64
		for i := 0; i <= steps; i++ {
			n := lo * math.Pow(hi/lo, float64(i)/steps)
			curve = append(curve, plotter.XY{X: n, Y: f.Fit.X(n)})
			top = max(top, f.Fit.X(n))
		}
		line, err := plotter.NewLine(curve)
		if err != nil {
			return nil, err
		}
		line.Color, line.Dashes, line.Width = st.Color, st.Dashes, vg.Points(1.5)
		p.Add(line, sc)
		p.Legend.Add(fmt.Sprintf("%s σ=%.2f κ=%.1e R²=%.2f", f.Strategy, f.Fit.Sigma, f.Fit.Kappa, f.Fit.R2), line, sc)
		any = true
	}
	if !any {
		return nil, nil
	}
	p.Y.Min, p.Y.Max = 0, top*1.45 // room for the legend above the curves
	return p, nil
}

// uslTable is the fits of a buyers sweep for summary.md and index.html:
// contention σ, coherency κ, a lone buyer's rate λ, the peak N* and the
// throughput there, R² and the points fitted; no head without fits.
func uslTable(a *analysis.Analysis) table {
	if len(a.Scalability) == 0 {
		return table{}
	}
	t := table{Head: []string{"strategy", "scenario", "σ (contention)", "κ (coherency)", "λ flows/s per buyer", "peak N*", "flows/s at N*", "R²", "runs"}, Align: "llrrrrrrr"}
	for _, f := range a.Scalability {
		if f.Err != "" {
			t.Rows = append(t.Rows, []string{f.Strategy, f.Scenario, "no fit: " + f.Err, "", "", "", "", "", ""})
			continue
		}
		u := f.Fit
		peak := "none (κ=0)"
		if !math.IsInf(u.PeakN, 1) {
			peak = f0(u.PeakN)
		}
		t.Rows = append(t.Rows, []string{f.Strategy, f.Scenario, fmt.Sprintf("%.3f", u.Sigma), fmt.Sprintf("%.2g", u.Kappa), f1(u.Lambda),
			peak, f0(u.PeakX), fmt.Sprintf("%.3f", u.R2), fmt.Sprint(u.Points)})
	}
	return t
}
