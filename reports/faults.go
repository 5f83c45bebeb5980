package reports

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/stockbench/stockbench/results"
)

// isFaultMatrix reports whether the results are `stockbench faults`'s: one
// plan per fault column (runs labelled fault=COLUMN).
func isFaultMatrix(r *results.Results) bool {
	for _, run := range r.Runs {
		if run.Param == results.ParamFault {
			return true
		}
	}
	return false
}

// cellText is a matrix cell in words: the worst anomaly (or "clean") and
// the outage.
func cellText(c *results.FaultCell) string {
	if c == nil {
		return "—"
	}
	if c.NotApplied == c.Runs {
		return "not exercised: the fault never took effect"
	}
	s := "clean"
	if c.Anomalies > 0 {
		s = fmt.Sprintf("%d %s", c.WorstCount, c.Worst)
		if c.Anomalies > c.WorstCount {
			s += fmt.Sprintf(" (+%d more)", c.Anomalies-c.WorstCount)
		}
	}
	s += fmt.Sprintf(" · outage %d s", c.OutageSec)
	switch {
	case c.RecoverSec == -1:
		s += " · not recovered"
	case c.RecoverSec >= 0:
		s += fmt.Sprintf(" · back in %.1f s", c.RecoverSec)
	}
	if len(c.FaultErrors) > 0 {
		s += " · fault error"
	}
	if c.NotApplied > 0 {
		s += fmt.Sprintf(" · %d of %d runs not exercised", c.NotApplied, c.Runs)
	}
	return s
}

