package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/servers/servertest"
)

// TestExternalMySQLCluster starts a 3-node Galera cluster through the
// local provider (servertest: the code users run) and points the CLI at it
// as an external cluster, one --mysql-dsn per node: auto must find the
// Galera nodes and choose wsrep causal reads, say so in the run's header
// and results.json, and the strategies must audit clean on every node.
// `stockbench audit` takes the same list and names a node that disagrees.
func TestExternalMySQLCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	env, stop, err := servertest.StartWith(func(o *servers.Options) {
		o.Backend, o.MySQLCluster, o.RedisCluster, o.MySQLDSN, o.MySQLDSNs = "local", 3, 0, "", nil
	})
	if err != nil {
		t.Fatalf("servers: %v", err)
	}
	t.Cleanup(stop)
	nodes := env.Endpoints.MySQLCluster
	if len(nodes) != 3 {
		t.Fatalf("cluster of %d nodes, want 3", len(nodes))
	}
	ctx := context.Background()
	dsnFlags := func(extra ...string) []string {
		var out []string
		for _, n := range nodes {
			out = append(out, "--mysql-dsn", n)
		}
		return append(out, extra...)
	}
	redisAddr := env.Endpoints.RedisAddr

	t.Run("run", func(t *testing.T) {
		dir := t.TempDir()
		args := append([]string{"run", "--backend", "external", "--redis-addr", redisAddr, "--strategies", "rowlock,batched,lua-tcc",
			"--stock", "20", "--buyers", "40", "--pay-delay", "1ms-5ms", "--calibrate", "0", "--out", dir}, dsnFlags()...)
		var out, errb bytes.Buffer
		if code := Main(ctx, args, &out, &errb); code != exitOK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		if want := "causal reads wsrep (wsrep_sync_wait=1), chosen by auto"; !strings.Contains(errb.String(), want) {
			t.Errorf("header does not say %q:\n%s", want, errb.String())
		}
		var res struct {
			Env struct {
				Backend    string `json:"backend"`
				Nodes      int    `json:"mysql_cluster_nodes"`
				Spread     bool   `json:"mysql_spread"`
				Causal     string `json:"mysql_causal_reads"`
				CausalAuto bool   `json:"mysql_causal_reads_auto"`
				OneHost    bool   `json:"cluster_on_one_host"`
			} `json:"env"`
			Runs []struct {
				Strategy string `json:"strategy"`
				Audit    struct {
					Anomalies  int64    `json:"anomalies"`
					Oversold   int64    `json:"oversold_units"`
					Violations []string `json:"violations"`
				} `json:"audit"`
			} `json:"runs"`
		}
		readResultsJSON(t, dir, &res)
		e := res.Env
		if e.Backend != "external" || e.Nodes != 3 || !e.Spread || e.Causal != servers.CausalWsrep || !e.CausalAuto || !e.OneHost {
			t.Errorf("env %+v: want external, 3 nodes spread, wsrep chosen by auto, on one host", e)
		}
		if len(res.Runs) != 3 {
			t.Fatalf("%d runs, want 3", len(res.Runs))
		}
		for _, r := range res.Runs {
			if r.Audit.Anomalies != 0 || r.Audit.Oversold != 0 {
				t.Errorf("%s: %d anomalies, %d oversold: %v", r.Strategy, r.Audit.Anomalies, r.Audit.Oversold, r.Audit.Violations)
			}
		}
	})

	t.Run("explicit modes", func(t *testing.T) {
		cases := []struct {
			mode string
			code int
			want string // in stderr (an error) or results.json
		}{
			{servers.CausalWsrep, exitOK, `"mysql_causal_reads": "wsrep"`},
			{servers.CausalNone, exitOK, `"mysql_causal_reads": "none"`},
			{servers.CausalGroupReplication, exitUsage, "mysql node 1 (" + nodeAddrOf(t, nodes[0]) + ") is a Galera node"},
		}
		for _, c := range cases {
			t.Run(c.mode, func(t *testing.T) {
				dir := t.TempDir()
				args := append([]string{"run", "--backend", "external", "--redis-addr", redisAddr, "--strategies", "conditional",
					"--stock", "5", "--buyers", "10", "--pay-delay", "0", "--calibrate", "0", "--quiet", "--out", dir}, dsnFlags("--mysql-causal-reads", c.mode)...)
				var out, errb bytes.Buffer
				code := Main(ctx, args, &out, &errb)
				if code != c.code {
					t.Fatalf("exit %d, want %d: %s", code, c.code, errb.String())
				}
				got := errb.String()
				if code == exitOK {
					b, err := os.ReadFile(filepath.Join(dir, "results.json"))
					if err != nil {
						t.Fatal(err)
					}
					got = string(b)
				}
				if !strings.Contains(got, c.want) {
					t.Fatalf("does not say %q: %s", c.want, got)
				}
			})
		}
	})

	t.Run("audit", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := Main(ctx, append([]string{"audit"}, dsnFlags()...), &out, &errb); code != exitOK {
			t.Fatalf("audit of an agreeing cluster: exit %d: %s%s", code, out.String(), errb.String())
		}
		if !strings.Contains(out.String(), "mysql cluster of 3 nodes") || !strings.Contains(out.String(), "no anomaly") {
			t.Fatalf("audit output:\n%s", out.String())
		}
		// A write node 3 does not replicate: the cluster no longer agrees.
		db, err := sql.Open("mysql", nodes[2])
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, q := range []string{"SET SESSION wsrep_on=OFF", "UPDATE inventory SET total = total + 1, available = available + 1 ORDER BY sku LIMIT 1"} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		out.Reset()
		errb.Reset()
		if code := Main(ctx, append([]string{"audit"}, dsnFlags()...), &out, &errb); code != exitFailed {
			t.Fatalf("audit of a disagreeing cluster: exit %d, want %d: %s%s", code, exitFailed, out.String(), errb.String())
		}
		if !strings.Contains(out.String(), "mysql node 3 disagrees with node 1") {
			t.Fatalf("audit does not name node 3:\n%s", out.String())
		}
	})
}

func nodeAddrOf(t *testing.T, dsn string) string {
	t.Helper()
	i, j := strings.Index(dsn, "tcp("), strings.Index(dsn, ")/")
	if i < 0 || j < i {
		t.Fatalf("dsn %q: no tcp address", dsn)
	}
	return dsn[i+4 : j]
}
