package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/internal/sysstat"
	"github.com/stockbench/stockbench/results"
)

// cmdProject carries a results file's measured costs per flow to a
// stated deployment (analysis.Project) and prints each run's projected
// throughput, its binding tier and every tier's capacity.
func cmdProject(args []string, stdout io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("project", flag.ContinueOnError)
	deploy := fs.String("deploy", "mysql=4,redis=1,service=1x4,rtt=same-zone", "the deployment: mysql=CORES,redis=CORES,service=INSTANCESxCORES,rtt=PROFILE|DURATION[,buyers=N]")
	against := fs.String("against", "", "validate instead: results files (comma-separated) measured under CPU budgets (--cpus/--cpuset); prints the projection of RESULTS (run with the tiers sharing the machine) onto each file's budget beside what it measured (docs/projection.md)")
	files, code, done := resultsArgs(fs, args, stdout, fail)
	if done {
		return code
	}
	if len(files) != 1 {
		return fail(exitUsage, errors.New("usage: stockbench project RESULTS [--deploy 'mysql=16,redis=1,service=8x4,rtt=same-zone']"))
	}
	path := files[0]
	if *against != "" {
		return projectAgainst(path, strings.Split(*against, ","), stdout, fail)
	}
	d, err := analysis.ParseDeploy(*deploy)
	if err != nil {
		return fail(exitUsage, err)
	}
	r, err := results.ReadJSON(path)
	if err != nil {
		return fail(exitUsage, err)
	}
	ps := analysis.ProjectAll(r, d)
	if len(ps) == 0 {
		return fail(exitUsage, fmt.Errorf("%s: no run with cost figures (runs[].cost) to project", path))
	}
	fmt.Fprintf(stdout, "projected to %s\n", *deploy)
	fmt.Fprintf(stdout, "%-13s %-10s %10s %10s  %-12s %10s %10s %10s %10s %10s\n", "strategy", "scenario", "measured", "projected", "bound by",
		"mysql-cpu", "redis-cpu", "service", "row-lock", "buyers")
	cell := func(v float64) string {
		if math.IsInf(v, 1) {
			return "-"
		}
		return fmt.Sprintf("%.0f", v)
	}
	for _, p := range ps {
		fmt.Fprintf(stdout, "%-13s %-10s %10.0f %10s  %-12s %10s %10s %10s %10s %10s\n", p.Strategy, p.Scenario, p.MeasuredTPS, cell(p.TPS), p.Bound,
			cell(p.Capacity[analysis.TierMySQLCPU]), cell(p.Capacity[analysis.TierRedisCPU]), cell(p.Capacity[analysis.TierHarnessCPU]),
			cell(p.Capacity[analysis.TierRowLock]), cell(p.Capacity[analysis.TierConcurrency]))
	}
	// The two ratios the field-strategies issue asked of this box.
	for _, ratio := range [][3]string{{"outbox-local", "lua-tcc", "the article's 1.34×"}, {"buckets", "rowlock", "the field-strategies issue's aim: ≥ 5×"}} {
		if a, b := projectedMedian(ps, ratio[0]), projectedMedian(ps, ratio[1]); a > 0 && b > 0 && !math.IsInf(a, 1) && !math.IsInf(b, 1) {
			fmt.Fprintf(stdout, "projected %s ÷ %s = %.2f× (medians; %s)\n", ratio[0], ratio[1], a/b, ratio[2])
		}
	}
	fmt.Fprintf(stdout, "flows/s. Assumes: %s. Validated against budgeted runs on one machine: docs/projection.md.\n", analysis.ProjectionAssumptions)
	return exitOK
}

// projectedMedian is the median projected flows/s of strategy's runs in
// ps (0 when it has none).
func projectedMedian(ps []analysis.Projection, strategy string) float64 {
	var xs []float64
	for _, p := range ps {
		if p.Strategy == strategy {
			xs = append(xs, p.TPS)
		}
	}
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

// projectAgainst prints, as a markdown table, free's runs projected onto
// the CPU budget of each budgeted file beside what that file measured
// (analysis.CheckProjections), and the largest error.
func projectAgainst(free string, budgeted []string, stdout io.Writer, fail func(int, error) int) int {
	r, err := results.ReadJSON(free)
	if err != nil {
		return fail(exitUsage, err)
	}
	var bs []*results.Results
	for _, f := range budgeted {
		f = strings.TrimSpace(f)
		if st, err := os.Stat(f); err == nil && st.IsDir() {
			f = filepath.Join(f, "results.json")
		}
		b, err := results.ReadJSON(f)
		if err != nil {
			return fail(exitUsage, err)
		}
		if analysis.BudgetLabel(budgetOf(b)) == "none" {
			return fail(exitUsage, fmt.Errorf("%s: its runs had no CPU budget (run it with --cpus or --cpuset)", f))
		}
		bs = append(bs, b)
	}
	if budgetOf(r) != nil {
		return fail(exitUsage, fmt.Errorf("%s: its runs had a CPU budget; project from a run whose tiers shared the machine", free))
	}
	checks := analysis.CheckProjections(r, bs...)
	if len(checks) == 0 {
		return fail(exitUsage, fmt.Errorf("%s: no strategy of the budgeted files ran there too", free))
	}
	fmt.Fprintln(stdout, "| strategy | budget | measured flows/s | projected | error | projected bound | measured bound |")
	fmt.Fprintln(stdout, "|---|---|--:|--:|--:|---|---|")
	worst := checks[0]
	for _, c := range checks {
		proj, e := "-", "-"
		if c.FreeRuns > 0 {
			proj, e = fmt.Sprintf("%.0f", c.Projected), fmt.Sprintf("%+.0f %%", c.ErrPct)
			if math.Abs(c.ErrPct) > math.Abs(worst.ErrPct) {
				worst = c
			}
		}
		fmt.Fprintf(stdout, "| %s | `%s` | %.0f (median of %d) | %s | %s | %s | %s |\n", c.Strategy, c.Budget, c.Measured, c.Runs, proj, e, c.Bound, c.MeasuredBound)
	}
	fmt.Fprintf(stdout, "\nLargest error: %s under `%s`, %+.0f %% (projected %.0f, measured %.0f flows/s). Load average when this table was printed: %s.\n",
		worst.Strategy, worst.Budget, worst.ErrPct, worst.Projected, worst.Measured, loadAverage())
	return exitOK
}

// budgetOf is the CPU budget of r's runs (nil: none).
func budgetOf(r *results.Results) *results.CPUBudget {
	for _, run := range r.Runs {
		if run.Cost != nil && run.Cost.Budget != nil {
			return run.Cost.Budget
		}
	}
	return nil
}

// loadAverage is the machine's load averages, or "unknown".
func loadAverage() string {
	if l := sysstat.LoadAverage(); l != "" {
		return l
	}
	return "unknown"
}
