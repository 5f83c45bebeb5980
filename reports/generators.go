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
		for _, l := range run.Lost {
			t.Rows = append(t.Rows, []string{run.Strategy, label(run), fmt.Sprintf("%d/%d", l.Index, l.Of), "—", "—",
				"—", "—", "—", "—", "—", "—", "DIED: " + lostWhat(l)})
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
	var sat, lost []string
	n := 0
	for _, run := range r.Runs {
		n = max(n, len(run.Shards)+len(run.Lost))
		for _, l := range run.Lost {
			lost = append(lost, fmt.Sprintf("%s on %s: generator %d/%d (%s)", run.Strategy, label(run), l.Index, l.Of, lostWhat(l)))
		}
		for _, s := range run.Shards {
			if s.Saturated {
				sat = append(sat, fmt.Sprintf("%s on %s: generator %d on %s (%.0f %% CPU, %d cores)", run.Strategy, label(run), s.Index, s.Host, s.HarnessCPUPct, s.Cores))
			}
		}
	}
	fmt.Fprintf(w, "%d generators per run, merged exactly and audited once\n", n)
	if len(lost) > 0 {
		fmt.Fprintf(w, "DIED before their report (run unproven, their load figures missing): %s\n", strings.Join(lost, "; "))
	}
	if len(sat) > 0 {
		fmt.Fprintf(w, "SATURATED generators (their host's CPU past %d %%): %s\n", results.SaturatedPct, strings.Join(sat, "; "))
	}
}

// lostWhat is what became of a generator that died: how it ended, the
// acks read from its log and the events its parent drained.
func lostWhat(l results.LostGenerator) string {
	s := fmt.Sprintf("%s; %d acks from its log", l.Exit, l.Acks)
	if l.TornBytes > 0 {
		s += fmt.Sprintf(", a torn record of %d bytes", l.TornBytes)
	}
	if l.DrainError != "" {
		return s + "; drain not finished: " + l.DrainError + "; state kept in " + l.StateDir
	}
	return s + fmt.Sprintf("; %d events drained", l.Drained)
}

func sharded(r *results.Results) bool {
	for _, run := range r.Runs {
		if len(run.Shards) > 0 {
			return true
		}
	}
	return false
}
