package servers

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/internal/clock"
)

func pingRedis(ctx context.Context, addr, password string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1})
	defer c.Close()
	return c.Ping(ctx).Err()
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// startRedisCluster starts n redis-server nodes in cluster mode and forms
// them into one cluster (formRedisCluster). The bus port of each node is a
// free port of its own (port+10000 may not exist).
func (l *Local) startRedisCluster(ctx context.Context, n int) (addrs []string, pids []int, err error) {
	var buses []string
	for i := 0; i < n; i++ {
		bus, err := freePort()
		if err != nil {
			return nil, nil, err
		}
		port, pid, dir, err := l.startRedis(ctx, clusterArgs(bus)...)
		if err != nil {
			return nil, nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		// A roll back starts the node again on its port, bus port and
		// directory: its nodes.conf there keeps its id and its slots.
		l.mu.Lock()
		l.redisNodes = append(l.redisNodes, &localRole{pid: pid, dir: dir, addr: addr,
			respawn: func(ctx context.Context) (int, error) { return l.runRedis(ctx, dir, port, clusterArgs(bus)) }})
		l.mu.Unlock()
		addrs = append(addrs, addr)
		buses = append(buses, strconv.Itoa(bus))
		pids = append(pids, pid)
	}
	if err := formRedisCluster(ctx, "local redis cluster", addrs, buses, l.RedisPassword, l.StartTimeout); err != nil {
		return nil, nil, err
	}
	return addrs, pids, nil
}

// clusterArgs are redis-server's arguments for a cluster node whose bus
// listens on bus.
func clusterArgs(bus int) []string {
	return []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "5000", "--cluster-port", strconv.Itoa(bus)}
}

// formRedisCluster makes one Redis Cluster of the empty cluster-mode nodes
// at addrs (buses are their bus ports, in the same order), which every
// provider that starts a cluster shares: it gives each node an equal range
// of the 16384 hash slots, introduces every node to the first (CLUSTER
// MEET) and waits, at most wait, until every node reports cluster_state:ok
// with all the nodes known. who starts its error messages.
func formRedisCluster(ctx context.Context, who string, addrs, buses []string, password string, wait time.Duration) error {
	n := len(addrs)
	clients := make([]*redis.Client, n)
	for i, a := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: a, Password: password})
		defer clients[i].Close()
	}
	for i, c := range clients {
		lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("%s: assign slots %d-%d to %s: %w", who, lo, hi, addrs[i], err)
		}
		if i > 0 {
			host, port, _ := net.SplitHostPort(addrs[i])
			if err := clients[0].Do(ctx, "CLUSTER", "MEET", host, port, buses[i]).Err(); err != nil {
				return fmt.Errorf("%s: meet %s: %w", who, addrs[i], err)
			}
		}
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		ok := true
		var last string
		for _, c := range clients {
			info, err := c.ClusterInfo(wctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r") {
				ok, last = false, firstLine(info, err)
				break
			}
		}
		if ok {
			return nil
		}
		if !clock.Sleep(wctx, 50*time.Millisecond) {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w", who, ctx.Err())
			}
			return fmt.Errorf("%s: not ok after %s: %s", who, wait, last)
		}
	}
}

func firstLine(s string, err error) string {
	if err != nil {
		return err.Error()
	}
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}
