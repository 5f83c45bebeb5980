package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers/servertest"
)

// TestPrepareShardsMergeAudit is several generators started by hand, on
// servers from the harness's provider: stockbench prepare, two run --shard
// I/2 --no-reset processes of this binary meeting at one barrier, stockbench
// merge, then stockbench audit with the merged acks. The merged counts are
// the shards' sums, every buyer played once, and the audit is clean.
func TestPrepareShardsMergeAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	// The servers, as a Kubernetes Secret would give them: in the environment.
	_, exe := generatorServers(t)
	cases := []struct {
		strategy string
		// auditArgs are the audit flags the strategy needs; noRedis: it
		// keeps no stock in Redis, which the audit must then not read.
		auditArgs []string
		noRedis   bool
	}{
		{strategy: "lua-tcc", auditArgs: []string{"--redis-reservations"}},
		{strategy: "rowlock", noRedis: true},
	}
	for n, c := range cases {
		t.Run(c.strategy, func(t *testing.T) {
			dir := t.TempDir()
			flags := []string{"--backend", "external", "--strategies", c.strategy, "--scenario", "flash", "--stock", "30",
				"--buyers", "24", "--pay-delay", "2ms-10ms", "--seed", "4", "--calibrate", "0", "--quiet"}
			var out, errb bytes.Buffer
			if code := Main(context.Background(), append([]string{"prepare"}, flags...), &out, &errb); code != exitOK {
				t.Fatalf("prepare: exit %d: %s", code, errb.String())
			}
			if !strings.Contains(out.String(), "1 SKU(s) with 30 units") {
				t.Errorf("prepare said %q", out.String())
			}
			// Two generators, processes of this binary, started by the test.
			barrier := fmt.Sprintf("test-barrier-%d-%d", os.Getpid(), n)
			var cmds []*exec.Cmd
			var stderrs []*bytes.Buffer
			var dirs []string
			for i := range 2 {
				d := filepath.Join(dir, fmt.Sprintf("gen-%d", i))
				cmd := exec.Command(exe, append([]string{"run"}, append(flags, "--shard", fmt.Sprintf("%d/2", i), "--no-reset",
					"--start-barrier", barrier, "--out", d)...)...)
				cmd.Env = append(os.Environ(), shardChildEnv+"=1")
				cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
				var e bytes.Buffer
				cmd.Stderr = &e
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds, stderrs, dirs = append(cmds, cmd), append(stderrs, &e), append(dirs, d)
			}
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("generator %d: %v: %s", i, err, stderrs[i].String())
				}
			}
			mdir := filepath.Join(dir, "merged")
			out.Reset()
			errb.Reset()
			if code := Main(context.Background(), append([]string{"merge", mdir}, dirs...), &out, &errb); code != exitOK {
				t.Fatalf("merge: exit %d: %s", code, errb.String())
			}
			acks := filepath.Join(mdir, "acks.json")
			if !strings.Contains(out.String(), "stockbench audit --acks "+acks) {
				t.Errorf("merge did not point at its acks: %q", out.String())
			}
			m, err := results.ReadJSON(filepath.Join(mdir, "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			run := m.Runs[0]
			var flows, buyers int64
			for _, d := range dirs {
				r, err := results.ReadJSON(filepath.Join(d, "results.json"))
				if err != nil {
					t.Fatal(err)
				}
				flows += r.Runs[0].Flows
			}
			for _, k := range run.Journeys {
				buyers += k
			}
			if run.Flows != flows || flows == 0 || buyers != 24 {
				t.Errorf("merged flows %d, the shards' sum %d; buyers played %d of 24", run.Flows, flows, buyers)
			}
			out.Reset()
			errb.Reset()
			if c.noRedis {
				t.Setenv("STOCKBENCH_REDIS_URL", "")
			}
			args := append([]string{"audit", "--acks", acks, "--json"}, c.auditArgs...)
			if code := Main(context.Background(), args, &out, &errb); code != exitOK {
				t.Fatalf("audit: exit %d: %s%s", code, errb.String(), out.String())
			}
			var a audit.Audit
			if err := json.Unmarshal(out.Bytes(), &a); err != nil {
				t.Fatal(err)
			}
			if a.Anomalies != 0 || a.ConfirmedUnits != flows || a.LostAcks != 0 {
				t.Errorf("audit: %d anomalies, %d confirmed units (flows %d): %+v", a.Anomalies, a.ConfirmedUnits, flows, a)
			}
		})
	}
}

// externalServers starts servers from the harness's provider for a test
// that drives the binary's external backend, stops them when the test
// ends, and names them in the environment as a user would
// (STOCKBENCH_MYSQL_DSN, STOCKBENCH_REDIS_URL).
func externalServers(t *testing.T) servertest.Env {
	t.Helper()
	env, stop, err := servertest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	t.Setenv("STOCKBENCH_MYSQL_DSN", env.Endpoints.MySQLDSN)
	t.Setenv("STOCKBENCH_REDIS_URL", redisURLOf(env.Endpoints))
	t.Setenv("STOCKBENCH_REDIS_ADDR", "")
	return env
}

// generatorServers is externalServers for generators started by hand (run
// --shard on one server each, not yet on a cluster), and the path of this
// test binary, which runs as stockbench when started as a child.
func generatorServers(t *testing.T) (servertest.Env, string) {
	t.Helper()
	env := externalServers(t)
	if len(env.Endpoints.RedisCluster) > 0 || len(env.Endpoints.MySQLCluster) > 0 {
		t.Skip("several generators: not on a cluster yet")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return env, exe
}
