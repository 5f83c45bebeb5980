package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

// cmdProject carries a results file's measured costs per flow to a
// stated deployment (analysis.Project) and prints each run's projected
// throughput, its binding tier and every tier's capacity.
func cmdProject(args []string, stdout io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("project", flag.ContinueOnError)
	deploy := fs.String("deploy", "mysql=4,redis=1,service=1x4,rtt=same-zone", "the deployment: mysql=CORES,redis=CORES,service=INSTANCESxCORES,rtt=PROFILE|DURATION[,buyers=N]")
	files, code, done := resultsArgs(fs, args, stdout, fail)
	if done {
		return code
	}
	if len(files) != 1 {
		return fail(exitUsage, errors.New("usage: stockbench project RESULTS [--deploy 'mysql=16,redis=1,service=8x4,rtt=same-zone']"))
	}
	path := files[0]
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
	fmt.Fprintf(stdout, "flows/s. Assumes: %s. Not validated against budgeted runs yet.\n", analysis.ProjectionAssumptions)
	return exitOK
}
