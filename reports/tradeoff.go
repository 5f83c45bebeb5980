package reports

import (
	"image/color"
	"math"
	"slices"
	"strconv"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// tradeoffChart draws throughput (x) against flow P99 (y, log): one point
// per strategy at the median of its repeats, whiskers min–max both ways,
// the marker filled when the auditor found nothing and hollow inside a red
// ring, with a red label, when it found any anomaly. ref adds the article's
// published points (a cross in the strategy's colour, labelled as the
// article's). nil when no strategy completed a flow.
func tradeoffChart(rows []analysis.Row, sc string, ref []ArticleFigure) (*plot.Plot, error) {
	p := newPlot("Throughput vs P99 — "+sc, "completed flows / s (TPS)", "flow P99 (ms) — log scale")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.Legend.Top, p.Legend.Left = true, false
	lo, hi, xmin, xmax := math.Inf(1), 0.0, math.Inf(1), 0.0
	any, unsafe, repeats := false, false, false
	var labels plotter.XYLabels
	var labelColors []color.Color
	point := func(x, y float64, sty draw.GlyphStyle) (*plotter.Scatter, error) {
		s, err := plotter.NewScatter(plotter.XYs{{X: x, Y: y}})
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = sty
		return s, nil
	}
	for _, r := range rows {
		tps := results.SpreadOf(r.Runs, func(r results.Run) float64 { return r.TPS })
		p99 := results.SpreadOf(r.Runs, func(r results.Run) float64 { return math.Max(r.LatencyMS["flow"].P99, 0.001) })
		if tps.Max <= 0 {
			continue
		}
		any = true
		lo, hi, xmax = math.Min(lo, p99.Min), math.Max(hi, p99.Max), math.Max(xmax, tps.Max)
		xmin = math.Min(xmin, tps.Min)
		st := styleOf(r.Strategy)
		if len(r.Runs) > 1 {
			repeats = true
			e := errXYs{{XY: plotter.XY{X: tps.Median, Y: p99.Median}, Low: p99.Median - p99.Min, High: p99.Max - p99.Median}}
			yw, err := plotter.NewYErrorBars(e)
			if err != nil {
				return nil, err
			}
			e[0].Low, e[0].High = tps.Median-tps.Min, tps.Max-tps.Median
			xw, err := plotter.NewXErrorBars(e)
			if err != nil {
				return nil, err
			}
			yw.LineStyle = draw.LineStyle{Color: st.Color, Width: vg.Points(1.5)}
			xw.LineStyle = yw.LineStyle
			p.Add(yw, xw)
		}
		m := st.Marker
		m.Hollow = r.Safety.Kind == analysis.Unsafe
		s, err := point(tps.Median, p99.Median, draw.GlyphStyle{Color: st.Color, Radius: vg.Points(6), Shape: m})
		if err != nil {
			return nil, err
		}
		p.Add(s)
		name := r.Strategy
		c := color.Color(color.Black)
		if r.Safety.Kind == analysis.Unsafe {
			unsafe = true
			ring, err := point(tps.Median, p99.Median, draw.GlyphStyle{Color: anomalyColor, Radius: vg.Points(11), Shape: Marker{Shape: ShapeCircle, Hollow: true}})
			if err != nil {
				return nil, err
			}
			p.Add(ring)
			name += " — UNSAFE"
			c = anomalyColor
		}
		labels.XYs = append(labels.XYs, plotter.XY{X: tps.Median, Y: p99.Median})
		labels.Labels = append(labels.Labels, name)
		labelColors = append(labelColors, c)
	}
	if !any {
		return nil, nil
	}
	for _, f := range ref {
		if !f.HasLoad {
			continue
		}
		s, err := point(f.TPS, f.P99MS, draw.GlyphStyle{Color: styleOf(f.Strategy).Color, Radius: vg.Points(6), Shape: draw.CrossGlyph{}})
		if err != nil {
			return nil, err
		}
		p.Add(s)
		lo, hi, xmax = math.Min(lo, f.P99MS), math.Max(hi, f.P99MS), math.Max(xmax, f.TPS)
		xmin = math.Min(xmin, f.TPS)
		labels.XYs = append(labels.XYs, plotter.XY{X: f.TPS, Y: f.P99MS})
		labels.Labels = append(labels.Labels, "article: "+f.Strategy)
		labelColors = append(labelColors, color.Gray{Y: 0x55})
	}
	if unsafe {
		p.Legend.Add("red ring, hollow: audit found anomalies", legendGlyph(anomalyColor, Marker{Shape: ShapeCircle, Hollow: true}))
	}
	if slices.ContainsFunc(ref, func(f ArticleFigure) bool { return f.HasLoad }) {
		p.Legend.Add("× the article's published figure", legendGlyph(color.Gray{Y: 0x55}, draw.CrossGlyph{}))
	}
	if repeats {
		p.X.Label.Text += " — point: median, whiskers: min–max of the repeats"
	}
	xspan := xmax * 1.3 // room for the labels right of the points
	if xmin > 0 && xmax/xmin > 8 {
		// Points an order of magnitude apart (the article's, often) would
		// crowd the slow ones into a corner: log X too.
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{}
		p.X.Label.Text += " — log scale"
		p.X.Min, p.X.Max = xmin/1.5, xmax*3
		xspan = math.Log10(p.X.Max / p.X.Min)
	} else {
		p.X.Tick.Marker = plainTicks{}
		p.X.Min, p.X.Max = 0, xspan
	}
	p.Y.Min, p.Y.Max = lo/2, hi*3
	if err := addPointLabels(p, labels, labelColors, p.X.Scale, xspan, math.Log10(hi*3)-math.Log10(lo/2)); err != nil {
		return nil, err
	}
	return p, nil
}

// addPointLabels writes each label beside its point: right of it, else
// left, below or above, whichever first clears the labels and points
// already placed (positions in fractions of the axes: xspan linear or
// decades on a log X, yspan decades).
func addPointLabels(p *plot.Plot, labels plotter.XYLabels, colors []color.Color, xscale plot.Normalizer, xspan, yspan float64) error {
	_, logX := xscale.(plot.LogScale)
	type box struct{ x0, y0, x1, y1 float64 }
	overlaps := func(a, b box) bool { return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1 }
	var taken []box
	pos := make([][2]float64, len(labels.XYs))
	for i, xy := range labels.XYs {
		x, y := xy.X/xspan, math.Log10(xy.Y)/yspan
		if logX {
			x = math.Log10(xy.X) / xspan
		}
		pos[i] = [2]float64{x, y}
		taken = append(taken, box{x - 0.02, y - 0.03, x + 0.02, y + 0.03})
	}
	const charW, lineH, gap = 0.0095, 0.055, 0.025
	for i, xy := range labels.XYs {
		x, y := pos[i][0], pos[i][1]
		w := charW * float64(len([]rune(labels.Labels[i])))
		type place struct {
			b      box
			xa     text.XAlignment
			ya     text.YAlignment
			dx, dy vg.Length
		}
		cands := []place{
			{box{x + gap, y - lineH/2, x + gap + w, y + lineH/2}, draw.XLeft, draw.YCenter, vg.Points(16), 0},
			{box{x - gap - w, y - lineH/2, x - gap, y + lineH/2}, draw.XRight, draw.YCenter, -vg.Points(16), 0},
			{box{x - w/2, y - gap - lineH, x + w/2, y - gap}, draw.XCenter, draw.YTop, 0, -vg.Points(15)},
			{box{x - w/2, y + gap, x + w/2, y + gap + lineH}, draw.XCenter, draw.YBottom, 0, vg.Points(15)},
		}
		best := cands[0]
	search:
		for _, c := range cands {
			for j, t := range taken {
				if j != i && overlaps(c.b, t) {
					continue search
				}
			}
			best = c
			break
		}
		taken = append(taken, best.b)
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{xy}, Labels: labels.Labels[i : i+1]})
		if err != nil {
			return err
		}
		l.TextStyle[0].Color = colors[i]
		l.TextStyle[0].XAlign, l.TextStyle[0].YAlign = best.xa, best.ya
		l.Offset = vg.Point{X: best.dx, Y: best.dy}
		p.Add(l)
	}
	return nil
}

