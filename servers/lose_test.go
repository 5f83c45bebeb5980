package servers

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/servers/netpath"
)

// TestLocalRollBack: a roll back brings the local Redis back holding what
// it held at the checkpoint — a write before it kept, writes after it
// lost — as a new process (run id changed), with and without AOF; and a
// later plain restart without persistence comes up empty as before. Behind
// a network profile the Redis listens in the run's namespace, and the
// checkpoint reaches it there.
func TestLocalRollBack(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	cases := []struct {
		name, persistence string
		netns             bool
	}{
		{PersistenceNone, PersistenceNone, false},
		{PersistenceEverysec, PersistenceEverysec, false},
		{"behind a network profile", PersistenceNone, true},
	}
	for _, tc := range cases {
		persistence := tc.persistence
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewLocal()
			if err != nil {
				t.Fatal(err)
			}
			l.RedisPersistence = persistence
			defer l.Stop()
			ctx := context.Background()
			if tc.netns {
				if err := netpath.Available(); err != nil {
					t.Skipf("network profile unavailable here: %v", err)
				}
				p, err := netpath.Create(ctx)
				if err != nil {
					t.Fatal(err)
				}
				l.mu.Lock()
				l.path = p
				l.mu.Unlock()
			}
			port, _, err := l.startSingleRedis(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ep := Endpoints{RedisAddr: net.JoinHostPort(l.host(), strconv.Itoa(port)), RedisPersistence: persistence}
			c := ep.RedisClient(func(o *redis.Options) { o.MaxRetries = -1 })
			defer c.Close()
			runID := func() string {
				info, err := c.Info(ctx, "server").Result()
				if err != nil {
					t.Fatal(err)
				}
				_, id, _ := strings.Cut(info, "run_id:")
				id, _, _ = strings.Cut(id, "\r\n")
				return id
			}
			if err := c.Set(ctx, "kept", "1", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.HSet(ctx, "h", "n", 1).Err(); err != nil {
				t.Fatal(err)
			}
			if err := l.Checkpoint(ctx, TargetRedis); err != nil {
				t.Fatal(err)
			}
			if err := c.Set(ctx, "lost", "1", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.HIncrBy(ctx, "h", "n", 5).Err(); err != nil {
				t.Fatal(err)
			}
			before := runID()
			if err := l.RollBack(ctx, TargetRedis); err != nil {
				t.Fatal(err)
			}
			if v, err := c.Get(ctx, "kept").Result(); err != nil || v != "1" {
				t.Fatalf("key written before the checkpoint: %q, %v", v, err)
			}
			if v, err := c.Get(ctx, "lost").Result(); !errors.Is(err, redis.Nil) {
				t.Fatalf("key written after the checkpoint: %q, %v; want it lost", v, err)
			}
			if n, err := c.HGet(ctx, "h", "n").Int(); err != nil || n != 1 {
				t.Fatalf("field changed after the checkpoint: %d, %v; want 1", n, err)
			}
			if runID() == before {
				t.Fatalf("run id unchanged: the roll back was no restart")
			}
			if err := l.Restart(ctx, TargetRedis); err != nil {
				t.Fatal(err)
			}
			v, err := c.Get(ctx, "kept").Result()
			switch {
			case persistence == PersistenceNone && !errors.Is(err, redis.Nil):
				t.Fatalf("restart without persistence after a roll back kept %q (%v): want it empty", v, err)
			case persistence != PersistenceNone && v != "1":
				t.Fatalf("restart with AOF after a roll back lost the key (%q, %v)", v, err)
			}
			if err := l.Checkpoint(ctx, TargetMySQL); !errors.Is(err, ErrNoFaults) {
				t.Fatalf("checkpoint of MySQL: %v, want ErrNoFaults", err)
			}
		})
	}
}

// TestClusterRollBack: on a Redis Cluster a roll back brings every master
// back holding what it held at the checkpoint — keys on every master
// written before it kept, later ones and later changes lost — each as a
// new process (run id changed; local: a new pid, which the CPU figures
// follow) on its port with its node id and its slots, the cluster ok on
// every node; and the client the run holds (a ClusterClient that sends no
// command again) works on after it. Local and docker providers, with and
// without AOF.
func TestClusterRollBack(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	cases := []struct{ backend, persistence string }{
		{"local", PersistenceNone},
		{"local", PersistenceEverysec},
		{"docker", PersistenceNone},
		{"docker", PersistenceEverysec},
	}
	for _, tc := range cases {
		t.Run(tc.backend+"/"+tc.persistence, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			var (
				ep      Endpoints
				faulter interface {
					Faulter
					DataLoser
				}
				// pids are the nodes' processes (local only).
				pids func() []int
			)
			switch tc.backend {
			case "local":
				l, err := NewLocal()
				if err != nil {
					t.Fatal(err)
				}
				l.RedisPersistence, l.RedisCluster = tc.persistence, 3
				defer l.Stop()
				addrs, _, err := l.startRedisCluster(ctx, 3)
				if err != nil {
					t.Fatal(err)
				}
				ep = Endpoints{RedisCluster: addrs, RedisAddr: addrs[0], RedisPersistence: tc.persistence}
				faulter = l
				pids = func() []int {
					p, ok := l.NodePIDs(TargetRedis)
					if !ok || len(p) != 3 {
						t.Fatalf("node pids: %v, %v; want 3", p, ok)
					}
					return p
				}
			case "docker":
				d := needDocker(t)
				if d.Network != NetworkHost {
					t.Skipf("docker without host networking: no cluster")
				}
				d.RedisPersistence, d.RedisCluster = tc.persistence, 3
				defer d.Stop()
				var err error
				if ep, err = d.Start(ctx); err != nil {
					t.Fatal(err)
				}
				faulter = d
			}
			addrs := ep.RedisCluster
			c := ep.RedisClient(func(o *redis.Options) { o.MaxRetries = -1 }).(*redis.ClusterClient)
			defer c.Close()
			// layout is each node's id and run id, and the slot ranges by
			// the id of the node serving them.
			layout := func() (ids, runs []string, slots map[[2]int]string) {
				slots = map[[2]int]string{}
				for _, a := range addrs {
					n := redis.NewClient(&redis.Options{Addr: a, Password: ep.RedisPassword})
					id, err := n.ClusterMyID(ctx).Result()
					if err != nil {
						t.Fatal(err)
					}
					info, err := n.Info(ctx, "server").Result()
					if err != nil {
						t.Fatal(err)
					}
					_, run, _ := strings.Cut(info, "run_id:")
					run, _, _ = strings.Cut(run, "\r\n")
					ci, err := n.ClusterInfo(ctx).Result()
					if err != nil || !strings.Contains(ci, "cluster_state:ok") || !strings.Contains(ci, "cluster_slots_assigned:16384") {
						t.Fatalf("node %s: cluster info %q, %v: want cluster_state:ok with every slot assigned", a, ci, err)
					}
					cs, err := n.ClusterSlots(ctx).Result()
					if err != nil {
						t.Fatal(err)
					}
					for _, s := range cs {
						if prev, ok := slots[[2]int{s.Start, s.End}]; ok && prev != s.Nodes[0].ID {
							t.Fatalf("slots %d-%d: node %s says %s, another %s", s.Start, s.End, a, s.Nodes[0].ID, prev)
						}
						slots[[2]int{s.Start, s.End}] = s.Nodes[0].ID
					}
					n.Close()
					ids, runs = append(ids, id), append(runs, run)
				}
				return ids, runs, slots
			}
			const keys = 60
			masters := map[string]int{}
			for i := 0; i < keys; i++ {
				k := "kept:" + strconv.Itoa(i)
				if err := c.Set(ctx, k, i, 0).Err(); err != nil {
					t.Fatal(err)
				}
				m, err := c.MasterForKey(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				masters[m.Options().Addr]++
				if err := c.HSet(ctx, "h:"+strconv.Itoa(i), "n", 1).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if len(masters) != 3 {
				t.Fatalf("%d keys on %d masters (%v), want keys on all 3", keys, len(masters), masters)
			}
			if err := faulter.Checkpoint(ctx, TargetRedis); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < keys; i++ {
				if err := c.Set(ctx, "lost:"+strconv.Itoa(i), i, 0).Err(); err != nil {
					t.Fatal(err)
				}
				if err := c.HIncrBy(ctx, "h:"+strconv.Itoa(i), "n", 5).Err(); err != nil {
					t.Fatal(err)
				}
			}
			ids, runs, slots := layout()
			var before []int
			if pids != nil {
				before = pids()
			}
			if err := faulter.RollBack(ctx, TargetRedis); err != nil {
				t.Fatal(err)
			}
			if pids != nil {
				// The CPU figures follow the new processes.
				for i, pid := range pids() {
					if pid == before[i] || syscall.Kill(pid, 0) != nil || syscall.Kill(before[i], 0) == nil {
						t.Errorf("node %s: pid %d after the roll back, was %d: want a new, live process and the old one gone", addrs[i], pid, before[i])
					}
				}
			}
			idsAfter, runsAfter, slotsAfter := layout()
			for i, a := range addrs {
				if idsAfter[i] != ids[i] {
					t.Errorf("node %s: id %s after the roll back, was %s", a, idsAfter[i], ids[i])
				}
				if runsAfter[i] == runs[i] {
					t.Errorf("node %s: run id unchanged: the roll back was no restart", a)
				}
			}
			if len(slotsAfter) != len(slots) {
				t.Errorf("slot ranges %v after the roll back, were %v", slotsAfter, slots)
			}
			for r, id := range slots {
				if slotsAfter[r] != id {
					t.Errorf("slots %d-%d: served by %s after the roll back, were by %s", r[0], r[1], slotsAfter[r], id)
				}
			}
			for i := 0; i < keys; i++ {
				k := strconv.Itoa(i)
				if v, err := c.Get(ctx, "kept:"+k).Int(); err != nil || v != i {
					t.Fatalf("key written before the checkpoint: %d, %v", v, err)
				}
				if v, err := c.Get(ctx, "lost:"+k).Result(); !errors.Is(err, redis.Nil) {
					t.Fatalf("key written after the checkpoint: %q, %v; want it lost", v, err)
				}
				if n, err := c.HGet(ctx, "h:"+k, "n").Int(); err != nil || n != 1 {
					t.Fatalf("field changed after the checkpoint: %d, %v; want 1", n, err)
				}
			}
			// The client writes on to every master.
			for i := 0; i < keys; i++ {
				if err := c.Set(ctx, "after:"+strconv.Itoa(i), i, 0).Err(); err != nil {
					t.Fatalf("write after the roll back: %v", err)
				}
			}
			wrote := map[string]bool{}
			for i := 0; i < keys; i++ {
				m, err := c.MasterForKey(ctx, "after:"+strconv.Itoa(i))
				if err != nil {
					t.Fatal(err)
				}
				wrote[m.Options().Addr] = true
			}
			if len(wrote) != 3 {
				t.Fatalf("writes after the roll back reached %d masters, want 3", len(wrote))
			}
			// A second loss needs a checkpoint of its own; process faults
			// on one node stay refused.
			if err := faulter.RollBack(ctx, TargetRedis); err == nil || !strings.Contains(err.Error(), "no checkpoint") {
				t.Fatalf("roll back without a checkpoint: %v, want refused", err)
			}
			if err := faulter.Pause(ctx, TargetRedis); !errors.Is(err, ErrNoFaults) {
				t.Fatalf("pause of the cluster's redis: %v, want ErrNoFaults", err)
			}
		})
	}
}
