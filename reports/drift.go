package reports

import (
	"fmt"
	"io"
	"iter"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

// driftMetric is one quantity of a run's drift drawn over time, one line
// per strategy.
type driftMetric struct {
	name, title, ylabel string
	// xy gives the line of one run (nil or one point: not drawn).
	xy func(d *results.Drift) plotter.XYs
}

func perMinute(f func(w results.DriftWindow) (float64, bool)) func(d *results.Drift) plotter.XYs {
	return func(d *results.Drift) plotter.XYs {
		var xys plotter.XYs
		for _, w := range d.Minutes {
			if w.ToSec-w.FromSec < 30 && len(d.Minutes) > 1 {
				continue // a short tail minute says little per minute
			}
			if y, ok := f(w); ok {
				xys = append(xys, plotter.XY{X: w.ToSec / 60, Y: y})
			}
		}
		return xys
	}
}

func sampled(f func(p results.DriftPoint) (float64, bool)) func(d *results.Drift) plotter.XYs {
	return func(d *results.Drift) plotter.XYs {
		var xys plotter.XYs
		for _, p := range d.Points {
			if v, ok := f(p); ok && p.Second >= 0 {
				xys = append(xys, plotter.XY{X: p.Second / 60, Y: v})
			}
		}
		return xys
	}
}

const mib = 1 << 20

var driftMetrics = []driftMetric{
	{"flows", "Throughput per minute", "flows / s (mean of the minute)",
		perMinute(func(w results.DriftWindow) (float64, bool) { return w.FlowsPerSec, true })},
	{"p99", "P99 flow latency per minute", "P99 of the minute (ms)",
		perMinute(func(w results.DriftWindow) (float64, bool) { return w.FlowP99MS, true })},
	// On a shared virtual machine the hypervisor's share moves every
	// figure above; drawn beside them it tells the host's dips from the
	// strategy's.
	{"steal", "Cores taken by the hypervisor per minute", "CPU time stolen by other guests (% of the cores)",
		perMinute(func(w results.DriftWindow) (float64, bool) {
			if w.Machine == nil {
				return 0, false
			}
			return w.Machine.StealPct, true
		})},
	{"harness-rss", "Harness memory over the run", "harness RSS (MiB)",
		sampled(func(p results.DriftPoint) (float64, bool) {
			return float64(p.HarnessRSSBytes) / mib, p.HarnessRSSBytes > 0
		})},
	{"mysql-rss", "MySQL memory over the run", "mysqld RSS (MiB)",
		sampled(func(p results.DriftPoint) (float64, bool) { return float64(p.MySQLRSSBytes) / mib, p.MySQLRSSBytes > 0 })},
	{"redis-memory", "Redis memory over the run", "used_memory (MiB)",
		sampled(func(p results.DriftPoint) (float64, bool) {
			return float64(p.RedisUsedBytes) / mib, p.RedisUsedBytes > 0
		})},
	{"orders-rows", "Orders table over the run", "rows (InnoDB estimate, thousands)",
		sampled(func(p results.DriftPoint) (float64, bool) { return float64(p.OrdersRows) / 1000, true })},
	{"outbox-rows", "Outbox table over the run", "rows (InnoDB estimate, thousands)",
		sampled(func(p results.DriftPoint) (float64, bool) { return float64(p.OutboxRows) / 1000, p.RelayBacklog != nil })},
	{"disk-reads", "MySQL buffer pool misses over the run", "pages read from disk / s",
		func(d *results.Drift) plotter.XYs {
			var xys plotter.XYs
			for i := 1; i < len(d.Points); i++ {
				a, b := d.Points[i-1], d.Points[i]
				if b.Second < 0 || b.Second <= a.Second || b.BufferPoolDiskReads < a.BufferPoolDiskReads || a.BufferPoolDiskReads == 0 {
					continue
				}
				xys = append(xys, plotter.XY{X: b.Second / 60, Y: float64(b.BufferPoolDiskReads-a.BufferPoolDiskReads) / (b.Second - a.Second)})
			}
			return xys
		}},
	{"history", "InnoDB history list over the run", "transactions not yet purged (thousands)",
		sampled(func(p results.DriftPoint) (float64, bool) {
			return float64(p.HistoryLength) / 1000, p.HistoryLength > 0
		})},
	{"relay-lag", "Outbox relay lag over the run", "age of the oldest unapplied event (s)",
		sampled(func(p results.DriftPoint) (float64, bool) {
			if p.RelayLagMS == nil {
				return 0, false
			}
			return *p.RelayLagMS / 1000, true
		})},
}

// driftChart draws one drift metric of a scenario's runs; nil when no run
// has two points of it.
func driftChart(rows []results.Row, sc string, m driftMetric) (*plot.Plot, error) {
	p := newPlot(m.title+" — "+sc, "minute of the measured phase", m.ylabel)
	any, top := false, 0.0
	for _, r := range rows {
		d := r.Runs[0].Drift
		if d == nil || d.WindowSec < analysis.DriftMinWindowSec {
			continue // a run of minutes or less has no drift to draw
		}
		xys := m.xy(d)
		if len(xys) < 2 {
			continue
		}
		for _, xy := range xys {
			top = math.Max(top, xy.Y)
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		st := styleOf(r.Strategy)
		line.Color, line.Dashes = st.Color, st.Dashes
		line.Width = 1.5
		p.Add(line)
		p.Legend.Add(r.Strategy, line)
		any = true
	}
	if !any {
		return nil, nil
	}
	p.X.Min = 0
	p.Y.Min, p.Y.Max = 0, top*1.35
	if top == 0 {
		// Zero throughout: say so, on an axis a reader can read.
		p.Title.Text += " (zero throughout)"
		p.Y.Max = 1
	}
	return p, nil
}

// driftView is the summary's drift section: per timed run the first and
// last windows side by side with the change, the memory and table sizes at
// both ends, the relay's verdict and what a change in flows/s followed; no
// rows when no run has drift.
type driftView struct {
	Table     table
	Verdicts  []driftVerdict
	Explained string
}

// driftExplained says in prose what the drift table's columns mean.
const driftExplained = "First against last window of the measured phase (a sixth of it, between 10 s and 5 min; shown for runs whose windows are a minute or more): flows per second, P99 flow latency, at each window's end the harness's and the servers' memory and the orders table (InnoDB's row estimate), the MySQL pages read from disk per second over the window (buffer pool misses: tables outgrowing the buffer pool show here), InnoDB's history list length at each window's end (transactions whose undo the purge has not yet removed: a purge falling behind shows here), and the share of the machine's cores the hypervisor gave other guests over each window (steal, from /proc/stat: on a shared virtual machine this moves every figure here, and a change in flows/s that follows it is the host's, not the strategy's). A strategy that holds up over time changes little here; one whose store grows or whose background work falls behind shows it. Charts: charts/drift-*.png."

// driftVerdict is a sentence on a run's drift: how its outbox relay kept
// up (FallingBehind: it did not), or what a change in its flows/s followed.
type driftVerdict struct {
	runRef
	Verdict       string
	FallingBehind bool
}

func driftOf(a *analysis.Analysis) driftView {
	v := driftView{Explained: driftExplained, Table: table{Head: []string{"strategy", "scenario", "window", "flows/s first → last", "change", "P99 ms first → last", "change",
		"harness RSS MiB", "mysqld RSS MiB", "Redis MiB", "orders rows", "disk reads/s", "InnoDB history", "cores stolen %"}, Align: "llrlrlrl"}}
	var relay, cost []driftVerdict
	for run, dv := range driftRuns(a) {
		ref := refOf(run)
		if r := dv.Relay; r != nil && (dv.Judged || r.FallingBehind) {
			relay = append(relay, driftVerdict{ref, r.Sentence(), r.FallingBehind})
		}
		if !dv.Judged {
			continue
		}
		if c := dv.Cost; c != nil {
			cost = append(cost, driftVerdict{ref, c.Sentence(), false})
		}
		d := run.Drift
		f, l := d.First, d.Last
		v.Table.Rows = append(v.Table.Rows, []string{run.Strategy, label(run), fmt.Sprintf("%.0f s", d.WindowSec),
			fmt.Sprintf("%.1f → %.1f", f.FlowsPerSec, l.FlowsPerSec), fmt.Sprintf("%+.1f %%", d.FlowsChangePct),
			fmt.Sprintf("%.2f → %.2f", f.FlowP99MS, l.FlowP99MS), fmt.Sprintf("%+.1f %%", d.P99ChangePct),
			arrow(f.HarnessRSSBytes, l.HarnessRSSBytes, mib), arrow(f.MySQLRSSBytes, l.MySQLRSSBytes, mib),
			arrow(f.RedisUsedBytes, l.RedisUsedBytes, mib), arrow(f.OrdersRows, l.OrdersRows, 1), fmt.Sprintf("%.0f → %.0f", f.DiskReadsPerSec, l.DiskReadsPerSec),
			arrow(f.HistoryLength, l.HistoryLength, 1), stolen(f.Machine, l.Machine)})
	}
	v.Verdicts = append(relay, cost...)
	return v
}

// driftRuns pairs each run that has a drift with its verdict, in run
// order (Analysis.Drift holds one per such run).
func driftRuns(a *analysis.Analysis) iter.Seq2[results.Run, analysis.DriftVerdict] {
	return func(yield func(results.Run, analysis.DriftVerdict) bool) {
		i := 0
		for _, run := range a.Results.Runs {
			if run.Drift == nil || i >= len(a.Drift) {
				continue
			}
			dv := a.Drift[i]
			i++
			if !yield(run, dv) {
				return
			}
		}
	}
}

// driftNote prints, under the terminal table, one line per run whose
// drift is a warning: its relay fell behind, or, in a run whose windows
// are judged (a minute or more: a measured phase of 6 minutes), its
// flows/s moved 10 % or more first to last (the cost verdict, which says
// what that followed). A run that held steady prints nothing.
func driftNote(w io.Writer, a *analysis.Analysis) {
	for run, dv := range driftRuns(a) {
		var said []string
		if r := dv.Relay; r != nil && r.FallingBehind {
			said = append(said, r.Sentence())
		}
		if c := dv.Cost; c != nil && dv.Judged {
			said = append(said, c.Sentence())
		}
		if len(said) > 0 {
			fmt.Fprintln(w, wrap(fmt.Sprintf("DRIFT %s (%s): %s", run.Strategy, label(run), strings.Join(said, "; ")), terminalWidth, "  "))
		}
	}
}

// stolen is the share of the cores the hypervisor gave other guests in
// the first and last windows; "–" when either was not sampled (no
// /proc/stat).
func stolen(first, last *results.MachineShare) string {
	if first == nil || last == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f → %.1f", first.StealPct, last.StealPct)
}

func arrow(first, last, unit int64) string {
	if first == 0 && last == 0 {
		return "–"
	}
	if unit == 1 {
		return fmt.Sprintf("%d → %d", first, last)
	}
	return fmt.Sprintf("%.0f → %.0f", float64(first)/float64(unit), float64(last)/float64(unit))
}