// plainTicks are gonum's default ticks labelled without trailing zeros.
type plainTicks struct{}

// Ticks implements plot.Ticker.
func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			// Rounded to 12 digits first: a tick at 0.4 × 3 is
			// 1.2000000000000002 in floating point.
			v, _ := strconv.ParseFloat(strconv.FormatFloat(ts[i].Value, 'g', 12, 64), 64)
			ts[i].Label = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	return ts
}

// logTicks label a log axis at 1, 2 and 5 times the powers of ten when it
// spans two decades or less (plot.LogTicks would label one tick or none),
// else at the powers of ten.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(min, max float64) []plot.Tick {
	if min <= 0 || max <= min {
		return nil
	}
	steps := []float64{1, 2, 5}
	if math.Log10(max/min) > 2 {
		steps = []float64{1}
	}
	var ts []plot.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < min || v > max {
				continue
			}
			t := plot.Tick{Value: v}
			if slices.Contains(steps, m) {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// legendGlyph is a legend-only marker.
func legendGlyph(c color.Color, shape draw.GlyphDrawer) plot.Thumbnailer {
	s, _ := plotter.NewScatter(plotter.XYs{{}})
	s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(5), Shape: shape}
	return s
}

// articleMetric is one figure the article charts compare.
type articleMetric struct {
	name, title, ylabel string
	log                 bool
	article             func(ArticleFigure) (float64, bool)
	measured            func(results.Run) float64
	format              func(float64) string
}

