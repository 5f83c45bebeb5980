package faults

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/servers/servertest"
)

// The servers start once, for the tests that need them (the parser's do
// not).
var (
	envOnce sync.Once
	env     servertest.Env
	stopEnv func()
	envErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if stopEnv != nil {
		stopEnv()
	}
	os.Exit(code)
}

func needEnv(t *testing.T) servertest.Env {
	t.Helper()
	envOnce.Do(func() {
		env, stopEnv, envErr = servertest.StartWith(func(o *servers.Options) { o.RedisPersistence = servers.PersistenceEverysec })
	})
	if envErr != nil {
		t.Fatalf("servers: %v", envErr)
	}
	return env
}

// short is a client timeout far below any fault window: a call held by a
// fault fails after it; a call not held is retried (waitfor) until it
// answers, however loaded the machine.
const short = 300 * time.Millisecond

func proxied(t *testing.T) (servers.Endpoints, *Proxy) {
	t.Helper()
	ep, p, err := Listen(needEnv(t).Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return ep, p
}

func redisClient(t *testing.T, ep servers.Endpoints) redis.UniversalClient {
	c := ep.RedisClient(func(o *redis.Options) { o.MaxRetries, o.ContextTimeoutEnabled, o.PoolSize = -1, true, 1 })
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func mysqlDB(t *testing.T, ep servers.Endpoints) *sql.DB {
	db, err := sql.Open("mysql", ep.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// pingRedis and pingMySQL make one round trip with the short timeout.
func pingRedis(c redis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), short)
	defer cancel()
	return c.Ping(ctx).Err()
}

func pingMySQL(db *sql.DB) error {
	ctx, cancel := context.WithTimeout(context.Background(), short)
	defer cancel()
	var one int
	return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

func timedOut(err error) bool {
	return err != nil && (errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout"))
}

// TestProxyPassesThrough: the proxied endpoints reach the same servers.
func TestProxyPassesThrough(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	ep, p := proxied(t)
	direct := needEnv(t).Endpoints
	if ep.MySQLDSN == direct.MySQLDSN || ep.RedisAddr == direct.RedisAddr {
		t.Fatal("endpoints not rewritten")
	}
	if p.Addr(Redis) != ep.RedisAddr || !strings.HasPrefix(ep.RedisAddr, "127.0.0.1:") {
		t.Fatalf("redis through %s, proxy on %s", ep.RedisAddr, p.Addr(Redis))
	}
	ctx := context.Background()
	c := redisClient(t, ep)
	if err := c.Set(ctx, "proxy:probe", "through", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := needEnv(t).Redis.Get(ctx, "proxy:probe").Result(); err != nil || v != "through" {
		t.Fatalf("direct read of a proxied write: %q, %v", v, err)
	}
	if err := servers.Ping(ctx, ep, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// roundTrips times n round trips.
func roundTrips(t *testing.T, n int, rt func() error) []time.Duration {
	t.Helper()
	var out []time.Duration
	for range n {
		start := time.Now()
		if err := rt(); err != nil {
			t.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	return out
}

// TestLatency: every round trip under the fault takes at least the added
// latency (a lower bound a busy machine cannot break), while without it
// most round trips are faster than that (counted, not timed: a fault that
// does nothing fails).
func TestLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	ep, p := proxied(t)
	const lat = 150 * time.Millisecond
	c, db := redisClient(t, ep), mysqlDB(t, ep)
	// No timeout: a round trip takes as long as it takes.
	rts := map[Target]func() error{
		Redis: func() error { return c.Ping(context.Background()).Err() },
		MySQL: func() error { var one int; return db.QueryRow("SELECT 1").Scan(&one) },
	}
	for _, target := range []Target{Redis, MySQL} {
		t.Run(string(target), func(t *testing.T) {
			rt := rts[target]
			baseline := roundTrips(t, 10, rt)
			f := Fault{Kind: Latency, Target: target, Duration: time.Hour, Latency: lat, Jitter: 20 * time.Millisecond}
			if err := p.Apply(f); err != nil {
				t.Fatal(err)
			}
			if _, ok := p.Active(target); !ok {
				t.Fatal("fault not active")
			}
			under := roundTrips(t, 5, rt)
			if err := p.Remove(target); err != nil {
				t.Fatal(err)
			}
			min := lat - 20*time.Millisecond
			for _, d := range under {
				if d < min {
					t.Fatalf("round trip of %s under a %s±20ms latency fault (all: %v)", d, lat, under)
				}
			}
			fast := 0
			for _, d := range baseline {
				if d < min {
					fast++
				}
			}
			if fast == 0 {
				t.Fatalf("no baseline round trip under %s (%v): cannot tell the fault's effect", min, baseline)
			}
			t.Logf("%s: baseline %v; with %s±20ms: %v", target, baseline, lat, under)
			waitfor.Until(t, "round trips fast again after the latency fault", func() bool {
				return roundTrips(t, 1, rt)[0] < min
			})
		})
	}
}

// TestPartition: nothing gets through to the partitioned store (round
// trips time out, on open and on new connections), the other store is
// untouched, and both answer once it is removed.
func TestPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	ep, p := proxied(t)
	c, db := redisClient(t, ep), mysqlDB(t, ep)
	ping := map[Target]func() error{Redis: func() error { return pingRedis(c) }, MySQL: func() error { return pingMySQL(db) }}
	for _, target := range []Target{Redis, MySQL} {
		t.Run(string(target), func(t *testing.T) {
			other := MySQL
			if target == MySQL {
				other = Redis
			}
			for _, tg := range []Target{target, other} {
				waitfor.Until(t, string(tg)+" answers before the partition", func() bool { return ping[tg]() == nil })
			}
			if err := p.Apply(Fault{Kind: Partition, Target: target, Duration: time.Hour}); err != nil {
				t.Fatal(err)
			}
			err := ping[target]()
			// A new connection is accepted by the proxy but hears nothing.
			fresh := redisClient(t, ep)
			freshDB := mysqlDB(t, ep)
			var errFresh error
			if target == Redis {
				errFresh = pingRedis(fresh)
			} else {
				errFresh = pingMySQL(freshDB)
			}
			waitfor.Until(t, string(other)+" answers during the other's partition", func() bool { return ping[other]() == nil })
			if rerr := p.Remove(target); rerr != nil {
				t.Fatal(rerr)
			}
			if !timedOut(err) || !timedOut(errFresh) {
				t.Fatalf("%s round trips under partition: %v (open connection), %v (new one); want timeouts", target, err, errFresh)
			}
			waitfor.Until(t, string(target)+" answers after the partition", func() bool { return ping[target]() == nil })
		})
	}
}

// TestReset: an instant reset cuts the connections open at that moment
// (their next round trip fails at once, not by timeout) and new ones work;
// a reset window resets every connection that sends until it is removed.
func TestReset(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	ep, p := proxied(t)
	ctx := context.Background()
	for _, target := range []Target{MySQL, Redis} {
		t.Run(string(target), func(t *testing.T) {
			// One pinned connection, with no retry, so its death is seen.
			var rt func() error
			var fresh func() error
			if target == MySQL {
				db := mysqlDB(t, ep)
				conn, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				rt = func() error {
					var one int
					return conn.QueryRowContext(ctx, "SELECT 1").Scan(&one)
				}
				fresh = func() error { return pingMySQL(mysqlDB(t, ep)) }
			} else {
				c := redis.NewClient(&redis.Options{Addr: ep.RedisAddr, Password: ep.RedisPassword, MaxRetries: -1, PoolSize: 1, MinIdleConns: 0})
				defer c.Close()
				conn := c.Conn()
				defer conn.Close()
				rt = func() error { return conn.Ping(ctx).Err() }
				fresh = func() error { return pingRedis(redisClient(t, ep)) }
			}
			if err := rt(); err != nil {
				t.Fatal(err)
			}
			if err := p.Apply(Fault{Kind: Reset, Target: target}); err != nil {
				t.Fatal(err)
			}
			if _, ok := p.Active(target); ok {
				t.Fatal("an instant reset stays active")
			}
			if err := rt(); err == nil {
				t.Fatalf("%s connection open across a reset still answers", target)
			} else if timedOut(err) {
				t.Fatalf("%s connection across a reset timed out (%v), want it cut", target, err)
			}
			waitfor.Until(t, "a new connection answers after the reset", func() bool { return fresh() == nil })

			if err := p.Apply(Fault{Kind: Reset, Target: target, Duration: time.Hour}); err != nil {
				t.Fatal(err)
			}
			errWindow := fresh()
			if err := p.Remove(target); err != nil {
				t.Fatal(err)
			}
			if errWindow == nil || timedOut(errWindow) {
				t.Fatalf("%s new connection inside a reset window: %v, want it reset", target, errWindow)
			}
			waitfor.Until(t, "a new connection answers after the reset window", func() bool { return fresh() == nil })
		})
	}
}

// TestListenRefusesClusters: clusters and TLS are refused with a reason.
func TestListenRefusesClusters(t *testing.T) {
	dsn := "root@tcp(127.0.0.1:1)/x"
	cases := []struct {
		ep   servers.Endpoints
		want string
	}{
		{servers.Endpoints{MySQLDSN: dsn, RedisCluster: []string{"127.0.0.1:1", "127.0.0.1:2"}}, "Redis Cluster"},
		{servers.Endpoints{MySQLDSN: dsn, RedisAddr: "127.0.0.1:1", MySQLCluster: []string{dsn, dsn, dsn}}, "Galera"},
		{servers.Endpoints{MySQLDSN: dsn, RedisURL: "rediss://127.0.0.1:1"}, "TLS Redis"},
		{servers.Endpoints{MySQLDSN: dsn + "?tls=true", RedisAddr: "127.0.0.1:1"}, "TLS MySQL"},
		{servers.Endpoints{MySQLDSN: "root@unix(/tmp/s)/x", RedisAddr: "127.0.0.1:1"}, "over tcp"},
	}
	for _, c := range cases {
		if _, _, err := Listen(c.ep); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Listen(%s): %v, want %q", c.want, err, c.want)
		}
	}
}

// TestCheckForClusters: on a Redis Cluster redis-lose is allowed where the
// provider rolls every master back (local, docker), and refused elsewhere; every
// other Redis fault, process or network, stays refused; a Galera cluster
// refuses MySQL's process faults.
func TestCheckForClusters(t *testing.T) {
	dsn := "root@tcp(127.0.0.1:1)/x"
	cluster := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	cases := []struct {
		name    string
		backend string
		ep      servers.Endpoints
		specs   []string
		want    string // empty: allowed
	}{
		{"lose on a local cluster", "local", servers.Endpoints{RedisCluster: cluster}, []string{"redis-lose@1s+1s"}, ""},
		{"lose and app-crash on a local cluster", "local", servers.Endpoints{RedisCluster: cluster}, []string{"redis-lose@1s+1s", "app-crash@3s"}, ""},
		{"lose on a docker cluster", "docker", servers.Endpoints{RedisCluster: cluster}, []string{"redis-lose@1s+1s"}, ""},
		{"lose on a cluster of another backend", "kubernetes", servers.Endpoints{RedisCluster: cluster}, []string{"redis-lose@1s+1s"}, "kubernetes backend cannot roll the masters back"},
		{"lose on an external cluster", "external", servers.Endpoints{RedisCluster: cluster}, []string{"redis-lose@1s+1s"}, "only network faults"},
		{"pause on a cluster", "local", servers.Endpoints{RedisCluster: cluster}, []string{"redis-pause@1s+1s"}, "only redis-lose is supported"},
		{"kill on a cluster", "local", servers.Endpoints{RedisCluster: cluster}, []string{"redis-restart@1s+1s"}, "only redis-lose is supported"},
		{"restart beside a lose", "local", servers.Endpoints{RedisCluster: cluster}, []string{"redis-lose@1s+1s", "redis-restart@4s"}, "only redis-lose is supported"},
		{"latency on a cluster", "local", servers.Endpoints{RedisCluster: cluster}, []string{"latency:redis=20ms@1s+1s"}, "only redis-lose is supported"},
		{"partition on a cluster", "local", servers.Endpoints{RedisCluster: cluster}, []string{"partition:redis@1s+1s"}, "only redis-lose is supported"},
		{"reset on a cluster", "local", servers.Endpoints{RedisCluster: cluster}, []string{"reset:redis@1s"}, "only redis-lose is supported"},
		{"mysql latency beside a cluster", "local", servers.Endpoints{RedisCluster: cluster}, []string{"latency:mysql=20ms@1s+1s"}, "network faults on a Redis Cluster"},
		{"lose on a single redis", "local", servers.Endpoints{RedisAddr: "127.0.0.1:1"}, []string{"redis-lose@1s+1s"}, ""},
		{"lose on a single docker redis", "docker", servers.Endpoints{RedisAddr: "127.0.0.1:1"}, []string{"redis-lose@1s+1s"}, ""},
		{"mysql restart on galera", "local", servers.Endpoints{RedisAddr: "127.0.0.1:1", MySQLCluster: []string{dsn, dsn, dsn}}, []string{"mysql-restart@1s"}, "Galera"},
		{"lose beside galera", "local", servers.Endpoints{RedisAddr: "127.0.0.1:1", MySQLCluster: []string{dsn, dsn, dsn}}, []string{"redis-lose@1s+1s"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := ParsePlan(c.specs)
			if err != nil {
				t.Fatal(err)
			}
			ep := c.ep
			ep.Backend, ep.MySQLDSN = c.backend, dsn
			err = plan.CheckFor(ep)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("CheckFor(%v): %v, want it allowed", c.specs, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("CheckFor(%v): %v, want an error with %q", c.specs, err, c.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Fatalf("CheckFor(%v): error of more than one line: %q", c.specs, err)
			}
		})
	}
}
