package reports

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Curve is the outcome of `stockbench curve`: each strategy driven open loop
// at increasing arrival rates until its flow P99 passed the SLO or errors
// appeared. The runs themselves are in Results.Runs with param "rate".
type Curve struct {
	// SLOP99MS is the latency bound: flow P99 in milliseconds.
	SLOP99MS float64 `json:"slo_p99_ms"`
	// Strategies are in run order.
	Strategies []CurvePoint `json:"strategies"`
}

// CurvePoint is one strategy's result on the curve.
type CurvePoint struct {
	Strategy string `json:"strategy"`
	// MaxRate is the highest offered rate (arrivals/s) whose run held the
	// SLO with no errors; 0 when even the lowest did not.
	MaxRate float64 `json:"max_rate"`
	// StoppedAt is the first rate that broke the SLO or had errors (0 when
	// every rate held), and Why says how.
	StoppedAt float64 `json:"stopped_at,omitempty"`
	Why       string  `json:"why,omitempty"`
}

// CurveVerdict says whether a curve run held the SLO: "" when it did, else
// why not (P99 past the bound, errors, dropped arrivals, no flows).
func CurveVerdict(run Run, sloMS float64) string {
	var errs int64
	for _, m := range run.Counts {
		for cls, n := range m {
			if cls != "ok" && cls != "out_of_stock" && cls != "already_final" {
				errs += n
			}
		}
	}
	p99 := run.LatencyMS["flow"].P99
	switch {
	case run.Flows == 0:
		return "no completed flows"
	case errs > 0:
		return fmt.Sprintf("%d errors", errs)
	case run.Counters["open_dropped"] > 0:
		return fmt.Sprintf("%.0f arrivals dropped", run.Counters["open_dropped"])
	case p99 > sloMS:
		return fmt.Sprintf("P99 %.1f ms > %.0f ms", p99, sloMS)
	}
	return ""
}

// curveChart draws flow P99 against offered load, one line per strategy,
// with the SLO as a dashed line: the hockey stick. nil without a curve.
func curveChart(r *Results) (*namedPlotOrNil, error) {
	if r.Curve == nil {
		return nil, nil
	}
	p := newPlot(fmt.Sprintf("P99 flow latency vs offered load (SLO P99 ≤ %.0f ms)", r.Curve.SLOP99MS),
		"offered load (arrivals / s)", "P99 of reserve + confirm (ms) — log scale")
	lo, hi := math.Inf(1), 0.0
	for _, c := range r.Curve.Strategies {
		var xys plotter.XYs
		for _, run := range r.Runs {
			if run.Strategy != c.Strategy || run.Param != "rate" {
				continue
			}
			x, err := strconv.ParseFloat(run.Value, 64)
			if err != nil {
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
func writeCurveChart(dir string, r *Results) (*Chart, error) {
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
		if err := writeAtomic(filepath.Join(dir, "charts", np.name+"."+format), b); err != nil {
			return nil, err
		}
		if format == "svg" {
			c = Chart{Name: np.name, Title: np.p.Title.Text, SVG: b}
		}
	}
	return &c, nil
}
