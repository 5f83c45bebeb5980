package servers_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockbench/stockbench/faults"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/servers/netpath"
	"github.com/stockbench/stockbench/servers/servertest"
)

// TestNetworkProfile starts the local provider's servers behind a network
// profile and checks what a delay in the packet path guarantees: no round
// trip is faster than the configured RTT (each reply is held at least that
// long), per store, and after a change of profile between runs the new
// one holds. Nothing is asserted about how much slower a round trip may be:
// a busy machine decides that. Stop leaves no namespace behind.
func TestNetworkProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	if err := netpath.Available(); err != nil {
		t.Skipf("network profile unavailable here: %v", err)
	}
	pr, err := netpath.Parse("mysql=1ms,redis=0.4ms")
	if err != nil {
		t.Fatal(err)
	}
	env, stop, err := servertest.StartWith(func(o *servers.Options) { o.Backend, o.Network = "local", pr })
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	if env.Endpoints.Netns == "" || env.Network == nil {
		t.Fatalf("servers not behind a namespace: %+v", env.Endpoints.Netns)
	}
	cfg, err := mysql.ParseDSN(env.Endpoints.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{cfg.Addr, env.Endpoints.RedisAddr} {
		host, _, _ := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() || !(&net.IPNet{IP: net.IPv4(10, 231, 0, 0), Mask: net.CIDRMask(16, 32)}).Contains(ip) {
			t.Fatalf("server at %s, not in the namespace's 10.231.0.0/16", addr)
		}
	}
	ctx := context.Background()
	// probe times 50 round trips per store through c and checks that
	// none was faster than the least delay of each store.
	probe := func(c servers.Conns, mysqlAtLeast, redisAtLeast time.Duration, what string) {
		t.Helper()
		m, r, err := servers.ProbeRTT(ctx, c, 50)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: mysql min %.3f median %.3f ms, redis min %.3f median %.3f ms", what, m.MinMS, m.MedianMS, r.MinMS, r.MedianMS)
		if m.N != 50 || r.N != 50 {
			t.Fatalf("probe timed %d and %d round trips, want 50 each", m.N, r.N)
		}
		for _, c := range []struct {
			store string
			got   float64
			want  time.Duration
		}{{"mysql", m.MinMS, mysqlAtLeast}, {"redis", r.MinMS, redisAtLeast}} {
			if c.got < float64(c.want)/float64(time.Millisecond) {
				t.Errorf("%s: %s: fastest round trip %.3f ms, below %s", what, c.store, c.got, c.want)
			}
		}
	}
	check := func(pr netpath.Profile) {
		probe(env.Conns, pr.MySQL.RTT-pr.MySQL.Jitter, pr.Redis.RTT-pr.Redis.Jitter, pr.String())
	}
	check(pr)
	for _, s := range []string{"2ms", "redis=1.5ms±0.2ms", "0"} {
		next, err := netpath.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Network.SetNetwork(ctx, next); err != nil {
			t.Fatal(err)
		}
		check(next)
	}
	// A latency fault composes with the profile: its proxy dials the
	// servers in the namespace, so its delay adds to the base RTT.
	base, _ := netpath.Parse("1ms")
	if err := env.Network.SetNetwork(ctx, base); err != nil {
		t.Fatal(err)
	}
	fault, err := faults.Parse("latency:mysql=2ms@0s+1m")
	if err != nil {
		t.Fatal(err)
	}
	proxied, proxy, err := faults.Listen(env.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	if err := proxy.Apply(fault); err != nil {
		t.Fatal(err)
	}
	pc, err := servers.Open(proxied, 2)
	if err != nil {
		t.Fatal(err)
	}
	probe(pc, 3*time.Millisecond, time.Millisecond, "rtt 1ms + latency:mysql=2ms")
	pc.Close()
	// The shaper held packets of both stores (each had an RTT above 0 in
	// some step), and says how late it released them.
	sp, ok := env.Network.(interface {
		NetworkStats() map[string]netpath.Stats
	})
	if !ok {
		t.Fatal("the local provider gives no network stats")
	}
	for _, store := range []string{netpath.StoreMySQL, netpath.StoreRedis} {
		st := sp.NetworkStats()[store]
		t.Logf("%s shaper: %d packets held, deepest queue %d, %d lost, real-time %v, late by %s on average (at most %s)",
			store, st.Held, st.MaxDepth, st.Lost, st.RealTime, st.MeanLate, st.MaxLate)
		if st.Held == 0 {
			t.Errorf("%s: the shaper held no packet", store)
		}
	}
	ns := env.Endpoints.Netns
	stop()
	stopped = true
	if _, err := os.Stat(filepath.Join("/var/run/netns", ns)); !os.IsNotExist(err) {
		t.Fatalf("namespace %s left behind after Stop (stat: %v)", ns, err)
	}
}
