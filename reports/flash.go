package reports

import (
	"fmt"
	"image/color"
	"io"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/stockbench/stockbench/results"
)

// flashRuns are the runs that carry a sale's own figures.
func flashRuns(r *results.Results) []results.Run {
	var out []results.Run
	for _, run := range r.Runs {
		if run.Flash != nil {
			out = append(out, run)
		}
	}
	return out
}

// flashExplained says in prose what the flash table's columns mean.
const flashExplained = "Sold: units the clients were told they bought, of the stock. Reserved out in: from the first acknowledged reserve to the last (how fast the strategy handed out the stock: the sale's comparable speed); sold out in: to the last unit paid for, so it includes the buyers' pay delay. Buyers served paid; refused were told out of stock; shed were turned away at once by the service model (busy); timed out got no answer in time. Refusal and winner P50/P99 are the reserve latencies of those answers, apart. Fair: of the first stock-many buyers to arrive who meant to pay, the share who bought (100 % is first come, first served). Unsold: units left on the shelf while buyers were turned away (undersell, the mirror of oversell) — a sale that did not sell out ranks after those that did. Late: buyers who started over 10 ms after their scheduled arrival (the harness could not keep up). RSS and CPU are the harness's own: its peak resident memory and its CPU per 1000 buyers."

// flashRows is the flash table: one row per run with a sale's figures;
// no head without a sale.
func flashRows(r *results.Results) table {
	runs := flashRuns(r)
	if len(runs) == 0 {
		return table{}
	}
	head := []string{"strategy", "scenario", "sold / stock", "reserved out in ms", "sold out in ms", "buyers", "served", "refused", "shed", "timed out",
		"refusal P50/P99 ms", "winner P50/P99 ms", "fair %", "unsold", "late", "harness RSS MB", "harness CPU ms / 1k buyers"}
	var rows [][]string
	var flagged []int
	for _, run := range runs {
		f := run.Flash
		sold := fmt.Sprintf("%d / %d", f.Sold, f.Stock)
		out := "did not sell out"
		if f.SoldOut {
			out = f1(f.SoldOutMS)
		}
		rss, cpu := "n/a", "n/a"
		if v := run.Harness.PeakRSSMB; v != nil {
			rss = fmt.Sprintf("%.0f", *v)
		}
		if v := run.Harness.HarnessCPUMSPer1kBuyers; v != nil {
			cpu = f1(*v)
		}
		if !f.SoldOut {
			flagged = append(flagged, len(rows))
		}
		rows = append(rows, []string{run.Strategy, label(run), sold, f1(f.ReservedOutMS), out,
			fmt.Sprint(f.Buyers), fmt.Sprint(f.Served), fmt.Sprint(f.Refused), fmt.Sprint(f.Shed), fmt.Sprint(f.TimedOut),
			f2(f.RefusalMS.P50) + " / " + f2(f.RefusalMS.P99), f2(f.WinnerMS.P50) + " / " + f2(f.WinnerMS.P99),
			f1(f.FairPct), fmt.Sprint(f.UnsoldUnits), fmt.Sprint(f.LateStarts), rss, cpu})
	}
	t := table{Head: head, Rows: rows, Align: "ll" + strings.Repeat("r", len(head)-2)}
	for _, i := range flagged {
		t.flag(i, 4)
	}
	return t
}

// flashTable prints a compact flash table for the terminal (nothing
// without a sale); the whole table is in summary.md and index.html.
func flashTable(w io.Writer, r *results.Results) {
	runs := flashRuns(r)
	if len(runs) == 0 {
		return
	}
	t := table{Head: []string{"flash", "sold", "reserved out ms", "sold out ms", "served", "refused", "shed", "timed out", "refusal P99", "fair %", "unsold", "late", "RSS MB"}}
	t.Align = "l" + strings.Repeat("r", len(t.Head)-1)
	for _, run := range runs {
		f := run.Flash
		out := "not sold out"
		if f.SoldOut {
			out = f1(f.SoldOutMS)
		}
		rss := "n/a"
		if v := run.Harness.PeakRSSMB; v != nil {
			rss = fmt.Sprintf("%.0f", *v)
		}
		name := run.Strategy
		if run.Repeat > 0 || run.Param != "" {
			name += " " + label(run)
		}
		t.Rows = append(t.Rows, []string{name, fmt.Sprintf("%d/%d", f.Sold, f.Stock), f1(f.ReservedOutMS), out, fmt.Sprint(f.Served), fmt.Sprint(f.Refused),
			fmt.Sprint(f.Shed), fmt.Sprint(f.TimedOut), f1(f.RefusalMS.P99), f1(f.FairPct), fmt.Sprint(f.UnsoldUnits), fmt.Sprint(f.LateStarts), rss})
	}
	t.terminal(w)
}

