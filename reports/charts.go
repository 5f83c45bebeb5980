package reports

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart size: 8 × 4.5 inches, 768 × 432 pixels as PNG.
const (
	chartW = 8 * vg.Inch
	chartH = 4.5 * vg.Inch
)

// Chart is one rendered chart: a file stem, a title and its SVG (kept for
// the HTML page).
type Chart struct {
	Name  string // file stem, e.g. "tps-flash"
	Title string
	SVG   []byte
}

// Charts builds every chart the results support: per scenario TPS, P99,
// oversell and the latency spectrum by strategy, TPS and P99 over time when
// there is a series, and for a sweep one line per strategy against the swept
// parameter (TPS, P99, oversell, CAS retries).
func Charts(a *analysis.Analysis) ([]Chart, error) {
	plots, err := buildPlots(a)
	if err != nil {
		return nil, err
	}
	out := make([]Chart, len(plots))
	for i, np := range plots {
		b, err := render(np, "svg")
		if err != nil {
			return nil, err
		}
		out[i] = Chart{Name: np.name, Title: np.p.Title.Text, SVG: b}
	}
	return out, nil
}

// plainRows are the figures of analysed rows, without their verdicts.
func plainRows(rows []analysis.Row) []results.Row {
	out := make([]results.Row, len(rows))
	for i, r := range rows {
		out[i] = r.Row
	}
	return out
}

type namedPlot struct {
	name string
	p    *plot.Plot
}

func render(np namedPlot, format string) ([]byte, error) {
	w, err := np.p.WriterTo(chartW, chartH, format)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", np.name, err)
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("chart %s: %w", np.name, err)
	}
	return b.Bytes(), nil
}

