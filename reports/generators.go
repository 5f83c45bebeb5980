package reports

import (
	"fmt"
	"io"
	"strings"

	"github.com/stockbench/stockbench/results"
)

// generatorsView is, for runs measured by several generators (run
// --procs, merge), the table of the generators: where each ran, what it
// cost and measured, and whether its host was saturated.
type generatorsView struct {
	SaturatedPct int
	Table        table
}

// generatorsOf is the generators section of r; nil for a single-process
// run.
func generatorsOf(r *results.Results) *generatorsView {
	if !sharded(r) {
		return nil
	}
	t := table{Head: []string{"strategy", "scenario", "generator", "host", "pid", "harness CPU %", "cores", "flows", "TPS", "flow P99 (ms)", "background loop (s)", "saturated"},
		Align: "llllrrrrrrrl"}
	for _, run := range r.Runs {
		for _, s := range run.Shards {
			sat := ""
			if s.Saturated {
				sat = "SATURATED"
			}
			host := s.Host
			if s.Container != "" {
				host += " (container " + s.Container + ")"
			}
			t.Rows = append(t.Rows, []string{run.Strategy, label(run), fmt.Sprintf("%d/%d", s.Index, s.Of), host, fmt.Sprint(s.PID),
				f1(s.HarnessCPUPct), fmt.Sprint(s.Cores), fmt.Sprint(s.Flows), f1(s.TPS), f2(s.FlowP99MS), f2(s.Harness.BackgroundLoopSec), sat})
		}
	}
	return &generatorsView{results.SaturatedPct, t}
}

// generatorsNote is the terminal's line about several generators: how
// many, and any saturated one. Empty for a single-process run.
func generatorsNote(w io.Writer, r *results.Results) {
	if !sharded(r) {
		return
	}
	var sat []string
	n := 0
	for _, run := range r.Runs {
		n = max(n, len(run.Shards))
		for _, s := range run.Shards {
			if s.Saturated {
				sat = append(sat, fmt.Sprintf("%s on %s: generator %d on %s (%.0f %% CPU, %d cores)", run.Strategy, label(run), s.Index, s.Host, s.HarnessCPUPct, s.Cores))
			}
		}
	}
	fmt.Fprintf(w, "%d generators per run, merged exactly and audited once\n", n)
	if len(sat) > 0 {
		fmt.Fprintf(w, "SATURATED generators (their host's CPU past %d %%): %s\n", results.SaturatedPct, strings.Join(sat, "; "))
	}
}

func sharded(r *results.Results) bool {
	for _, run := range r.Runs {
		if len(run.Shards) > 0 {
			return true
		}
	}
	return false
}
