package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers"
)

// Secrets of the catalogue's servers; no output may hold them.
const (
	catalogueRedisPW = "s3cret-redis-pw"
	catalogueMySQLPW = "s3cret-mysql-pw"
)

// catalogueServers are real servers, started by the local provider, for the
// bad inputs that need one: a Redis that requires a password, a database
// `shop` holding the user's own orders table, and a MySQL user with a
// password.
type catalogueServers struct {
	ep       servers.Endpoints
	host     string // 127.0.0.1:port of MySQL
	redisURL string // with the right password
	shop     *sql.DB
	// rows is the user's data that must stay as it is.
	rows string
}

func startCatalogueServers(t *testing.T) *catalogueServers {
	t.Helper()
	l, err := servers.NewLocal()
	if err != nil {
		t.Fatalf("local backend unavailable: %v", err)
	}
	l.RedisPassword = catalogueRedisPW
	ep, err := l.Start(context.Background())
	if err != nil {
		l.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Stop() })
	cfg, err := mysql.ParseDSN(ep.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	cs := &catalogueServers{ep: ep, host: cfg.Addr,
		redisURL: "redis://:" + catalogueRedisPW + "@" + ep.RedisAddr + "/0"}
	root, err := sql.Open("mysql", "root@tcp("+cfg.Addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, q := range []string{
		"CREATE DATABASE shop", "CREATE DATABASE locked",
		"CREATE TABLE shop.orders (id INT PRIMARY KEY, customer VARCHAR(40), total DECIMAL(10,2))",
		"INSERT INTO shop.orders VALUES (1, 'ada', 12.50), (2, 'grace', 99.00)",
		"CREATE USER 'app'@'%' IDENTIFIED BY '" + catalogueMySQLPW + "'",
		"GRANT ALL ON *.* TO 'app'@'%'",
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if cs.shop, err = sql.Open("mysql", "root@tcp("+cfg.Addr+")/shop"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.shop.Close() })
	cs.rows = cs.userRows(t)
	return cs
}

// userRows is the content of the user's own tables.
func (cs *catalogueServers) userRows(t *testing.T) string {
	t.Helper()
	rows, err := cs.shop.Query("SELECT id, customer, total FROM orders ORDER BY id")
	if err != nil {
		t.Fatalf("the user's orders table: %v", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id int
		var c, tot string
		if err := rows.Scan(&id, &c, &tot); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%d %s %s;", id, c, tot)
	}
	return b.String()
}

// dsn names a database of the catalogue's MySQL as user with password pw.
func (cs *catalogueServers) dsn(user, pw, db string) string {
	if pw != "" {
		user += ":" + pw
	}
	return user + "@tcp(" + cs.host + ")/" + db
}

// dataDirs lists the local provider's data directories under TMPDIR.
func dataDirs() []string {
	var out []string
	for _, pat := range []string{"stockbench-mysql-*", "stockbench-redis-*"} {
		m, _ := filepath.Glob(filepath.Join(os.TempDir(), pat))
		out = append(out, m...)
	}
	return out
}

// TestBadInput is the catalogue of bad input. Every case must give: exit 2,
// one line on stderr that says what is wrong, no server or container left
// running and no data directory left behind, the user's data untouched,
// and no password printed.
func TestBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	t.Setenv("TMPDIR", t.TempDir())
	for _, k := range []string{"STOCKBENCH_MYSQL_DSN", "STOCKBENCH_REDIS_ADDR", "STOCKBENCH_REDIS_URL"} {
		t.Setenv(k, "")
	}
	cs := startCatalogueServers(t)
	ctx := context.Background()
	serverDirs := dataDirs()
	tmp := t.TempDir()
	aFile := filepath.Join(tmp, "a-file")
	os.WriteFile(aFile, []byte("x"), 0o644)
	faultyFile := filepath.Join(tmp, "faulty.yaml")
	os.WriteFile(faultyFile, []byte("faults: [redis-pause@1s+2s, app-crash]\n"), 0o644)
	// ext is an external run on the catalogue's servers against database db.
	ext := func(db string, more ...string) []string {
		return append([]string{"run", "--backend", "external", "--mysql-dsn", cs.dsn("app", catalogueMySQLPW, db),
			"--redis-url", cs.redisURL, "--strategies", "rowlock", "--calibrate", "0", "--quiet", "--out", filepath.Join(tmp, "out")}, more...)
	}
	holdLock := func(t *testing.T) func() {
		db, err := sql.Open("mysql", cs.dsn("root", "", "locked"))
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(cs.ep.RedisOptions())
		l, err := inventory.AcquireRunLock(ctx, db, rdb, "host ci-7 pid 4242 started 2026-01-01T00:00:00Z", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return func() { l.Release(); rdb.Close(); db.Close() }
	}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		// arrange, when set, prepares the stores and returns an undo.
		arrange func(t *testing.T) func()
		want    string // substring of the error line
	}{
		// Commands and flags.
		{name: "no command", args: nil, want: "usage"},
		{name: "unknown command", args: []string{"fly"}, want: "unknown command"},
		{name: "unknown flag", args: []string{"run", "--nope"}, want: "flag provided but not defined"},
		{name: "stray argument", args: []string{"run", "extra"}, want: "unexpected argument"},
		{name: "flag without value", args: []string{"run", "--buyers"}, want: "flag needs an argument"},
		{name: "not a number", args: []string{"run", "--buyers", "many"}, want: "invalid value"},
		{name: "unknown strategy", args: []string{"run", "--strategies", "rowlock,magic"}, want: `unknown strategy "magic"`},
		{name: "unknown scenario", args: []string{"run", "--scenario", "sale"}, want: "--scenario"},
		{name: "scenario twice", args: []string{"run", "--scenario", "flash,flash"}, want: "named twice"},
		{name: "sustained flag on flash", args: []string{"run", "--duration", "5s"}, want: "sustained scenario only"},
		{name: "bad cas retry", args: []string{"run", "--cas-retry", "never"}, want: "--cas-retry"},
		{name: "bad weights", args: []string{"run", "--weights", "speed=1"}, want: "--weights"},
		// Ranges.
		{name: "bad pay delay", args: []string{"run", "--pay-delay", "500ms-200ms"}, want: "--pay-delay"},
		// Arrival profiles: a malformed stages string or rate curve.
		{name: "arrival unknown kind", args: []string{"run", "--arrival", "burst:5"}, want: "--arrival"},
		{name: "arrival empty stages", args: []string{"run", "--arrival", "stages:"}, want: "no stages"},
		{name: "arrival negative stage rate", args: []string{"run", "--arrival", "stages:1s@-5"}, want: "negative rate"},
		{name: "arrival stage without rate", args: []string{"run", "--arrival", "stages:1s"}, want: "DURATION@RATE"},
		{name: "arrival csv missing file", args: []string{"run", "--arrival", "csv:" + filepath.Join(tmp, "none.csv")}, want: "rate curve"},
		{name: "arrival csv empty", args: []string{"run", "--arrival", "csv:" + writeFile(t, tmp, "empty.csv", "second,rate\n")}, want: "no second,rate line"},
		{name: "arrival csv negative rate", args: []string{"run", "--arrival", "csv:" + writeFile(t, tmp, "neg.csv", "0,10\n1,-3\n")}, want: "negative"},
		{name: "arrival csv unsorted", args: []string{"run", "--arrival", "csv:" + writeFile(t, tmp, "unsorted.csv", "0,10\n2,5\n1,5\n")}, want: "seconds must increase"},
		{name: "arrival poisson zero", args: []string{"run", "--arrival", "poisson:0"}, want: "poisson"},
		{name: "inflight below -1", args: []string{"run", "--inflight", "-2"}, want: "--inflight"},
		{name: "negative queue", args: []string{"run", "--queue", "-1"}, want: "--queue"},
		{name: "negative client retry", args: []string{"run", "--client-retry", "-1"}, want: "--client-retry"},
		{name: "bad retry backoff", args: []string{"run", "--retry-backoff", "1s-10ms"}, want: "--retry-backoff"},
		{name: "zero stock", args: []string{"run", "--stock", "0"}, want: "--stock"},
		{name: "negative buyers", args: []string{"run", "--buyers", "-5"}, want: "--buyers"},
		{name: "abandon above 1", args: []string{"run", "--abandon", "1.5"}, want: "--abandon"},
		{name: "zero ttl", args: []string{"run", "--ttl", "0s"}, want: "--ttl"},
		{name: "negative rate", args: []string{"run", "--scenario", "sustained", "--rate", "-1"}, want: "--rate"},
		{name: "bad skew", args: []string{"run", "--scenario", "sustained", "--skew", "zipf:0.5"}, want: "--skew"},
		{name: "bad mix", args: []string{"run", "--scenario", "sustained", "--mix", "confirm=0.5"}, want: "--mix"},
		{name: "zero repeat", args: []string{"run", "--repeat", "0"}, want: "--repeat"},
		{name: "zero pool", args: []string{"run", "--pool", "0"}, want: "--pool"},
		{name: "negative pool", args: []string{"run", "--pool", "-8"}, want: "--pool"},
		{name: "zero batch max", args: []string{"run", "--batch-max", "0"}, want: "--batch-max"},
		{name: "negative cas max wait", args: []string{"run", "--cas-max-wait", "-1s"}, want: "--cas-max-wait"},
		{name: "negative batch wait", args: []string{"run", "--batch-wait", "-1ms"}, want: "--batch-wait"},
		{name: "calibrate bad concurrency", args: []string{"calibrate", "--concurrency", "0"}, want: "--concurrency"},
		{name: "compare bad threshold", args: []string{"compare", "--max-tps-drop", "lots", "a", "b"}, want: "percentage"},
		{name: "sweep without param", args: []string{"sweep"}, want: "--param"},
		{name: "curve bad slo", args: []string{"curve", "--slo", "p50=10ms"}, want: "--slo"},
		{name: "curve rates not increasing", args: []string{"curve", "--rates", "400,200"}, want: "--rates"},
		{name: "curve of another scenario", args: []string{"curve", "--scenario", "flash"}, want: "sustained scenario only"},
		{name: "curve with a fixed rate", args: []string{"curve", "--rate", "100"}, want: "--rates"},
		{name: "sweep of a non-flag", args: []string{"sweep", "--param", "speed=1,2"}, want: "not a sweepable"},
		{name: "sweep of a bad value", args: []string{"sweep", "--param", "buyers=10,x"}, want: "buyers=x"},
		{name: "sweep of the redis url", args: []string{"sweep", "--param", "redis-url=a,b"}, want: "not a sweepable"},
		// Several generators.
		{name: "zero procs", args: []string{"run", "--procs", "0"}, want: "--procs must be at least 1"},
		{name: "procs and shard", args: []string{"run", "--procs", "2", "--shard", "0/2"}, want: "a shard starts no generators"},
		{name: "procs with faults", args: []string{"run", "--procs", "2", "--scenario", "sustained", "--fault", "app-crash@2s"}, want: "--procs: not with --fault"},
		{name: "procs on a cluster", args: []string{"run", "--procs", "2", "--redis-cluster", "3"}, want: "--procs: not on a Redis or MySQL cluster"},
		{name: "shard out of range", args: []string{"run", "--backend", "external", "--shard", "2/2"}, want: `--shard "2/2"`},
		{name: "shard not a fraction", args: []string{"run", "--backend", "external", "--shard", "half"}, want: `--shard "half"`},
		{name: "shard on servers of its own", args: []string{"run", "--shard", "0/2"}, want: "--shard needs --backend external"},
		{name: "no-reset without shard", args: []string{"run", "--no-reset"}, want: "go with --shard"},
		{name: "unknown generators", args: []string{"run", "--procs", "2", "--generators", "vm"}, want: `--generators "vm": want process or docker`},
		{name: "docker generators of one process", args: []string{"run", "--generators", "docker"}, want: "--generators docker goes with --procs N"},
		{name: "docker generators without an engine", args: []string{"run", "--procs", "2", "--generators", "docker"},
			env: map[string]string{"DOCKER_HOST": "unix://" + filepath.Join(tmp, "no-docker.sock")}, want: "--generators docker: docker engine does not answer"},
		{name: "prepare on servers of its own", args: []string{"prepare", "--scenario", "flash"}, want: "prepare needs --backend external"},
		{name: "prepare of two scenarios", args: []string{"prepare", "--backend", "external", "--scenario", "flash,sustained"}, want: "the stores are prepared for one"},
		{name: "prepare of a held lock", args: []string{"prepare", "--backend", "external", "--mysql-dsn", cs.dsn("app", catalogueMySQLPW, "locked"), "--redis-url", cs.redisURL},
			arrange: holdLock, want: "host ci-7 pid 4242"},
		{name: "prepare of a foreign table", args: []string{"prepare", "--backend", "external", "--mysql-dsn", cs.dsn("app", catalogueMySQLPW, "shop"), "--redis-url", cs.redisURL},
			want: "shop.orders exists and was not created by stockbench"},
		{name: "merge of one argument", args: []string{"merge", filepath.Join(tmp, "out")}, want: "usage: stockbench merge OUT DIR"},
		{name: "merge of a missing file", args: []string{"merge", filepath.Join(tmp, "out"), filepath.Join(tmp, "nothing")}, want: "read results"},
		// Faults.
		{name: "fault without a time", args: []string{"run", "--fault", "redis-pause"}, want: `fault "redis-pause": no @time`},
		{name: "unknown fault", args: []string{"run", "--fault", "redis-melt@2s"}, want: "unknown process fault"},
		{name: "pause without a duration", args: []string{"run", "--fault", "mysql-pause@2s"}, want: "pause needs a duration"},
		{name: "latency jitter above latency", args: []string{"run", "--fault", "latency:redis=5ms±10ms@1s+2s"}, want: "jitter"},
		{name: "overlapping faults", args: []string{"run", "--fault", "redis-pause@1s+3s", "--fault", "redis-restart@2s"}, want: "overlap"},
		{name: "fault after the measured phase", args: []string{"run", "--scenario", "sustained", "--duration", "5s", "--fault", "app-crash@6s"}, want: "not inside the measured phase"},
		{name: "process fault on external servers", args: ext("stockbench", "--fault", "mysql-restart@1s"), want: "only network faults"},
		{name: "bad redis persistence", args: []string{"run", "--backend", "local", "--redis-persistence", "sometimes", "--quiet", "--out", filepath.Join(tmp, "out")}, want: "--redis-persistence"},
		{name: "redis persistence on external servers", args: ext("stockbench", "--redis-persistence", "always"), want: "not to external ones"},
		{name: "faults with --fault", args: []string{"faults", "--fault", "app-crash@1s"}, want: "--only"},
		{name: "faults unknown column", args: []string{"faults", "--only", "meteor"}, want: "--only"},
		{name: "faulty scenario file", args: []string{"run", "-f", faultyFile}, want: `fault "app-crash"`},
		// Files.
		{name: "missing scenario file", args: []string{"run", "-f", "/nonexistent.yaml"}, want: "scenario file"},
		{name: "scenario file is a directory", args: []string{"run", "-f", tmp}, want: "scenario file"},
		{name: "report without dir", args: []string{"report"}, want: "usage"},
		{name: "report of missing dir", args: []string{"report", "/nonexistent"}, want: "read results"},
		{name: "compare one file", args: []string{"compare", "a.json"}, want: "usage"},
		// Outputs that cannot be written: refused before any server starts.
		{name: "out under a file", args: append(ext("stockbench"), "--out", filepath.Join(aFile, "results")), want: "not a directory"},
		{name: "out is a file", args: append(ext("stockbench"), "--out", aFile), want: "not a directory"},
		{name: "out in /proc", args: append(ext("stockbench"), "--out", "/proc/stockbench-results"), want: "cannot write"},
		// Backends, DSNs and URLs.
		{name: "unknown backend", args: []string{"run", "--backend", "cloud"}, want: "unknown backend"},
		{name: "half external", args: []string{"run", "--backend", "external", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x"}, want: "needs --mysql-dsn and --redis-addr"},
		{name: "unparsable dsn", args: []string{"run", "--backend", "external", "--mysql-dsn", "app:" + catalogueMySQLPW + "@127.0.0.1/shop", "--redis-addr", "127.0.0.1:1"}, want: "mysql dsn"},
		{name: "dsn without a database", args: []string{"run", "--backend", "external", "--mysql-dsn", "app:" + catalogueMySQLPW + "@tcp(127.0.0.1:1)/", "--redis-addr", "127.0.0.1:1"}, want: "names no database"},
		{name: "redis url with a bad scheme", args: []string{"run", "--backend", "external", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--redis-url", "http://u:" + catalogueRedisPW + "@127.0.0.1:6379"}, want: "scheme"},
		{name: "redis url with a bad port", args: []string{"run", "--backend", "external", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--redis-url", "redis://u:" + catalogueRedisPW + "@127.0.0.1:port"}, want: "redis url"},
		{name: "redis url from the environment with a bad database", args: []string{"run", "--backend", "external", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x"},
			env: map[string]string{"STOCKBENCH_REDIS_URL": "redis://:" + catalogueRedisPW + "@127.0.0.1:6379/nine"}, want: "database"},
		{name: "redis addr and url", args: []string{"run", "--backend", "external", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--redis-addr", "127.0.0.1:1", "--redis-url", "redis://127.0.0.1:1"}, want: "not both"},
		{name: "unreachable external", args: []string{"run", "--backend", "external", "--mysql-dsn", "root:" + catalogueMySQLPW + "@tcp(127.0.0.1:1)/x", "--redis-addr", "127.0.0.1:1"}, want: "does not answer"},
		{name: "unreachable redis", args: []string{"run", "--backend", "external", "--mysql-dsn", cs.dsn("app", catalogueMySQLPW, "shop"), "--redis-url", "redis://:" + catalogueRedisPW + "@127.0.0.1:1"}, want: "does not answer"},
		{name: "wrong mysql password", args: []string{"run", "--backend", "external", "--mysql-dsn", cs.dsn("app", "not-"+catalogueMySQLPW, "stockbench"), "--redis-url", cs.redisURL}, want: "Access denied"},
		{name: "missing database", args: ext("nosuchdb"), want: "Unknown database"},
		{name: "redis requires a password", args: []string{"run", "--backend", "external", "--mysql-dsn", cs.dsn("app", catalogueMySQLPW, "stockbench"), "--redis-addr", cs.ep.RedisAddr}, want: "NOAUTH"},
		{name: "wrong redis password", args: []string{"run", "--backend", "external", "--mysql-dsn", cs.dsn("app", catalogueMySQLPW, "stockbench"), "--redis-url", "redis://:not-" + catalogueRedisPW + "@" + cs.ep.RedisAddr}, want: "WRONGPASS"},
		// External MySQL clusters: a list of --mysql-dsn, one per node.
		{name: "dsn list and a local cluster", args: []string{"run", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--mysql-dsn", "root@tcp(127.0.0.1:2)/x", "--mysql-cluster", "3"}, want: "give one or the other"},
		{name: "dsn list on the local backend", args: []string{"run", "--backend", "local", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--mysql-dsn", "root@tcp(127.0.0.1:2)/x"}, want: "use --backend external"},
		{name: "a node given twice", args: ext("stockbench", "--mysql-dsn", cs.dsn("app", catalogueMySQLPW, "stockbench")), want: "is node 1 again"},
		{name: "a node without a database", args: ext("stockbench", "--mysql-dsn", "app:"+catalogueMySQLPW+"@tcp(127.0.0.1:1)/"), want: "mysql dsn (node 2)"},
		{name: "unknown causal reads", args: []string{"run", "--mysql-causal-reads", "eventually"}, want: "--mysql-causal-reads \"eventually\""},
		{name: "causal reads wsrep on a plain server", args: ext("stockbench", "--mysql-causal-reads", "wsrep"), want: "is neither a Galera node"},
		{name: "galera on docker", args: []string{"run", "--backend", "docker", "--mysql-cluster", "3"}, want: "the official mysql image has no Galera"},
		{name: "negative redis cluster on docker", args: []string{"run", "--backend", "docker", "--redis-cluster", "-1"}, want: "--redis-cluster -1"},
		{name: "negative redis cluster on auto", args: []string{"run", "--redis-cluster", "-1"}, want: "--redis-cluster -1"},
		{name: "negative mysql cluster on auto", args: []string{"run", "--mysql-cluster", "-2"}, want: "--mysql-cluster -2"},
		{name: "causal reads on docker", args: []string{"run", "--backend", "docker", "--mysql-causal-reads", "group-replication"}, want: "one plain MySQL server"},
		{name: "procs on a dsn list", args: ext("stockbench", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--procs", "2"), want: "--procs: not on a MySQL cluster"},
		{name: "audit unknown causal reads", args: []string{"audit", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--mysql-causal-reads", "eventually"}, want: "--mysql-causal-reads"},
		// The stores are not ours to use.
		{name: "a foreign table", args: ext("shop"), want: "shop.orders exists and was not created by stockbench"},
		{name: "a held lock", args: ext("locked"), arrange: holdLock, want: "host ci-7 pid 4242"},
		{name: "a held lock, calibrate", args: []string{"calibrate", "--backend", "external", "--mysql-dsn", cs.dsn("app", catalogueMySQLPW, "locked"), "--redis-url", cs.redisURL, "--duration", "100ms"},
			arrange: holdLock, want: "host ci-7 pid 4242"},
		{name: "pool beyond max_connections", args: ext("stockbench", "--pool", "100000"), want: "max_connections"},
		{name: "pool beyond max_connections, local servers", args: []string{"run", "--backend", "local", "--pool", "5000", "--quiet", "--out", filepath.Join(tmp, "out")}, want: "max_connections"},
		// The audit command.
		{name: "audit passes without every", args: []string{"audit", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--passes", "3"}, want: "--passes needs --every"},
		{name: "audit negative every", args: []string{"audit", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--every", "-1s"}, want: "--every"},
		{name: "audit bad alert-over", args: []string{"audit", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--alert-over", "sku=lots"}, want: "--alert-over"},
		{name: "negative audit timeout", args: []string{"run", "--audit-timeout", "-1s"}, want: "--audit-timeout"},
		{name: "audit bad ledger", args: []string{"audit", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--ledger", "S=ten"}, want: "--ledger"},
		{name: "audit redis-only without redis", args: []string{"audit", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--redis-reservations"}, want: "--redis-addr"},
		{name: "audit redis addr and url", args: []string{"audit", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--redis-addr", "127.0.0.1:1", "--redis-url", "redis://127.0.0.1:1"}, want: "not both"},
		{name: "audit bad redis url", args: []string{"audit", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--redis-url", "http://:" + catalogueRedisPW + "@127.0.0.1:1"}, want: "scheme"},
		{name: "audit unreachable", args: []string{"audit", "--mysql-dsn", "root:" + catalogueMySQLPW + "@tcp(127.0.0.1:1)/x"}, want: "does not answer"},
	}
	keep := map[string]bool{strconv.Itoa(cs.ep.MySQLPID): true, strconv.Itoa(cs.ep.RedisPID): true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if c.arrange != nil {
				defer c.arrange(t)()
			}
			var out, errb bytes.Buffer
			code := Main(ctx, c.args, &out, &errb)
			msg := errb.String()
			t.Logf("exit %d: %s", code, msg)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, msg)
			}
			if !strings.Contains(msg, c.want) {
				t.Fatalf("stderr %q does not say %q", msg, c.want)
			}
			if c.args != nil && (strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n")) {
				t.Fatalf("error is not one line: %q", msg)
			}
			for _, secret := range []string{catalogueRedisPW, catalogueMySQLPW} {
				if strings.Contains(out.String()+msg, secret) {
					t.Fatalf("password printed: %q", out.String()+msg)
				}
			}
			for _, k := range children() {
				if !keep[strings.Fields(k)[0]] {
					t.Fatalf("process left running: %s", k)
				}
			}
			if got := dataDirs(); !slices.Equal(got, serverDirs) {
				t.Fatalf("data directories %v, want only the catalogue's own %v", got, serverDirs)
			}
			if got := cs.userRows(t); got != cs.rows {
				t.Fatalf("the user's orders changed: %q, want %q", got, cs.rows)
			}
		})
	}
	if len(cases) < 30 {
		t.Fatalf("the catalogue has %d cases, want at least 30", len(cases))
	}
}

// TestRunEndToEnd runs the real wiring (local servers) on a small flash
// sale, then re-renders the report from results.json.
func TestRunEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"run", "--backend", "local", "--strategies", "naive,lua-tcc", "--stock", "50", "--buyers", "80",
		"--pay-delay", "5ms-20ms", "--seed", "3", "--calibrate", "200ms", "--quiet", "--out", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Config      map[string]any     `json:"config"`
		Calibration map[string]float64 `json:"calibration"`
		Env         struct {
			MySQLVersion string `json:"mysql_version"`
			RedisVersion string `json:"redis_version"`
		} `json:"env"`
		Runs []struct {
			Strategy  string                        `json:"strategy"`
			Scenario  string                        `json:"scenario"`
			TPS       float64                       `json:"tps"`
			LatencyMS map[string]map[string]float64 `json:"latency_ms"`
			Counts    map[string]map[string]int64   `json:"counts"`
			Audit     map[string]any                `json:"audit"`
		} `json:"runs"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Calibration["redis_evalsha_ops"] <= 0 || res.Calibration["mysql_hot_update_ops"] <= 0 || res.Calibration["mysql_hot_txn_ops"] <= 0 {
		t.Fatalf("calibration missing: %v", res.Calibration)
	}
	if len(res.Runs) != 2 || res.Env.MySQLVersion == "" || res.Env.RedisVersion == "" || res.Config["seed"] == nil {
		t.Fatalf("results incomplete: %s", b)
	}
	for _, r := range res.Runs {
		for _, k := range []string{"confirmed_units", "oversold_units", "oversell_rate", "leaked_units", "invariant_violations", "lost_acks"} {
			if _, ok := r.Audit[k]; !ok {
				t.Fatalf("%s: audit.%s missing", r.Strategy, k)
			}
		}
		for _, op := range []string{"reserve", "confirm", "cancel", "flow"} {
			if _, ok := r.LatencyMS[op]["p999"]; !ok {
				t.Fatalf("%s: latency_ms.%s.p999 missing", r.Strategy, op)
			}
		}
		if r.TPS <= 0 || r.Scenario != "flash" {
			t.Fatalf("%s: tps %v scenario %q", r.Strategy, r.TPS, r.Scenario)
		}
	}
	if !strings.Contains(out.String(), "lua-tcc") {
		t.Fatalf("table not printed: %s", out.String())
	}
	for _, f := range []string{"index.html", "summary.csv", "series.csv", "charts/tps-flash.png", "charts/tps-flash.svg",
		"charts/p99-flash.png", "charts/oversell-flash.png", "charts/spectrum-flash.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("run did not write %s", f)
		}
	}
	summary := filepath.Join(dir, "summary.md")
	first, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(summary)
	os.RemoveAll(filepath.Join(dir, "charts"))
	if code := Main(context.Background(), []string{"report", dir}, &out, &errb); code != exitOK {
		t.Fatalf("report exit %d: %s", code, errb.String())
	}
	again, err := os.ReadFile(summary)
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("report did not restore summary.md identically (err %v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "charts", "tps-flash.png")); err != nil {
		t.Fatalf("report did not restore the charts: %v", err)
	}
}

// cancelOn is a log writer that cancels when a line containing what is
// written: Ctrl-C pressed on an event, not after a guessed delay.
type cancelOn struct {
	bytes.Buffer
	what   string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	n, err := c.Buffer.Write(p)
	if strings.Contains(c.String(), c.what) {
		c.cancel()
	}
	return n, err
}

// TestInterrupt: Ctrl-C in the middle of a run (as its first strategy
// starts) still writes results, says how much was measured, and leaves no
// server running.
func TestInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	errb := &cancelOn{what: "running rowlock on flash", cancel: cancel}
	code := Main(ctx, []string{"run", "--backend", "local", "--strategies", "rowlock,conditional", "--stock", "10", "--buyers", "20",
		"--pay-delay", "1s-2s", "--calibrate", "0", "--out", dir}, &out, errb)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d: %s", code, exitInterrupted, errb.String())
	}
	if !strings.Contains(errb.String(), "interrupted: 0 of 2 planned run(s) finished") {
		t.Fatalf("the interrupt does not say how much was measured: %q", errb.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatalf("no results after interrupt: %v", err)
	}
	if !strings.Contains(string(b), `"interrupted": true`) {
		t.Fatalf("results do not say interrupted")
	}
	if kids := children(); len(kids) > 0 {
		t.Fatalf("processes left running: %v", kids)
	}
}

// children lists processes whose parent is this test process.
func children() []string {
	var out []string
	me := strconv.Itoa(os.Getpid())
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == me {
			out = append(out, e.Name()+" "+s[:i+1])
		}
	}
	return out
}

// TestScenarioFile: a YAML file sets flags, the command line wins, and an
// unknown key is named.
func TestScenarioFile(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("scenario: sustained\nbuyerz: 10\n"), 0o644)
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"run", "-f", bad}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), `unknown key "buyerz"`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("scenario: sustained\nstrategies: [conditional]\nbuyers: 4\nduration: 600ms\nwarmup: 0s\nmix: {confirm: 1}\nskus: 2\ncalibrate: 0s\nseed: 9\n"), 0o644)
	errb.Reset()
	code := Main(context.Background(), []string{"run", "--backend", "local", "-f", good, "--seed", "11", "--quiet", "--out", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	res := struct{ Config map[string]any }{readConfig(t, dir)}
	if sc, _ := res.Config["scenarios"].([]any); len(sc) != 1 || sc[0] != "sustained" {
		t.Errorf("config scenarios = %v", res.Config["scenarios"])
	}
	want := map[string]any{"buyers": 4.0, "skus": 2.0, "seed": 11.0, "duration": "600ms", "mix": "confirm=1,cancel=0,abandon=0"}
	for k, v := range want {
		if res.Config[k] != v {
			t.Errorf("config %s = %v, want %v", k, res.Config[k], v)
		}
	}
}

// TestSweepAndCompare runs a two-value sweep through the real wiring, then
// uses compare as CI would: the file against itself passes, against a copy
// with oversell injected it fails.
func TestSweepAndCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"sweep", "--backend", "local", "--param", "buyers=10,30", "--strategies", "conditional,cas",
		"--stock", "20", "--pay-delay", "5ms", "--calibrate", "0", "--quiet", "--out", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("sweep exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"results.json", "index.html", "summary.csv", "charts/sweep-tps.png", "charts/sweep-tps.svg", "charts/sweep-cas-retries.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("sweep did not write %s", f)
		}
	}
	path := filepath.Join(dir, "results.json")
	b, _ := os.ReadFile(path)
	var res map[string]any
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	runs, _ := res["runs"].([]any)
	if sw, _ := res["sweep"].(map[string]any); sw["param"] != "buyers" || len(runs) != 4 || fmt.Sprint(sw["x"]) != "[10 30]" {
		t.Fatalf("sweep block %v (want param buyers, axis x [10 30]), %d runs", res["sweep"], len(runs))
	}
	if code := Main(context.Background(), []string{"compare", path, path}, &out, &errb); code != exitOK {
		t.Fatalf("compare with itself: exit %d: %s", code, errb.String())
	}
	runs[0].(map[string]any)["audit"].(map[string]any)["oversold_units"] = 5
	bad, _ := json.Marshal(res)
	badPath := filepath.Join(dir, "bad.json")
	os.WriteFile(badPath, bad, 0o644)
	errb.Reset()
	if code := Main(context.Background(), []string{"compare", "--max-tps-drop", "100%", path, badPath}, &out, &errb); code != exitFailed {
		t.Fatalf("compare with injected oversell: exit %d, want %d", code, exitFailed)
	}
	if !strings.Contains(errb.String(), "regressed") {
		t.Fatalf("stderr %q", errb.String())
	}
}

// readConfig reads the config block of DIR/results.json.
func readConfig(t *testing.T, dir string) map[string]any {
	t.Helper()
	var res struct {
		Config map[string]any `json:"config"`
	}
	readResultsJSON(t, dir, &res)
	return res.Config
}

// writeFile writes content to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
