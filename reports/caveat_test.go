package reports

import (
	"strings"
	"testing"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

// TestOneHostCaveat: a sweep on a cluster whose nodes all ran on this
// machine says, in summary.md and in index.html next to the charts, that it
// shows the mechanics and not the scaling, with the load average; a run on
// single servers or on a cluster over several hosts says nothing of it.
func TestOneHostCaveat(t *testing.T) {
	sweep := &results.Sweep{Param: "skus", Values: []string{"1", "10", "100"}}
	cases := []struct {
		name string
		env  results.Env
		want []string // in the caveat; none: no caveat
	}{
		{"local redis cluster", results.Env{Backend: "local", RedisClusterNodes: 3, Cores: 2, LoadAverage: "9.10 8.00 7.00", ClusterOnOneHost: true},
			[]string{"a Redis Cluster of 3 masters", "(2 cores)", "not the scaling", "Load average when the run started: 9.10 8.00 7.00."}},
		{"local galera", results.Env{Backend: "local", MySQLClusterNodes: 3, Cores: 2, ClusterOnOneHost: true}, []string{"a MySQL cluster of 3 nodes"}},
		{"older results without the flag", results.Env{Backend: "local", MySQLClusterNodes: 3, Cores: 2}, []string{"a MySQL cluster of 3 nodes"}},
		{"external cluster on loopback", results.Env{Backend: "external", MySQLClusterNodes: 3, Cores: 2, ClusterOnOneHost: true}, []string{"a MySQL cluster of 3 nodes"}},
		{"external cluster elsewhere", results.Env{Backend: "external", MySQLClusterNodes: 3, Cores: 2}, nil},
		{"single servers", results.Env{Backend: "local", Cores: 2}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &results.Results{Env: c.env, Sweep: sweep, Runs: []results.Run{{Strategy: "lua-tcc", Scenario: "sustained", Value: "1"}}}
			got := oneHostCaveat(r)
			md := renderMarkdown("sweep", sweepOf(analysis.Analyze(r)))
			page, err := htmlPage(analysis.Analyze(r), nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.want == nil {
				if got != "" || strings.Contains(md, "On one machine") || strings.Contains(string(page), "On one machine") {
					t.Fatalf("caveat where none belongs: %q", got)
				}
				return
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("caveat %q does not say %q", got, w)
				}
			}
			if !strings.Contains(md, "charts/sweep-tps.png") || strings.Contains(md, "sweep-cas-retries") || !strings.Contains(md, "**On one machine:** "+got) {
				t.Errorf("summary.md's sweep section lacks the charts or the caveat:\n%s", md)
			}
			if !strings.Contains(string(page), "<b>On one machine:</b>") {
				t.Errorf("index.html has no caveat beside the charts")
			}
		})
	}
}
