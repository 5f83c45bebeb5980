package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

// TestGenerators: a run played by several generators names them in the
// summary and the terminal and flags a saturated one; a single-process run
// shows neither.
func TestGenerators(t *testing.T) {
	run := func(shards ...results.ShardInfo) *results.Results {
		return &results.Results{Runs: []results.Run{{Strategy: "lua-tcc", Scenario: "sustained", Flows: 10, TPS: 5,
			LatencyMS: map[string]results.Percentiles{"flow": {Count: 10, P99: 3}}, Shards: shards}}}
	}
	lost := func(l ...results.LostGenerator) *results.Results {
		r := run(results.ShardInfo{Index: 0, Of: 2, Host: "gen-a", PID: 11, HarnessCPUPct: 40, Cores: 2, Flows: 6})
		r.Runs[0].Lost, r.Runs[0].Incomplete = l, results.IncompleteGeneratorLost
		return r
	}
	cases := []struct {
		name      string
		r         *results.Results
		want, not []string
	}{
		{"single process", run(), nil, []string{"## Generators", "generators per run", "SATURATED"}},
		{"two generators, one host idle enough", run(
			results.ShardInfo{Index: 0, Of: 2, Host: "gen-a", PID: 11, HarnessCPUPct: 40, Cores: 2, Flows: 6},
			results.ShardInfo{Index: 1, Of: 2, Host: "gen-b", PID: 12, HarnessCPUPct: 30, Cores: 2, Flows: 4}),
			[]string{"## Generators", "| lua-tcc | sustained | 0/2 | gen-a | 11 | 40.0 | 2 | 6 |", "2 generators per run"}, []string{"SATURATED"}},
		{"a saturated generator", run(
			results.ShardInfo{Index: 0, Of: 2, Host: "gen-a", HarnessCPUPct: 190, Cores: 2, Saturated: true},
			results.ShardInfo{Index: 1, Of: 2, Host: "gen-b", HarnessCPUPct: 30, Cores: 2}),
			[]string{"| SATURATED |", "SATURATED generators", "generator 0 on gen-a (190 % CPU, 2 cores)"}, nil},
		{"a generator died, drained", lost(results.LostGenerator{Index: 1, Of: 2, Exit: "signal: killed", Acks: 40, Drained: 7}),
			[]string{"| 1/2 | — |", "DIED: signal: killed; 40 acks from its log; 7 events drained", "2 generators per run",
				"DIED before their report", "generator 1/2 (signal: killed", "unproven"}, []string{"SATURATED", "drain not finished"}},
		{"a generator died, drain cut", lost(results.LostGenerator{Index: 1, Of: 2, Exit: "exit status 2", Acks: 3, TornBytes: 5,
			DrainError: "context deadline exceeded", StateDir: "out/shards/x/shard-1/state"}),
			[]string{"a torn record of 5 bytes", "drain not finished: context deadline exceeded; state kept in out/shards/x/shard-1/state"}, []string{"events drained"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var term bytes.Buffer
			Table(&term, analysis.Analyze(c.r))
			out := Summary(analysis.Analyze(c.r)) + term.String()
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("missing %q in:\n%s", w, out)
				}
			}
			for _, n := range c.not {
				if strings.Contains(out, n) {
					t.Errorf("unexpected %q in:\n%s", n, out)
				}
			}
		})
	}
}
