package servers

import (
	"slices"
	"strings"
	"testing"
)

// TestMySQLDSNList: the list of an external MySQL cluster's nodes comes from
// repeated flags or from STOCKBENCH_MYSQL_DSNS (one per line, so a comma in
// a password is kept), and is refused with one clear line when it clashes
// with other settings; no message quotes a password.
func TestMySQLDSNList(t *testing.T) {
	const pw = "pa,ss-w0rd"
	a, b := "app:"+pw+"@tcp(127.0.0.1:3306)/bench", "app:"+pw+"@tcp(127.0.0.1:3307)/bench"
	t.Run("env", func(t *testing.T) {
		t.Setenv("STOCKBENCH_MYSQL_DSN", "")
		t.Setenv("STOCKBENCH_MYSQL_DSNS", a+"\n  \n"+b+"\n")
		if got := OptionsFromEnv(Options{}).MySQLDSNs; !slices.Equal(got, []string{a, b}) {
			t.Fatalf("nodes from the environment: %q", got)
		}
		if got := OptionsFromEnv(Options{MySQLDSN: a}); got.MySQLDSN != a || got.MySQLDSNs != nil {
			t.Fatalf("a DSN given by flag is not mixed with the environment's: %+v", got)
		}
	})
	cases := []struct {
		name string
		o    Options
		want string // "" : accepted
	}{
		{"two nodes", Options{Backend: "external", MySQLDSNs: []string{a, b}, RedisAddr: "127.0.0.1:1"}, ""},
		{"one node in the list", Options{Backend: "external", MySQLDSNs: []string{a}, RedisAddr: "127.0.0.1:1", CausalReads: CausalWsrep}, ""},
		{"list and local cluster", Options{MySQLDSNs: []string{a, b}, MySQLCluster: 3}, "give one or the other"},
		{"dsn and local cluster", Options{MySQLDSN: a, MySQLCluster: 3}, "give one or the other"},
		{"list on local", Options{Backend: "local", MySQLDSNs: []string{a, b}}, "use Backend external"},
		{"a node twice", Options{Backend: "external", MySQLDSNs: []string{a, b, a}, RedisAddr: "127.0.0.1:1"}, "node 3 (127.0.0.1:3306) is node 1 again"},
		{"a node without database", Options{Backend: "external", MySQLDSNs: []string{a, strings.TrimSuffix(b, "bench")}, RedisAddr: "127.0.0.1:1"}, "mysql dsn (node 2)"},
		{"unknown causal mode", Options{Backend: "external", MySQLDSNs: []string{a, b}, RedisAddr: "127.0.0.1:1", CausalReads: "strong"}, `CausalReads "strong"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := New(c.o)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if e, ok := p.(*External); !ok || e.DSN != a {
					t.Fatalf("provider %#v, want external with the first node as its DSN", p)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("password printed: %v", err)
			}
		})
	}
}

// TestMySQLDescription: the header's line names nodes by address, the pool's
// placement and the causal-read mode, never a password.
func TestMySQLDescription(t *testing.T) {
	const pw = "s3cret"
	n := func(port string) string { return "app:" + pw + "@tcp(127.0.0.1:" + port + ")/bench" }
	cases := []struct {
		ep   Endpoints
		want string
	}{
		{Endpoints{MySQLDSN: n("1")}, "mysql app:***@tcp(127.0.0.1:1)/bench"},
		{Endpoints{MySQLDSN: n("1"), MySQLCluster: []string{n("1"), n("2"), n("3")}, MySQLSpread: true, MySQLCausalReads: CausalWsrep, MySQLCausalAuto: true},
			"mysql cluster of 3 nodes (127.0.0.1:1, 127.0.0.1:2, 127.0.0.1:3), pool on every node in turn, causal reads wsrep (wsrep_sync_wait=1), chosen by auto"},
		{Endpoints{MySQLDSN: n("1"), MySQLCluster: []string{n("1"), n("2")}, MySQLCausalReads: CausalGroupReplication},
			"mysql cluster of 2 nodes (127.0.0.1:1, 127.0.0.1:2), pool on node 1 only, causal reads group-replication (group_replication_consistency='BEFORE')"},
		{Endpoints{MySQLDSN: n("1"), MySQLCluster: []string{n("1"), n("2")}, MySQLSpread: true, MySQLCausalReads: CausalNone, MySQLCausalAuto: true},
			"mysql cluster of 2 nodes (127.0.0.1:1, 127.0.0.1:2), pool on every node in turn, causal reads none, chosen by auto"},
	}
	for _, c := range cases {
		if got := c.ep.MySQLDescription(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}