var articleMetrics = []articleMetric{
	{name: "tps", title: "Throughput: the article's figure beside this run's", ylabel: "completed flows / s",
		article:  func(f ArticleFigure) (float64, bool) { return f.TPS, f.HasLoad },
		measured: func(r results.Run) float64 { return r.TPS },
		format:   func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }},
	{name: "p99", title: "P99 latency: the article's figure beside this run's", ylabel: "P99 (ms) — log scale", log: true,
		article:  func(f ArticleFigure) (float64, bool) { return f.P99MS, f.HasLoad },
		measured: func(r results.Run) float64 { return r.LatencyMS["flow"].P99 },
		format:   short},
	{name: "oversell", title: "Oversell: the article's figure beside this run's", ylabel: "oversell (%)",
		article:  func(f ArticleFigure) (float64, bool) { return f.OversellPct, true },
		measured: func(r results.Run) float64 { return 100 * r.Audit.OversellRate },
		format:   short},
}

// short writes a figure with three significant digits, never in
// exponent form.
func short(v float64) string {
	if math.Abs(v) >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// articleChart draws, per strategy the article measured, two bars: this
// run's (filled, in the strategy's colour, whiskers min–max over repeats)
// and the article's (white with the strategy's colour as outline). nil when
// the run has none of the article's strategies.
func articleChart(rows []results.Row, m articleMetric) (*plot.Plot, error) {
	p := newPlot(m.title, "strategy (scenario)", m.ylabel)
	var names []string
	var measured []results.Spread
	var quoted []float64
	var styles []Style
	for _, f := range ArticleFigures {
		v, ok := m.article(f)
		if !ok {
			continue
		}
		for _, r := range rows {
			if r.Strategy == f.Strategy && r.Scenario == f.Scenario && r.Value == "" {
				names = append(names, f.Strategy+" ("+f.Scenario+")")
				measured = append(measured, results.SpreadOf(r.Runs, m.measured))
				quoted = append(quoted, v)
				styles = append(styles, styleOf(f.Strategy))
			}
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	hi := 0.0
	for i := range names {
		hi = math.Max(hi, math.Max(measured[i].Max, quoted[i]))
	}
	base := 0.0
	if m.log {
		// Nothing is zero on a log axis: floor the values at a tenth of
		// the smallest positive one.
		floor := math.Inf(1)
		for i := range names {
			for _, v := range []float64{measured[i].Min, quoted[i]} {
				if v > 0 {
					floor = math.Min(floor, v)
				}
			}
		}
		if math.IsInf(floor, 1) {
			floor = 1
		}
		base = floor / 4
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
		p.Y.Min = base
	}
	const half = 0.2 // each bar's offset from the strategy's slot
	w := vg.Points(24)
	var labels plotter.XYLabels
	for i := range names {
		for j, v := range []float64{measured[i].Median, quoted[i]} {
			x := float64(i) - half + 2*half*float64(j)
			bar, err := plotter.NewBarChart(plotter.Values{math.Max(v, base) - base}, w)
			if err != nil {
				return nil, err
			}
			bar.XMin = x
			if m.log {
				// A log axis needs bars that start above zero: draw the bar
				// from base by stacking it on an invisible one.
				under, err := plotter.NewBarChart(plotter.Values{base}, w)
				if err != nil {
					return nil, err
				}
				under.XMin, under.Color, under.LineStyle.Width = x, color.Transparent, 0
				bar.StackOn(under)
			}
			if j == 0 {
				bar.Color, bar.LineStyle.Width = styles[i].Color, 0
			} else {
				bar.Color = color.White
				bar.LineStyle = draw.LineStyle{Color: styles[i].Color, Width: vg.Points(2.5)}
			}
			p.Add(bar)
			top := v
			if j == 0 {
				top = measured[i].Max
			}
			labels.XYs = append(labels.XYs, plotter.XY{X: x, Y: math.Max(top, base)})
			text := m.format(v)
			if j == 1 {
				text = "article " + text
			}
			labels.Labels = append(labels.Labels, text)
		}
	}
	repeats := false
	for i := range measured {
		repeats = repeats || measured[i].Min != measured[i].Max
	}
	if repeats {
		wk, err := whiskers(measured, func(i int) float64 { return float64(i) - half })
		if err != nil {
			return nil, err
		}
		p.Add(wk)
	}
	if err := addBarLabels(p, labels); err != nil {
		return nil, err
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4 // the outer bars' labels stay inside
	mb, _ := plotter.NewBarChart(plotter.Values{1}, w)
	mb.Color, mb.LineStyle.Width = color.Gray{Y: 0x77}, 0
	ab, _ := plotter.NewBarChart(plotter.Values{1}, w)
	ab.Color, ab.LineStyle = color.White, draw.LineStyle{Color: color.Gray{Y: 0x77}, Width: vg.Points(2.5)}
	p.Legend.Add("measured in this run (filled)", mb)
	p.Legend.Add("published by the article (outline)", ab)
	switch {
	case hi == 0:
		p.Y.Max = 1
	case m.log:
		p.Y.Max = hi * 4
	default:
		p.Y.Max = hi * 1.35 // room for the legend
	}
	return p, nil
}
