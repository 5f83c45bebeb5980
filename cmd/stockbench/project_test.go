package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/results"
)

// TestProjectCommand projects a file's runs: a Redis-bound run, a probe
// giving the generator's cost (not projected itself), and a run without
// cost (skipped); a bad deployment is a usage error.
func TestProjectCommand(t *testing.T) {
	dir := t.TempDir()
	f := func(v float64) *float64 { return &v }
	r := &results.Results{Format: results.Format, Config: results.Config{Buyers: 100}, Runs: []results.Run{
		{Strategy: "lua-tcc", Scenario: "sustained", TPS: 1000, Cost: &results.Cost{Flows: 1000, Cores: 2, StrategyTimeMS: 1,
			MySQLCPUUSPerFlow: f(10), RedisCPUUSPerFlow: f(200), HarnessCPUUSPerFlow: f(60), RedisTripsPerFlow: f(3)}},
		{Strategy: "null", Scenario: "sustained", TPS: 50000, Cost: &results.Cost{Flows: 1, Probe: true, GeneratorCPUUSPerFlow: f(10), HarnessCPUUSPerFlow: f(10)}},
		{Strategy: "rowlock", Scenario: "sustained", TPS: 100},
	}}
	if err := results.WriteJSON(dir, r); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"project", dir, "--deploy", "mysql=16,redis=1,service=8x4,rtt=same-zone"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got := out.String()
	// Redis: one thread at 200 µs a flow.
	if !strings.Contains(got, "lua-tcc") || !strings.Contains(got, "5000  redis-cpu") {
		t.Errorf("no Redis-bound projection of 5000 flows/s:\n%s", got)
	}
	if strings.Contains(got, "\nnull ") || strings.Contains(got, "\nrowlock") {
		t.Errorf("the probe or a run without cost was projected:\n%s", got)
	}
	errb.Reset()
	if code := Main(context.Background(), []string{"project", dir, "--deploy", "mysql=0"}, &out, &errb); code != exitUsage {
		t.Errorf("bad deploy: exit %d, want %d", code, exitUsage)
	}
}

// TestProjectAgainst: --against prints the error table of a projection
// from an unconstrained file onto a budgeted one, and refuses, each in a
// usage error, a budgeted file without a budget or a free file with one.
func TestProjectAgainst(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	one, half := 1.0, 0.5
	write := func(b *results.CPUBudget, tps float64) string {
		dir := t.TempDir()
		r := &results.Results{Format: results.Format, Env: results.Env{Cores: 2}, Config: results.Config{Buyers: 1000}, Runs: []results.Run{
			{Strategy: "lua-tcc", Scenario: "sustained", TPS: tps, Cost: &results.Cost{Flows: 1000, Cores: 2, StrategyTimeMS: 1, Budget: b,
				MySQLCPUUSPerFlow: f(100), RedisCPUUSPerFlow: f(150), HarnessCPUUSPerFlow: f(250)}}}}
		if err := results.WriteJSON(dir, r); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	free := write(nil, 3000)
	quota := write(&results.CPUBudget{MySQL: &one, Redis: &half, Harness: &half}, 1600)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		// Harness 0.5 core / 250 µs = 2000 projected, 1600 measured: +25 %.
		{"a quota split", []string{"project", free, "--against", quota}, exitOK, "| lua-tcc | `--cpus mysql=1,redis=0.5,harness=0.5` | 1600 (median of 1) | 2000 | +25 % | harness-cpu |"},
		{"a budgeted file without a budget", []string{"project", free, "--against", free}, exitUsage, "no CPU budget"},
		{"a free file with a budget", []string{"project", quota, "--against", quota}, exitUsage, "had a CPU budget"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := Main(context.Background(), c.args, &out, &errb)
		if code != c.code || !strings.Contains(out.String()+errb.String(), c.want) {
			t.Errorf("%s: exit %d (want %d), no %q in:\n%s%s", c.name, code, c.code, c.want, out.String(), errb.String())
		}
	}
}
