package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/ory/dockertest/v3"

	"github.com/stockbench/stockbench/internal/clock"
)

// errClusterPublished refuses a Redis Cluster behind published ports: each
// node tells clients (in MOVED replies and CLUSTER SLOTS) and the other
// nodes the address it listens on, which is then the container's own, not
// one the harness can reach.
var errClusterPublished = errors.New("RedisCluster on the docker backend needs host networking (a Linux engine, STOCKBENCH_DOCKER_NETWORK=host): behind published ports the nodes would give clients addresses they cannot reach; use Backend local")

// startRedisCluster runs n Redis containers in cluster mode, each in the
// host's network namespace on 127.0.0.1 with a free port and a free bus
// port of its own, waits until each answers, and forms them into one
// cluster with the code the local provider uses (formRedisCluster). The
// containers are labelled as every other (Stop and `stockbench down` remove
// them); the caller stops them all on an error. errContainerExited
// (wrapped) means a node exited during start (a port taken meanwhile), which
// Start tries again with new ports.
func (d *Docker) startRedisCluster(ctx context.Context, n int, conf, password, persistence string) (addrs []string, nodes []*dockertest.Resource, err error) {
	if d.Network != NetworkHost {
		return nil, nil, errClusterPublished
	}
	var buses []string
	for i := 0; i < n; i++ {
		port, err := freePort()
		if err != nil {
			return nil, nil, err
		}
		bus, err := freePort()
		if err != nil {
			return nil, nil, err
		}
		cmd := []string{"redis-server", "/usr/local/etc/redis/redis.conf", "--requirepass", password,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", "/data"}
		cmd = append(append(cmd, clusterArgs(bus)...), persistenceArgs(persistence)...)
		r, err := d.run(d.RedisImage, "6379/tcp", nil, cmd, []string{conf + ":/usr/local/etc/redis/redis.conf:ro"})
		if err != nil {
			return nil, nil, err
		}
		nodes = append(nodes, r)
		addrs = append(addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		buses = append(buses, strconv.Itoa(bus))
	}
	for i, r := range nodes {
		if err := d.waitRedisNode(ctx, r, addrs[i], password); err != nil {
			return nil, nil, err
		}
	}
	if err := formRedisCluster(ctx, "docker redis cluster", addrs, buses, password, dockerStartDeadline); err != nil {
		return nil, nil, err
	}
	return addrs, nodes, nil
}

// waitRedisNode waits until the node's server answers, or its container has
// exited, or dockerStartDeadline has passed.
func (d *Docker) waitRedisNode(ctx context.Context, r *dockertest.Resource, addr, password string) error {
	wctx, cancel := context.WithTimeout(ctx, dockerStartDeadline)
	defer cancel()
	for {
		pctx, pcancel := context.WithTimeout(wctx, 2*time.Second)
		err := pingRedis(pctx, addr, password)
		pcancel()
		if err == nil {
			return nil
		}
		if c, ierr := d.pool.Client.InspectContainer(r.Container.ID); ierr == nil && !c.State.Running {
			return fmt.Errorf("docker: redis cluster node %s: container %s (%s) %w with code %d", addr, c.Name, c.Config.Image, errContainerExited, c.State.ExitCode)
		}
		if !clock.Sleep(wctx, 50*time.Millisecond) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("docker: redis cluster node %s not answering after %s: %v", addr, dockerStartDeadline, err)
		}
	}
}

// sumCPU is the CPU time of a cluster's node containers together: the sum
// of each one's latest sample, at the newest of their times. ok only when
// every node has a fresh sample, so that a node whose stream stopped is not
// read as a drop of the whole.
func sumCPU(ws []*cpuWatch) func() (time.Duration, time.Time, bool) {
	return func() (time.Duration, time.Time, bool) {
		var sum time.Duration
		var at time.Time
		for _, w := range ws {
			cpu, t, ok := w.latest()
			if !ok {
				return 0, time.Time{}, false
			}
			sum += cpu
			if t.After(at) {
				at = t
			}
		}
		return sum, at, true
	}
}

// watchNodesCPU follows the CPU of a cluster's further nodes beside first's
// and returns the whole cluster's CPU as one server's (the run's Redis),
// and each node's watch, first's first.
func (d *Docker) watchNodesCPU(first *cpuWatch, more []*dockertest.Resource) (func() (time.Duration, time.Time, bool), []*cpuWatch) {
	ws := []*cpuWatch{first}
	for _, r := range more {
		w := d.watchCPU(r.Container.ID)
		d.mu.Lock()
		d.watches = append(d.watches, w)
		d.mu.Unlock()
		ws = append(ws, w)
	}
	return sumCPU(ws), ws
}
