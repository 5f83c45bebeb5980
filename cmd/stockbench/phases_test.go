package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/results"
)

// TestPhaseDeadline: a run whose settle or audit is given a deadline it
// cannot meet still writes results.json with its load figures and its
// phases, names the phase that did not finish there and on the last line,
// and exits 3 (exitIncomplete).
func TestPhaseDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	cases := []struct {
		name, strategy string
		flags          []string
		phase          string
	}{
		{"audit overruns", "conditional", []string{"--audit-timeout", "1ns"}, "audit_end_of_load"},
		{"settle overruns", "lua-tcc", []string{"--settle-timeout", "1ns"}, "settle"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var out, errb bytes.Buffer
			args := append([]string{"run", "--backend", "local", "--strategies", c.strategy, "--scenario", "sustained",
				"--skus", "50", "--buyers", "8", "--duration", "1s", "--warmup", "0s", "--calibrate", "0", "--quiet",
				"--out", dir}, c.flags...)
			code := Main(context.Background(), args, &out, &errb)
			if code != exitIncomplete {
				t.Fatalf("exit %d, want %d: %s", code, exitIncomplete, errb.String())
			}
			lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
			if last := lines[len(lines)-1]; !strings.Contains(last, "the "+c.phase+" phase did not finish") || !strings.Contains(last, dir) {
				t.Errorf("last line %q does not name the phase %s and where the figures went", last, c.phase)
			}
			var res results.Results
			readResultsJSON(t, dir, &res)
			if len(res.Runs) != 1 {
				t.Fatalf("%d runs in results.json, want 1", len(res.Runs))
			}
			r := res.Runs[0]
			if r.Incomplete != c.phase || r.Flows == 0 || r.TPS == 0 || r.LatencyMS["flow"].P99 == 0 {
				t.Errorf("run: incomplete %q flows %d tps %.1f p99 %.2f; want %q and the load figures", r.Incomplete, r.Flows, r.TPS, r.LatencyMS["flow"].P99, c.phase)
			}
			var names []string
			for _, p := range r.Phases {
				names = append(names, p.Name)
				if p.Name == c.phase && !p.Incomplete {
					t.Errorf("phase %s not marked incomplete: %+v", p.Name, p)
				}
			}
			if len(names) < 3 || names[0] != "setup" || names[1] != "load" || names[len(names)-1] != c.phase {
				t.Errorf("phases %v: want setup, load, … ending with %s", names, c.phase)
			}
		})
	}
}
