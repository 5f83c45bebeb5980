package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stockbench/stockbench/servers"
)

// TestDockerRedisClusterRun is #14's run on a docker Redis Cluster: lua-tcc
// and outbox, sustained over 100 SKUs (spread over the 3 masters' slots),
// audit clean; env says docker, 3 nodes on one host; nothing is left.
func TestDockerRedisClusterRun(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dockerOrSkip(t)
	// Behind published ports (Docker Desktop) a cluster is refused.
	if _, err := servers.New(servers.Options{Backend: "docker", RedisCluster: 3}); err != nil {
		t.Skipf("no docker redis cluster here: %v", err)
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := append([]string{"run", "--backend", "docker", "--redis-cluster", "3", "--strategies", "lua-tcc,outbox",
		"--scenario", "sustained", "--skus", "100", "--duration", "3s", "--warmup", "1s", "--calibrate", "200ms",
		"--quiet", "--out", dir}, dockerImages()...)
	code := Main(context.Background(), args, &out, &errb)
	if n := containersOfThisProcess(t); n != 0 {
		t.Errorf("%d containers left after the run", n)
	}
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Env struct {
			Backend string `json:"backend"`
			Network string `json:"docker_network"`
			Nodes   int    `json:"redis_cluster_nodes"`
			OneHost bool   `json:"cluster_on_one_host"`
		} `json:"env"`
		Runs []struct {
			Strategy string `json:"strategy"`
			Flows    int64  `json:"flows"`
			Audit    struct {
				Anomalies int64 `json:"anomalies"`
				Oversold  int64 `json:"oversold_units"`
			} `json:"audit"`
		} `json:"runs"`
	}
	readResultsJSON(t, dir, &res)
	if e := res.Env; e.Backend != "docker" || e.Network != "host" || e.Nodes != 3 || !e.OneHost {
		t.Errorf("env %+v: want docker, host networking, a cluster of 3 nodes on one host", e)
	}
	if len(res.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(res.Runs))
	}
	for _, r := range res.Runs {
		if r.Flows == 0 || r.Audit.Anomalies != 0 || r.Audit.Oversold != 0 {
			t.Errorf("%s: %d flows, %d anomalies, %d oversold: want flows and a clean audit", r.Strategy, r.Flows, r.Audit.Anomalies, r.Audit.Oversold)
		}
	}
}
