package servers

import (
	"context"
	"fmt"
	"strconv"

	dc "github.com/ory/dockertest/v3/docker"
)

// CPULimiter is a provider that limits its servers' CPU itself: the
// docker backend, through each container's CPU quota and cpuset (what
// `docker update --cpus --cpuset-cpus` sets). LimitCPU gives target's
// containers (TargetMySQL, TargetRedis) a quota of cores (0: none) and
// the core ids of set (a cpuset list; "": any). The engine keeps the
// limits across a container's restart; they end with the containers.
// Safe to call between runs, not during one.
type CPULimiter interface {
	LimitCPU(ctx context.Context, target string, cores float64, set string) error
}

var _ CPULimiter = (*Docker)(nil)

// cfsPeriod is the CFS period of a container's quota, in µs (Docker's
// default, and what --cpus uses).
const cfsPeriod = 100000

// LimitCPU sets the CPU quota and cpuset of target's containers through
// the engine. A Redis Cluster's nodes are pinned alike; a quota there is
// refused, since each node's container would get the whole quota.
func (d *Docker) LimitCPU(ctx context.Context, target string, cores float64, set string) error {
	d.mu.Lock()
	var ids []string
	switch {
	case target == TargetRedis && len(d.redisNodes) > 0:
		for _, n := range d.redisNodes {
			ids = append(ids, n.res.Container.ID)
		}
	case d.roles[target] != nil:
		ids = []string{d.roles[target].res.Container.ID}
	}
	d.mu.Unlock()
	if len(ids) == 0 {
		return fmt.Errorf("docker: no %s container to limit", target)
	}
	if cores > 0 && len(ids) > 1 {
		return fmt.Errorf("docker: a CPU quota for %s's %d containers would give each the whole quota; pin them with --cpuset instead", target, len(ids))
	}
	opts := dc.UpdateContainerOptions{CpusetCpus: set, Context: ctx}
	if cores > 0 {
		opts.CPUPeriod, opts.CPUQuota = cfsPeriod, int(cores*cfsPeriod)
	}
	for _, id := range ids {
		if err := d.pool.Client.UpdateContainer(id, opts); err != nil {
			return fmt.Errorf("docker: limit %s's CPU (quota %s cores, cpuset %q): %w", target, strconv.FormatFloat(cores, 'g', -1, 64), set, err)
		}
	}
	return nil
}
