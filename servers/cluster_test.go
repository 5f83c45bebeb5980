package servers_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"
	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers"
)

// TestRedisCluster starts a 3-master Redis Cluster through each provider
// that starts one (local child processes, docker containers) and checks
// the cluster and the key layout against it: every node says
// cluster_state:ok and the masters share the 16384 slots; each SKU's keys
// share one slot (so one script may touch them), SKUs spread over the
// masters, and a script touching two SKUs' keys is refused (CROSSSLOT) —
// the failure a key outside its SKU's hash tag would meet. A node's process
// fault is refused, the cluster's CPU is sampled as one server's, and Stop
// leaves nothing running.
func TestRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	cases := []struct {
		name string
		// provider returns the provider, or skips.
		provider func(t *testing.T) servers.Provider
		// check looks at the endpoints of the started cluster.
		check func(t *testing.T, ep servers.Endpoints)
		// left lists what the provider left running after Stop.
		left func(t *testing.T, ep servers.Endpoints) []string
	}{
		{
			name: "local",
			provider: func(t *testing.T) servers.Provider {
				p, err := servers.New(servers.Options{Backend: "local", RedisCluster: 3})
				if err != nil {
					t.Fatal(err)
				}
				return p
			},
			check: func(t *testing.T, ep servers.Endpoints) {
				if len(ep.ExtraPIDs["redis"]) != 2 {
					t.Errorf("extra pids %v, want the 2 further nodes", ep.ExtraPIDs)
				}
			},
			left: func(t *testing.T, ep servers.Endpoints) []string {
				var left []string
				for _, pid := range append([]int{ep.RedisPID}, ep.ExtraPIDs["redis"]...) {
					if syscall.Kill(pid, 0) == nil {
						left = append(left, fmt.Sprintf("process %d", pid))
					}
				}
				return left
			},
		},
		{
			name: "docker",
			provider: func(t *testing.T) servers.Provider {
				// No engine (or no images) skips, as the other docker tests do.
				if _, err := servers.New(servers.Options{Backend: "docker"}); err != nil {
					if os.Getenv("STOCKBENCH_REQUIRE_DOCKER") == "1" {
						t.Fatalf("docker required: %v", err)
					}
					t.Skipf("no docker: %v", err)
				}
				p, err := servers.New(servers.Options{Backend: "docker", RedisCluster: 3})
				if err != nil && strings.Contains(err.Error(), "needs host networking") {
					t.Skipf("docker without host networking: %v", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				return p
			},
			check: func(t *testing.T, ep servers.Endpoints) {
				if ep.RedisPassword == "" {
					t.Error("docker cluster without a password")
				}
				cs := containersOfThisProcess(t)
				if len(cs) != 4 {
					t.Errorf("%d labelled containers, want 4 (mysql and 3 redis nodes)", len(cs))
				}
				for _, c := range cs {
					if _, host := c.Networks.Networks["host"]; c.Labels[servers.Label] == "" || !host {
						t.Errorf("container %s: labels %v, networks %v: want the stockbench label and host networking", c.ID[:12], c.Labels, c.Networks.Networks)
					}
				}
				// The run's Redis CPU is the sum over every node: it needs a
				// fresh sample from each container's stats.
				waitfor.Until(t, "no CPU sample of the cluster's containers", func() bool {
					_, _, ok := ep.CPU["redis"]()
					return ok
				})
			},
			left: func(t *testing.T, _ servers.Endpoints) []string {
				var left []string
				for _, c := range containersOfThisProcess(t) {
					left = append(left, "container "+c.ID[:12])
				}
				return left
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.provider(t)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			ep, err := p.Start(ctx)
			if err != nil {
				_ = p.Stop()
				t.Fatal(err)
			}
			stopped := false
			defer func() {
				if !stopped {
					_ = p.Stop()
				}
			}()
			checkCluster(ctx, t, ep)
			c.check(t, ep)
			if f, err := servers.FaulterOf(p); err != nil {
				t.Fatal(err)
			} else if err := f.Pause(ctx, servers.TargetRedis); !errors.Is(err, servers.ErrNoFaults) {
				t.Errorf("pause of the cluster's redis: %v, want %v", err, servers.ErrNoFaults)
			}
			stopped = true
			if err := p.Stop(); err != nil {
				t.Fatal(err)
			}
			if left := c.left(t, ep); len(left) > 0 {
				t.Fatalf("left after Stop: %s", strings.Join(left, ", "))
			}
		})
	}
}

// containersOfThisProcess lists the containers this test process started.
func containersOfThisProcess(t *testing.T) []dc.APIContainers {
	t.Helper()
	client, err := dc.NewClientFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := client.ListContainers(dc.ListContainersOptions{All: true,
		Filters: map[string][]string{"label": {servers.LabelPID + "=" + strconv.Itoa(os.Getpid())}}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// checkCluster checks a started 3-master cluster and the key layout on it.
func checkCluster(ctx context.Context, t *testing.T, ep servers.Endpoints) {
	t.Helper()
	if len(ep.RedisCluster) != 3 || ep.RedisAddr != ep.RedisCluster[0] {
		t.Fatalf("endpoints: cluster %v, redis %s", ep.RedisCluster, ep.RedisAddr)
	}
	// Every node: on loopback, its own port, and cluster_state:ok.
	seen := map[string]bool{}
	for _, a := range ep.RedisCluster {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" || seen[port] {
			t.Fatalf("node %s: want 127.0.0.1 and a port of its own (%v)", a, ep.RedisCluster)
		}
		seen[port] = true
		c := redis.NewClient(&redis.Options{Addr: a, Password: ep.RedisPassword})
		info, err := c.ClusterInfo(ctx).Result()
		c.Close()
		if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_assigned:16384") {
			t.Fatalf("node %s: cluster info %q, %v: want cluster_state:ok with every slot assigned", a, info, err)
		}
	}
	conns, err := servers.Open(ep, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer conns.Close()
	cc, ok := conns.Redis.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("pool is a %T, want a cluster client", conns.Redis)
	}
	masters := map[string]bool{}
	for i := 0; i < 50; i++ {
		sku := fmt.Sprintf("SKU-%d", i)
		keys := []string{inventory.RedisStockKey(sku), inventory.RedisLiveKey(sku), inventory.RedisReservationKey(sku, "order-1")}
		slot := int64(-1)
		for _, k := range keys {
			s, err := cc.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if slot >= 0 && s != slot {
				t.Fatalf("%s: %s is in slot %d, %s in %d: one script cannot touch both", sku, keys[0], slot, k, s)
			}
			slot = s
		}
		node, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Errorf("50 SKUs landed on %d masters, want all 3", len(masters))
	}
	// Keys of two SKUs in one script: the cluster refuses, as it would a
	// strategy whose key left its SKU's hash tag.
	var crossed bool
	for i := 1; i < 50 && !crossed; i++ {
		a, b := inventory.RedisStockKey("SKU-0"), inventory.RedisStockKey(fmt.Sprintf("SKU-%d", i))
		sa, _ := cc.ClusterKeySlot(ctx, a).Result()
		sb, _ := cc.ClusterKeySlot(ctx, b).Result()
		if sa == sb {
			continue
		}
		crossed = true
		node, err := cc.MasterForKey(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		err = node.Eval(ctx, "return redis.call('EXISTS', KEYS[1], KEYS[2])", []string{a, b}).Err()
		if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
			t.Fatalf("a script on two SKUs' keys: %v, want CROSSSLOT", err)
		}
	}
	if !crossed {
		t.Fatal("50 SKUs all in one slot: no cross-slot script tried")
	}
	// ResetRedis reaches every master.
	for i := 0; i < 50; i++ {
		if err := cc.Set(ctx, inventory.RedisStockKey(fmt.Sprintf("SKU-%d", i)), 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := inventory.ResetRedis(ctx, cc); err != nil {
		t.Fatal(err)
	}
	left := 0
	if err := inventory.ScanKeys(ctx, cc, inventory.RedisPrefix+"*", func(keys []string) error { left += len(keys); return nil }); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d keys left after ResetRedis on the cluster", left)
	}
}