func buildPlots(a *analysis.Analysis) ([]namedPlot, error) {
	r := a.Results
	rows := plainRows(a.Rows)
	var out []namedPlot
	add := func(name string, p *plot.Plot, err error) error {
		if err != nil {
			return fmt.Errorf("chart %s: %w", name, err)
		}
		out = append(out, namedPlot{name, p})
		return nil
	}
	if r.Sweep != nil {
		for _, m := range sweepMetrics {
			p, err := sweepChart(r.Sweep, rows, m)
			if p == nil && err == nil {
				continue
			}
			if err := add("sweep-"+m.name, p, err); err != nil {
				return nil, err
			}
		}
		if p, err := uslChart(a); p != nil || err != nil {
			if err := add("usl", p, err); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if p, err := faultHeatMap(r); p != nil || err != nil {
		if err := add("fault-matrix", p, err); err != nil {
			return nil, err
		}
	}
	if isFaultMatrix(r) {
		// One timeline per fault column, its windows shaded; bars of 35
		// strategy × fault rows would say less than the heat map.
		for _, sc := range results.Scenarios(r) {
			byClass := map[string][]results.Row{}
			var classes []string
			for _, row := range rows {
				if row.Scenario != sc {
					continue
				}
				c := results.FaultClass(row.Runs[0])
				if _, ok := byClass[c]; !ok {
					classes = append(classes, c)
				}
				byClass[c] = append(byClass[c], row)
			}
			for _, c := range classes {
				if c == "" {
					continue
				}
				for _, m := range timelineMetrics {
					if p, err := timelineChart(byClass[c], sc+" under "+c, m); p != nil || err != nil {
						if err := add(m.name+"-over-time-"+sc+"-"+c, p, err); err != nil {
							return nil, err
						}
					}
				}
			}
		}
		return out, nil
	}
	fl, err := flashCharts(r)
	if err != nil {
		return nil, fmt.Errorf("flash charts: %w", err)
	}
	out = append(out, fl...)
	article := isArticlePreset(r)
	if article {
		// What the preset is for comes first: the article beside this run.
		for _, m := range articleMetrics {
			if p, err := articleChart(rows, m); p != nil || err != nil {
				if err := add("article-"+m.name, p, err); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, sc := range results.Scenarios(r) {
		var rs []results.Row
		var ars []analysis.Row
		for _, row := range a.Rows {
			if row.Scenario == sc {
				rs, ars = append(rs, row.Row), append(ars, row)
			}
		}
		var ref []ArticleFigure
		if article {
			ref = articleFiguresFor(sc)
		}
		p, err := tradeoffChart(ars, sc, ref)
		if p != nil || err != nil {
			if err := add("tradeoff-"+sc, p, err); err != nil {
				return nil, err
			}
		}
		p, err = barChart(rs, "Throughput by strategy — "+sc, "completed reserve+confirm flows / s",
			func(r results.Run) float64 { return r.TPS }, false, func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) })
		if err := add("tps-"+sc, p, err); err != nil {
			return nil, err
		}
		p, err = barChart(rs, "P99 flow latency by strategy — "+sc, "P99 of reserve + confirm (ms)",
			func(r results.Run) float64 { return r.LatencyMS["flow"].P99 }, true, func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) })
		if err := add("p99-"+sc, p, err); err != nil {
			return nil, err
		}
		p, err = barChart(rs, "Oversell rate by strategy — "+sc, "oversold units / confirmed units (%)",
			func(r results.Run) float64 { return 100 * r.Audit.OversellRate }, false, func(v float64) string {
				if v == 0 {
					return "0 (none)"
				}
				return strconv.FormatFloat(v, 'f', 3, 64) + " %"
			})
		if err := add("oversell-"+sc, p, err); err != nil {
			return nil, err
		}
		if p, err := spectrumChart(rs, sc); p != nil || err != nil {
			if err := add("spectrum-"+sc, p, err); err != nil {
				return nil, err
			}
		}
		for _, m := range timelineMetrics {
			if p, err := timelineChart(rs, sc, m); p != nil || err != nil {
				if err := add(m.name+"-over-time-"+sc, p, err); err != nil {
					return nil, err
				}
			}
		}
		for _, m := range driftMetrics {
			if p, err := driftChart(rs, sc, m); p != nil || err != nil {
				if err := add("drift-"+m.name+"-"+sc, p, err); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// writeCharts renders the charts into dir/charts as PNG and SVG and returns
// them.
func writeCharts(dir string, a *analysis.Analysis) ([]Chart, error) {
	plots, err := buildPlots(a)
	if err != nil {
		return nil, err
	}
	// The charts of an earlier report in dir go: a chart this one does
	// not draw must not be left to pass for one of its own.
	if err := os.RemoveAll(filepath.Join(dir, "charts")); err != nil {
		return nil, fmt.Errorf("charts: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "charts"), 0o755); err != nil {
		return nil, fmt.Errorf("charts: %w", err)
	}
	out := make([]Chart, len(plots))
	for i, np := range plots {
		for _, format := range []string{"svg", "png"} {
			b, err := render(np, format)
			if err != nil {
				return nil, err
			}
			if err := results.WriteFileAtomic(filepath.Join(dir, "charts", np.name+"."+format), b); err != nil {
				return nil, err
			}
			if format == "svg" {
				out[i] = Chart{Name: np.name, Title: np.p.Title.Text, SVG: b}
			}
		}
	}
	return out, nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	// Sizes chosen to stay readable at 768×432 and at the HTML page's width.
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.X.Label.TextStyle.Font.Size = vg.Points(12)
	p.Y.Label.TextStyle.Font.Size = vg.Points(12)
	p.X.Tick.Label.Font.Size = vg.Points(11)
	p.Y.Tick.Label.Font.Size = vg.Points(11)
	p.Legend.TextStyle.Font.Size = vg.Points(11)
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks{}, plainTicks{}
	p.Add(plotter.NewGrid())
	return p
}

// barChart draws one bar per row, the median of its repeats, in the
// strategy's colour, with whiskers from the smallest to the largest repeat
// when there are several, and the value written above it; a zero bar still
// gets its label, so "none" is visible. With logIfSpread the Y axis turns
// logarithmic when the largest value is over 20 times the smallest.
func barChart(rows []results.Row, title, ylabel string, val func(results.Run) float64, logIfSpread bool, label func(float64) string) (*plot.Plot, error) {
	p := newPlot(title, "strategy", ylabel)
	spreads := make([]results.Spread, len(rows))
	names := make([]string, len(rows))
	lo, hi, repeats := math.Inf(1), 0.0, 0
	for i, r := range rows {
		spreads[i] = results.SpreadOf(r.Runs, val)
		names[i] = r.Strategy
		lo, hi = math.Min(lo, spreads[i].Min), math.Max(hi, spreads[i].Max)
		repeats = max(repeats, len(r.Runs))
	}
	if repeats > 1 {
		p.X.Label.Text = fmt.Sprintf("strategy — bar: median of %d repeats, whisker: min–max", repeats)
	}
	logY := logIfSpread && lo > 0 && hi/lo > 20
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
		p.Y.Label.Text += " — log scale"
	}
	base := 0.0
	if logY {
		// Bars start at zero, which a log axis cannot show: draw each value
		// as a thick stem from below the smallest value instead.
		base = lo / 2
		p.Y.Min = base
	}
	for i, s := range spreads {
		c := styleOf(rows[i].Strategy).Color
		if logY {
			stem, err := plotter.NewLine(plotter.XYs{{X: float64(i), Y: base}, {X: float64(i), Y: s.Median}})
			if err != nil {
				return nil, err
			}
			stem.Color = c
			stem.Width = vg.Points(28)
			p.Add(stem)
			continue
		}
		bar, err := plotter.NewBarChart(plotter.Values{s.Median}, vg.Points(28))
		if err != nil {
			return nil, err
		}
		bar.XMin = float64(i)
		bar.Color = c
		bar.LineStyle.Width = 0
		p.Add(bar)
	}
	if repeats > 1 {
		w, err := whiskers(spreads, func(i int) float64 { return float64(i) })
		if err != nil {
			return nil, err
		}
		p.Add(w)
	}
	p.NominalX(names...)
	labels := plotter.XYLabels{XYs: make(plotter.XYs, len(rows)), Labels: make([]string, len(rows))}
	for i, s := range spreads {
		labels.XYs[i] = plotter.XY{X: float64(i), Y: math.Max(s.Max, base)}
		labels.Labels[i] = label(s.Median)
	}
	if err := addBarLabels(p, labels); err != nil {
		return nil, err
	}
	if hi == 0 {
		p.Y.Max = 1 // all zero: give the labels room
	} else if logY {
		p.Y.Max = hi * 2
	} else {
		p.Y.Max = hi * 1.15
	}
	return p, nil
}

// whiskers draws min–max bars over the medians of spreads, the i-th at x(i).
func whiskers(spreads []results.Spread, x func(int) float64) (*plotter.YErrorBars, error) {
	e := make(errXYs, len(spreads))
	for i, s := range spreads {
		e[i] = errXY{XY: plotter.XY{X: x(i), Y: s.Median}, Low: s.Median - s.Min, High: s.Max - s.Median}
	}
	w, err := plotter.NewYErrorBars(e)
	if err != nil {
		return nil, err
	}
	w.LineStyle = draw.LineStyle{Color: color.Black, Width: vg.Points(1.5)}
	w.CapWidth = vg.Points(12)
	return w, nil
}

// errXYs are points with an error below (Low) and above (High), for
// gonum's error bars.
type errXY struct {
	plotter.XY
	Low, High float64
}
type errXYs []errXY

func (e errXYs) Len() int                        { return len(e) }
func (e errXYs) XY(i int) (float64, float64)     { return e[i].X, e[i].Y }
func (e errXYs) YError(i int) (float64, float64) { return e[i].Low, e[i].High }
func (e errXYs) XError(i int) (float64, float64) { return e[i].Low, e[i].High }

// nines maps a percentile to the "nines" axis: 50 → 0.3, 90 → 1, 99 → 2…
func nines(q float64) float64 { return -math.Log10(1 - q/100) }

// spectrumChart draws flow latency against percentile on a nines scale,
// one line per strategy.
func spectrumChart(rows []results.Row, sc string) (*plot.Plot, error) {
	p := newPlot("Flow latency spectrum — "+sc, "percentile", "flow latency (ms)")
	p.X.Tick.Marker = plot.ConstantTicks{{Value: nines(50), Label: "50"}, {Value: nines(90), Label: "90"},
		{Value: nines(99), Label: "99"}, {Value: nines(99.9), Label: "99.9"}, {Value: nines(99.99), Label: "99.99"}}
	lo, hi, any := math.Inf(1), 0.0, false
	for _, r := range rows {
		sp := r.Runs[0].Spectrum
		if len(sp) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(sp))
		for j, q := range sp {
			xys[j] = plotter.XY{X: nines(q.Q), Y: math.Max(q.MS, 0.001)}
			lo, hi = math.Min(lo, xys[j].Y), math.Max(hi, xys[j].Y)
		}
		if err := addLinePoints(p, r.Strategy, xys); err != nil {
			return nil, err
		}
		any = true
	}
	if !any {
		return nil, nil
	}
	p.Legend.Left = true
	if hi/lo > 20 {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
		p.Y.Label.Text += " — log scale"
	}
	return p, nil
}

type metric struct {
	name, title, ylabel string
	series              func(results.SeriesPoint) float64
	row                 func(results.Row) (float64, bool)
}

var timelineMetrics = []metric{
	{name: "tps", title: "Throughput over time", ylabel: "flows / s",
		series: func(p results.SeriesPoint) float64 { return float64(p.Flows) }},
	{name: "p99", title: "P99 flow latency over time", ylabel: "P99 of that second (ms)",
		series: func(p results.SeriesPoint) float64 { return p.FlowP99MS }},
}

// timelineChart draws a per-second metric, one line per strategy; nil when
// no run has more than one second.
func timelineChart(rows []results.Row, sc string, m metric) (*plot.Plot, error) {
	p := newPlot(m.title+" — "+sc, "second of the measured phase", m.ylabel)
	if w := faultWindows(rows); len(w) > 0 {
		// Fault windows shaded behind the lines.
		p.Add(faultShade{w})
		p.Title.Text += " (faults shaded)"
	}
	any, top := false, 0.0
	for _, r := range rows {
		s := r.Runs[0].Series
		if len(s) < 2 {
			continue
		}
		xys := make(plotter.XYs, len(s))
		for j, pt := range s {
			xys[j] = plotter.XY{X: float64(pt.Second), Y: m.series(pt)}
			top = math.Max(top, xys[j].Y)
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		st := styleOf(r.Strategy)
		line.Color = st.Color
		line.Dashes = st.Dashes
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(r.Strategy, line)
		any = true
	}
	if !any {
		return nil, nil
	}
	p.Y.Min, p.Y.Max = 0, top*1.35 // headroom for the legend above the lines
	return p, nil
}

var sweepMetrics = []metric{
	{name: "tps", title: "Throughput", ylabel: "flows / s", row: func(r results.Row) (float64, bool) { return r.TPS, true }},
	{name: "p99", title: "P99 flow latency", ylabel: "ms", row: func(r results.Row) (float64, bool) { return r.P99, true }},
	{name: "oversell", title: "Oversell rate", ylabel: "%", row: func(r results.Row) (float64, bool) { return 100 * r.OversellRate, true }},
	{name: "cas-retries", title: "CAS retries per success", ylabel: "retries / success",
		row: func(r results.Row) (float64, bool) { return r.CASRetries, r.HasCASRetries }},
	{name: "service-cpu", title: "Service-tier CPU per flow", ylabel: "µs / flow (harness + service processes)", row: serviceCPUPerFlow},
}

// serviceCPUPerFlow is, in a sweep of the service tier (--param instances
// or service), the CPU per flow of the harness and the service processes
// together (medians of the repeats): in process, the harness's CPU is the
// strategy's code and the generator; with service processes, theirs plus
// the generator's and the API client's. Not drawn for other sweeps.
func serviceCPUPerFlow(r results.Row) (float64, bool) {
	if r.Param != "instances" && r.Param != "service" {
		return 0, false
	}
	var got []results.Run
	for _, run := range r.Runs {
		if run.Cost != nil && run.Cost.HarnessCPUUSPerFlow != nil {
			got = append(got, run)
		}
	}
	if len(got) == 0 {
		return 0, false
	}
	return results.SpreadOf(got, func(run results.Run) float64 {
		v := *run.Cost.HarnessCPUUSPerFlow
		if run.Cost.ServiceCPUUSPerFlow != nil {
			v += *run.Cost.ServiceCPUUSPerFlow
		}
		return v
	}).Median, true
}

// sweepChart draws one line per strategy against the swept parameter. The
// values sit at their numeric position when they are numbers, else evenly.
func sweepChart(sw *results.Sweep, rows []results.Row, m metric) (*plot.Plot, error) {
	xs, unit, numeric := analysis.SweepX(sw)
	xlabel := sw.Param
	if unit != "" {
		xlabel += " (" + unit + ")"
	}
	p := newPlot(m.title+" vs "+sw.Param, xlabel, m.ylabel)
	if !numeric {
		xs = make(map[string]float64, len(sw.Values))
		ticks := plot.ConstantTicks{}
		for i, v := range sw.Values {
			xs[v] = float64(i)
			ticks = append(ticks, plot.Tick{Value: float64(i), Label: v})
		}
		p.X.Tick.Marker = ticks
	}
	var strategies []string
	for _, r := range rows {
		if !slices.Contains(strategies, r.Strategy) {
			strategies = append(strategies, r.Strategy)
		}
	}
	any := false
	for _, name := range strategies {
		var xys plotter.XYs
		for _, v := range sw.Values {
			for _, r := range rows {
				if r.Strategy == name && r.Value == v {
					if y, ok := m.row(r); ok {
						xys = append(xys, plotter.XY{X: xs[v], Y: y})
					}
				}
			}
		}
		if len(xys) == 0 {
			continue
		}
		if err := addLinePoints(p, name, xys); err != nil {
			return nil, err
		}
		any = true
	}
	if !any {
		return nil, nil
	}
	return p, nil
}

// addLinePoints adds a strategy's series to a chart as a line with markers,
// in the strategy's colour, dashes and marker, with a legend entry.
func addLinePoints(p *plot.Plot, name string, xys plotter.XYs) error {
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	st := styleOf(name)
	line.Color, line.Dashes = st.Color, st.Dashes
	line.Width = vg.Points(1.5)
	points.Color, points.Shape, points.Radius = st.Color, st.Marker, vg.Points(3.5)
	p.Add(line, points)
	p.Legend.Add(name, line, points)
	return nil
}

// addBarLabels writes value labels centred just above their bars.
func addBarLabels(p *plot.Plot, labels plotter.XYLabels) error {
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign = draw.XCenter
	}
	l.Offset = vg.Point{Y: vg.Points(4)}
	p.Add(l)
	return nil
}