// flashView is summary.md's flash section.
type flashView struct {
	Table     table
	Explained string
	Services  []serviceView
}

// serviceView is a run's service model and what it shed.
type serviceView struct {
	runRef
	*results.Service
}

// flashOf is the flash section of r; nil without a sale.
func flashOf(r *results.Results) *flashView {
	t := flashRows(r)
	if t.Head == nil {
		return nil
	}
	v := &flashView{Table: t, Explained: flashExplained}
	for _, run := range flashRuns(r) {
		if run.Service != nil {
			v.Services = append(v.Services, serviceView{refOf(run), run.Service})
		}
	}
	return v
}

// flashCharts are the sale's millisecond timelines: units left by strategy,
// and per run the reserves, refusals, sheds and timeouts per bucket.
func flashCharts(r *results.Results) ([]namedPlot, error) {
	runs := flashRuns(r)
	if len(runs) == 0 {
		return nil, nil
	}
	var out []namedPlot
	left := newPlot("Units left — flash sale, 10 ms buckets", "ms since the start of load", "units left (stock − reserved + released)")
	top := 0.0
	for _, run := range runs {
		f := run.Flash
		if len(f.Timeline) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(f.Timeline)+1)
		xys[0] = plotter.XY{X: 0, Y: float64(f.Stock)}
		for i, b := range f.Timeline {
			xys[i+1] = plotter.XY{X: float64(b.AtMS + f.BucketMS), Y: float64(b.UnitsLeft)}
		}
		top = max(top, float64(f.Stock))
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		st := styleOf(run.Strategy)
		line.Color, line.Dashes, line.Width = st.Color, st.Dashes, vg.Points(1.5)
		left.Add(line)
		left.Legend.Add(run.Strategy+" "+label(run), line)
	}
	left.Y.Max = top * 1.35
	out = append(out, namedPlot{"flash-units-left", left})
	for i, run := range runs {
		f := run.Flash
		if len(f.Timeline) == 0 {
			continue
		}
		p := newPlot(fmt.Sprintf("Flash sale events per 10 ms — %s (%s)", run.Strategy, label(run)), "ms since the start of load", "answers per 10 ms bucket")
		series := []struct {
			name string
			c    color.RGBA
			v    func(results.FlashBucket) int64
		}{
			{"reserves", color.RGBA{0x1b, 0x9e, 0x77, 0xff}, func(b results.FlashBucket) int64 { return b.Reserves }},
			{"refusals", color.RGBA{0xd9, 0x5f, 0x02, 0xff}, func(b results.FlashBucket) int64 { return b.Refusals }},
			{"sheds (busy)", color.RGBA{0x75, 0x70, 0xb3, 0xff}, func(b results.FlashBucket) int64 { return b.Sheds }},
			{"timeouts", color.RGBA{0xe7, 0x29, 0x8a, 0xff}, func(b results.FlashBucket) int64 { return b.Timeouts }},
			{"sold", color.RGBA{0x66, 0x66, 0x66, 0xff}, func(b results.FlashBucket) int64 { return b.Sold }},
		}
		top := 0.0
		for _, s := range series {
			xys := make(plotter.XYs, len(f.Timeline))
			anyV := false
			for j, b := range f.Timeline {
				v := float64(s.v(b))
				xys[j] = plotter.XY{X: float64(b.AtMS), Y: v}
				top = max(top, v)
				anyV = anyV || v > 0
			}
			if !anyV {
				continue
			}
			line, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			line.Color, line.Width = s.c, vg.Points(1.2)
			p.Add(line)
			p.Legend.Add(s.name, line)
		}
		p.Y.Min, p.Y.Max = 0, max(1, top)*1.35
		out = append(out, namedPlot{fmt.Sprintf("flash-events-%s-%d", run.Strategy, i), p})
	}
	return out, nil
}
