package reports

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

// costCaption says what costTable's columns are.
const costCaption = "per flow: CPU µs of each tier (harness = service code + load generator; with --service process:N, service = the instances and harness = the generator and API client; the null probe is the generator alone), round trips, ms waited for row locks and pool"

// costTable is what each row's flow cost each tier and what bound it
// (runs[].cost, analysis.BoundByRow), medians over repeats; ok is false
// when no run recorded a cost. The harness's CPU is the strategy's
// service code and the load generator together; the generator alone is
// the null probe's row.
func costTable(a *analysis.Analysis) (table, bool) {
	head, repeats := rowHead(a.Rows)
	head = append(head, "bound by", "MySQL µs", "Redis µs", "harness µs")
	// The service processes' own column, when a row ran them (--service
	// process:N): the harness is then the generator and the API client.
	service := false
	for _, row := range a.Rows {
		for _, r := range row.Runs {
			service = service || (r.Cost != nil && r.Cost.ServiceCPUUSPerFlow != nil)
		}
	}
	if service {
		head = append(head, "service µs")
	}
	head = append(head, "trips", "lock ms", "pool ms")
	var rows [][]string
	any := false
	for _, row := range a.Rows {
		cells := []string{row.Strategy, rowLabel(row)}
		if repeats {
			cells = append(cells, fmt.Sprint(len(row.Runs)))
		}
		med := func(f func(c *results.Cost) *float64) string {
			var got []results.Run
			for _, r := range row.Runs {
				if r.Cost != nil && f(r.Cost) != nil {
					got = append(got, r)
				}
			}
			if len(got) == 0 {
				return "n/a"
			}
			any = true
			return f0(results.SpreadOf(got, func(r results.Run) float64 { return *f(r.Cost) }).Median)
		}
		medF := func(format func(float64) string, f func(c *results.Cost) *float64) string {
			var got []results.Run
			for _, r := range row.Runs {
				if r.Cost != nil && f(r.Cost) != nil {
					got = append(got, r)
				}
			}
			if len(got) == 0 {
				return "n/a"
			}
			return format(results.SpreadOf(got, func(r results.Run) float64 { return *f(r.Cost) }).Median)
		}
		cells = append(cells, row.BoundBy.Label(),
			med(func(c *results.Cost) *float64 { return c.MySQLCPUUSPerFlow }),
			med(func(c *results.Cost) *float64 { return c.RedisCPUUSPerFlow }),
			med(func(c *results.Cost) *float64 { return c.HarnessCPUUSPerFlow }))
		if service {
			cells = append(cells, med(func(c *results.Cost) *float64 { return c.ServiceCPUUSPerFlow }))
		}
		cells = append(cells,
			medF(f1, func(c *results.Cost) *float64 {
				if c.MySQLTripsPerFlow == nil && c.RedisTripsPerFlow == nil {
					return nil
				}
				v := deref(c.MySQLTripsPerFlow) + deref(c.RedisTripsPerFlow)
				return &v
			}),
			medF(f2, func(c *results.Cost) *float64 { return c.RowLockMSPerFlow }),
			medF(f2, func(c *results.Cost) *float64 {
				if c.Flows <= 0 {
					return nil
				}
				return &c.PoolWaitMSPerFlow
			}))
		rows = append(rows, cells)
	}
	align := "ll"
	if repeats {
		align += "r"
	}
	align += "l"
	for len(align) < len(head) {
		align += "r"
	}
	return table{Head: head, Rows: rows, Align: align}, any
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// uslLines are the USL fits of a buyers sweep, one line each: contention
// σ, coherency κ, the peak N* and its throughput, and R².
func uslLines(w io.Writer, a *analysis.Analysis) {
	for _, f := range a.Scalability {
		if f.Err != "" {
			fmt.Fprintln(w, wrap(fmt.Sprintf("USL %s (%s): no fit: %s", f.Strategy, f.Scenario, f.Err), terminalWidth, "  "))
			continue
		}
		u := f.Fit
		peak := "no peak (κ=0): levels off at " + f0(u.PeakX) + " flows/s"
		if !math.IsInf(u.PeakN, 1) {
			peak = fmt.Sprintf("peak N*=%.0f buyers at %s flows/s", u.PeakN, f0(u.PeakX))
		}
		fmt.Fprintln(w, wrap(fmt.Sprintf("USL %s (%s): σ=%.3f (contention) κ=%.2g (coherency) λ=%s flows/s per buyer, %s, R²=%.3f over %d runs",
			f.Strategy, f.Scenario, u.Sigma, u.Kappa, f1(u.Lambda), peak, u.R2, u.Points), terminalWidth, "  "))
	}
}

// budgetLine says the CPU budget the runs had (--cpus, --cpuset), tier by
// tier, and how it was held; "" when the tiers shared the machine. Runs
// of one file share one budget (it holds from calibration to the end).
func budgetLine(r *results.Results) string {
	var b *results.CPUBudget
	for _, run := range r.Runs {
		if run.Cost != nil && run.Cost.Budget != nil {
			b = run.Cost.Budget
			break
		}
	}
	if b == nil {
		return ""
	}
	var parts []string
	for _, t := range []struct {
		name  string
		cores *float64
	}{{"MySQL", b.MySQL}, {"Redis", b.Redis}, {"harness", b.Harness}} {
		if t.cores == nil {
			parts = append(parts, t.name+" unbudgeted")
			continue
		}
		s := fmt.Sprintf("%s %g core", t.name, *t.cores)
		if *t.cores != 1 {
			s += "s"
		}
		if set, ok := b.CPUSet[strings.ToLower(t.name)]; ok {
			s += " (cpu " + set + ")"
		}
		parts = append(parts, s)
	}
	how := "cgroups"
	if r.Env.Backend == "docker" {
		how = "the containers' CPU quota and cpuset; the harness a cgroup"
	}
	return fmt.Sprintf("CPU budget: %s, of %d cores (%s). Tiers pinned to one core share it.", strings.Join(parts, ", "), r.Env.Cores, how)
}
