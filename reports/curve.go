package reports

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// curveChart draws flow P99 against offered load, one line per strategy,
// with the SLO as a dashed line: the hockey stick. nil without a curve.
func curveChart(r *results.Results) (*namedPlotOrNil, error) {
	if r.Curve == nil {
		return nil, nil
	}
	p := newPlot(fmt.Sprintf("P99 flow latency vs offered load (SLO P99 ≤ %.0f ms)", r.Curve.SLOP99MS),
		"offered load (arrivals / s)", "P99 of reserve + confirm (ms) — log scale")
	lo, hi := math.Inf(1), 0.0
	rates, _, _ := analysis.SweepX(r.Sweep)
	for _, c := range r.Curve.Strategies {
		var xys plotter.XYs
		for _, run := range r.Runs {
			if run.Strategy != c.Strategy || run.Param != results.ParamRate {
				continue
			}
			x, ok := rates[run.Value]
			if !ok {
				continue
			}
			y := math.Max(run.LatencyMS["flow"].P99, 0.01)
			xys = append(xys, plotter.XY{X: x, Y: y})
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
		if len(xys) == 0 {
			continue
		}
		if err := addLinePoints(p, c.Strategy, xys); err != nil {
			return nil, err
		}
	}
	if hi == 0 {
		return nil, nil
	}
	slo, err := plotter.NewLine(plotter.XYs{{X: lo, Y: r.Curve.SLOP99MS}, {X: hi, Y: r.Curve.SLOP99MS}})
	if err != nil {
		return nil, err
	}
	slo.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	slo.Color = color.Black
	p.Add(slo)
	p.Legend.Add("SLO", slo)
	p.Legend.Left = true
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.X.Label.Text += " — log scale"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	return &namedPlotOrNil{namedPlot{"curve-p99", p}}, nil
}

// namedPlotOrNil wraps a plot so that "no chart" is a nil pointer.
type namedPlotOrNil struct{ namedPlot }

// writeCurveChart renders the curve chart into dir/charts (PNG and SVG) and
// returns it for the HTML page; nil when the results hold no curve.
func writeCurveChart(dir string, r *results.Results) (*Chart, error) {
	np, err := curveChart(r)
	if err != nil || np == nil {
		return nil, err
	}
	var c Chart
	for _, format := range []string{"svg", "png"} {
		b, err := render(np.namedPlot, format)
		if err != nil {
			return nil, err
		}
		if err := results.WriteFileAtomic(filepath.Join(dir, "charts", np.name+"."+format), b); err != nil {
			return nil, err
		}
		if format == "svg" {
			c = Chart{Name: np.name, Title: np.p.Title.Text, SVG: b}
		}
	}
	return &c, nil
}