// faultTable is the fault matrix as a table of cells in words; no head
// without faults.
func faultTable(r *results.Results) table {
	m := results.Faults(r)
	if len(m.Classes) == 0 {
		return table{}
	}
	t := table{Head: append([]string{"strategy"}, m.Classes...)}
	for _, s := range m.Strategies {
		row := []string{s}
		for _, c := range m.Classes {
			row = append(row, cellText(m.Cell(s, c)))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// faultRunRows are one line per run under faults: the timeline and what it
// did.
func faultRunRows(r *results.Results) table {
	var rows [][]string
	head := []string{"strategy", "scenario", "faults (start–end s)", "outage s", "recover s", "errors in window", "errors outside", "units lost", "units re-sold", "anomalies end of load", "anomalies after settle"}
	for _, run := range r.Runs {
		if len(run.Faults) == 0 {
			continue
		}
		var tl []string
		for _, f := range run.Faults {
			t := fmt.Sprintf("%s (%.1f–%.1f)", f.Spec, f.StartSec, f.EndSec)
			if !f.Applied {
				t = f.Spec + " (not applied)"
			}
			if f.Error != "" {
				t += ": " + f.Error
			}
			tl = append(tl, t)
		}
		im := run.FaultImpact
		if im == nil {
			im = &results.FaultImpact{}
		}
		rec := "n/a"
		if im.RecoverSec != nil {
			rec = fmt.Sprintf("%.1f", *im.RecoverSec)
			if *im.RecoverSec < 0 {
				rec = "never"
			}
		}
		eol := "n/a"
		if run.AuditEndOfLoad != nil {
			eol = fmt.Sprint(run.AuditEndOfLoad.Count())
		}
		rows = append(rows, []string{run.Strategy, label(run), strings.Join(tl, "; "), fmt.Sprint(im.OutageSec), rec,
			classCounts(im.ErrorsInWindow), classCounts(im.ErrorsOutside), fmt.Sprint(im.UnitsLost), fmt.Sprint(im.UnitsResold),
			eol, fmt.Sprint(run.Audit.Count())})
	}
	return table{Head: head, Rows: rows}
}

func classCounts(m map[string]int64) string {
	if len(m) == 0 {
		return "0"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// faultsView is summary.md's fault section.
type faultsView struct {
	Persistence  string
	Matrix, Runs table
}

// faultsOf is the fault section of r; nil without faults.
func faultsOf(r *results.Results) *faultsView {
	matrix := faultTable(r)
	if matrix.Head == nil {
		return nil
	}
	return &faultsView{persistenceOf(r), matrix, faultRunRows(r)}
}

func persistenceOf(r *results.Results) string {
	if r.Env.RedisPersistence == "" {
		return "not set by stockbench"
	}
	return r.Env.RedisPersistence
}

// heatColor is a cell's colour: green clean and served throughout, amber
// clean with an outage, red with an anomaly (darker the more).
func heatColor(c *results.FaultCell) color.RGBA {
	switch {
	case c == nil:
		return color.RGBA{0xee, 0xee, 0xee, 0xff}
	case c.Anomalies > 0:
		d := uint8(math.Min(120, 30*math.Log10(1+float64(c.Anomalies))))
		return color.RGBA{0xe0 - d, 0x40 - d/4, 0x40 - d/4, 0xff}
	case c.OutageSec > 0 || c.RecoverSec == -1:
		return color.RGBA{0xf5, 0xc2, 0x42, 0xff}
	}
	return color.RGBA{0x7b, 0xc8, 0x7b, 0xff}
}

// heatCells draws the matrix: one rectangle per cell with its figures.
type heatCells struct {
	m results.FaultMatrix
}

func (h heatCells) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := draw.TextStyle{Color: color.Black, Font: p.X.Tick.Label.Font, XAlign: draw.XCenter, YAlign: draw.YCenter, Handler: p.X.Tick.Label.Handler}
	sty.Font.Size = vg.Points(9)
	for yi, s := range h.m.Strategies {
		for xi, cl := range h.m.Classes {
			cell := h.m.Cell(s, cl)
			x0, x1 := trX(float64(xi)-0.48), trX(float64(xi)+0.48)
			y0, y1 := trY(float64(yi)-0.46), trY(float64(yi)+0.46)
			c.FillPolygon(heatColor(cell), []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
			txt := "—"
			if cell != nil {
				txt = "clean"
				if cell.Anomalies > 0 {
					txt = fmt.Sprintf("%d anomalies", cell.Anomalies)
				}
				txt += fmt.Sprintf("\n%d s outage", cell.OutageSec)
			}
			c.FillText(sty, vg.Point{X: (x0 + x1) / 2, Y: (y0 + y1) / 2}, txt)
		}
	}
}

// faultHeatMap is the fault matrix as a heat map; nil without faults.
func faultHeatMap(r *results.Results) (*plot.Plot, error) {
	m := results.Faults(r)
	if len(m.Classes) == 0 {
		return nil, nil
	}
	p := newPlot("Fault matrix: anomalies after settle, seconds without a flow", "fault", "strategy")
	p.Legend.Top = false
	p.Add(heatCells{m})
	p.NominalX(m.Classes...)
	p.NominalY(m.Strategies...)
	p.X.Min, p.X.Max = -0.5, float64(len(m.Classes))-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(len(m.Strategies))-0.5
	return p, nil
}

// faultShade shades fault windows on a per-second chart (x: seconds of the
// measured phase); an instant fault is a thin band.
type faultShade struct{ windows [][2]float64 }

func (f faultShade) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, w := range f.windows {
		x0, x1 := trX(w[0]), trX(math.Max(w[1], w[0]+0.1))
		x0, x1 = max(x0, c.Min.X), min(x1, c.Max.X)
		if x1 <= x0 {
			continue
		}
		c.FillPolygon(color.NRGBA{0xd6, 0x27, 0x28, 0x26}, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
	}
}

// faultWindows are the applied fault windows of the rows' first runs,
// merged into their union (the same plan in every run of a chart, its
// timings a little different per run), so each stretch is shaded once.
func faultWindows(rows []results.Row) [][2]float64 {
	var w [][2]float64
	for _, r := range rows {
		for _, f := range r.Runs[0].Faults {
			if f.Applied {
				w = append(w, [2]float64{f.StartSec, math.Max(f.EndSec, f.StartSec+0.1)})
			}
		}
	}
	slices.SortFunc(w, func(a, b [2]float64) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]float64
	for _, x := range w {
		if n := len(out); n > 0 && x[0] <= out[n-1][1] {
			out[n-1][1] = math.Max(out[n-1][1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

var _ plot.Plotter = heatCells{}
var _ plot.Plotter = faultShade{}
