package servers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/internal/clock"
)

// A Redis Cluster loses data as a whole: Checkpoint records every master,
// RollBack kills them all and starts each again holding its checkpoint, on
// its port and bus port with its nodes.conf (so it keeps its node id and
// its slots), as a store whose every shard lost its last writes. Process
// faults on one node stay refused (faulter.go): one node's fault is not the
// run's Redis stalling.

// clusterNodes are the nodes of the Redis Cluster the local provider
// started when target is Redis; nil otherwise (a single server).
func (l *Local) clusterNodes(target string) []*localRole {
	if target != TargetRedis {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.redisNodes) == 0 {
		return nil
	}
	return slices.Clone(l.redisNodes)
}

// NodePIDs are the current processes of the Redis Cluster's nodes (a roll
// back starts new ones), for CPU figures: ok is false when target is not a
// cluster the provider keeps track of, pids nil while a node is down.
func (l *Local) NodePIDs(target string) (pids []int, ok bool) {
	nodes := l.clusterNodes(target)
	if nodes == nil {
		return nil, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range nodes {
		if r.down {
			return nil, true
		}
		pids = append(pids, r.pid)
	}
	return pids, true
}

// eachNode runs fn on every node at once and returns the first error.
func eachNode[N any](nodes []N, fn func(N) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(n)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkpointCluster SAVEs every master at once: their checkpoints are
// apart by the skew of the SAVEs (milliseconds), as a cluster has no
// instant of its own.
func (l *Local) checkpointCluster(ctx context.Context, nodes []*localRole) error {
	return eachNode(nodes, func(r *localRole) error {
		if err := l.checkpointNode(ctx, r); err != nil {
			return fmt.Errorf("node %s: %w", r.addr, err)
		}
		return nil
	})
}

// rollBackCluster kills every master, puts each one's checkpoint in its
// directory beside its nodes.conf, starts them all again and returns once
// the cluster answers (waitClusterWritable). Every checkpoint is read
// before any node is killed.
func (l *Local) rollBackCluster(ctx context.Context, nodes []*localRole) error {
	snaps := map[*localRole][]byte{}
	addrs := make([]string, len(nodes))
	for i, r := range nodes {
		snap, err := readCheckpoint(r)
		if err != nil {
			return fmt.Errorf("node %s: %w", r.addr, err)
		}
		snaps[r], addrs[i] = snap, r.addr
	}
	steps := []func(r *localRole) error{
		func(r *localRole) error { return l.kill(ctx, "redis node "+r.addr, r) },
		func(r *localRole) error { return l.restoreNode(r, snaps[r]) },
		func(r *localRole) error { return l.respawnNode(ctx, r) },
		cleanCheckpoint,
	}
	for _, step := range steps {
		err := eachNode(nodes, func(r *localRole) error {
			if err := step(r); err != nil {
				return fmt.Errorf("node %s: %w", r.addr, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return waitClusterWritable(ctx, "local redis cluster roll back", addrs, l.RedisPassword, l.StartTimeout)
}

// rollBackProbe starts the keys waitClusterWritable writes (and deletes):
// outside the stores' prefix.
const rollBackProbe = "stockbench-rollback-probe:"

// waitClusterWritable waits, at most wait, until every node of the cluster
// at addrs (its masters) reports cluster_state:ok and takes a write to a
// key of its own slots. who starts its error messages.
func waitClusterWritable(ctx context.Context, who string, addrs []string, password string, wait time.Duration) error {
	clients := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: a, Password: password, MaxRetries: -1})
		defer clients[i].Close()
	}
	probes := make([]string, len(addrs))
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		err := clusterWritable(wctx, clients, probes)
		if err == nil {
			return nil
		}
		if !clock.Sleep(wctx, 50*time.Millisecond) {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w", who, ctx.Err())
			}
			return fmt.Errorf("%s: not answering after %s: %v", who, wait, err)
		}
	}
}

// clusterWritable checks once that every node says cluster_state:ok, then
// writes and deletes a key of each node's slots on that node (probes holds
// the keys once found).
func clusterWritable(ctx context.Context, clients []*redis.Client, probes []string) error {
	for _, c := range clients {
		info, err := c.ClusterInfo(ctx).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("node %s: %s", c.Options().Addr, firstLine(info, err))
		}
	}
	for i, c := range clients {
		if probes[i] == "" {
			key, err := probeKey(ctx, c)
			if err != nil {
				return fmt.Errorf("node %s: %w", c.Options().Addr, err)
			}
			probes[i] = key
		}
		if err := c.Set(ctx, probes[i], "1", 0).Err(); err != nil {
			return fmt.Errorf("node %s: write: %w", c.Options().Addr, err)
		}
		if err := c.Del(ctx, probes[i]).Err(); err != nil {
			return fmt.Errorf("node %s: write: %w", c.Options().Addr, err)
		}
	}
	return nil
}

// probeKey finds a key in one of the node's own slots (the node hashes the
// candidates: CLUSTER KEYSLOT).
func probeKey(ctx context.Context, c *redis.Client) (string, error) {
	id, err := c.ClusterMyID(ctx).Result()
	if err != nil {
		return "", err
	}
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return "", err
	}
	var own []redis.ClusterSlot
	for _, s := range slots {
		if len(s.Nodes) > 0 && s.Nodes[0].ID == id {
			own = append(own, s)
		}
	}
	if len(own) == 0 {
		return "", fmt.Errorf("serves no slot (node id %s)", id)
	}
	for i := 0; i < 10000; i++ {
		key := fmt.Sprintf("%s%d", rollBackProbe, i)
		slot, err := c.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			return "", err
		}
		for _, s := range own {
			if int(slot) >= s.Start && int(slot) <= s.End {
				return key, nil
			}
		}
	}
	return "", fmt.Errorf("no key of its slots among 10000 candidates")
}
