package servers

import (
	"context"
	"fmt"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/stockbench/stockbench/internal/clock"
)

// dockerRole is one container of the docker provider.
type dockerRole struct {
	res  *dockertest.Resource
	cpu  *cpuWatch
	port string // container port, for published networking
	addr string // where it answers
}

func (d *Docker) role(target string) (*dockerRole, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.roles[target]; r != nil {
		return r, nil
	}
	switch {
	case target == TargetRedis && d.RedisCluster > 0:
		return nil, fmt.Errorf("%w on a Redis Cluster (one node's fault is not the run's Redis stalling)", ErrNoFaults)
	case target != TargetRedis && target != TargetMySQL:
		return nil, fmt.Errorf("process fault target %q: want mysql or redis", target)
	}
	return nil, fmt.Errorf("docker %s: not started", target)
}

// Pause freezes the container (docker pause: the cgroup freezer).
func (d *Docker) Pause(_ context.Context, target string) error {
	r, err := d.role(target)
	if err != nil {
		return err
	}
	if err := d.pool.Client.PauseContainer(r.res.Container.ID); err != nil {
		return fmt.Errorf("docker %s: pause: %w", target, err)
	}
	return nil
}

// Resume unpauses it.
func (d *Docker) Resume(_ context.Context, target string) error {
	r, err := d.role(target)
	if err != nil {
		return err
	}
	if err := d.pool.Client.UnpauseContainer(r.res.Container.ID); err != nil {
		return fmt.Errorf("docker %s: unpause: %w", target, err)
	}
	return nil
}

// Kill sends SIGKILL to the container and waits until it has stopped. The
// container stays, with its data, for Restart.
func (d *Docker) Kill(ctx context.Context, target string) error {
	r, err := d.role(target)
	if err != nil {
		return err
	}
	return d.kill(ctx, target, r.res.Container.ID)
}

// kill kills container id (SIGKILL) and waits until it has stopped;
// target names it in errors.
func (d *Docker) kill(ctx context.Context, target, id string) error {
	c, err := d.pool.Client.InspectContainerWithContext(id, ctx)
	if err != nil {
		return fmt.Errorf("docker %s: inspect: %w", target, err)
	}
	if !c.State.Running {
		return nil
	}
	if c.State.Paused {
		// A frozen container dies only once thawed.
		_ = d.pool.Client.UnpauseContainer(id)
	}
	if err := d.pool.Client.KillContainer(dc.KillContainerOptions{ID: id, Signal: dc.SIGKILL, Context: ctx}); err != nil {
		return fmt.Errorf("docker %s: kill: %w", target, err)
	}
	for {
		c, err := d.pool.Client.InspectContainerWithContext(id, ctx)
		if err != nil {
			return fmt.Errorf("docker %s: inspect: %w", target, err)
		}
		if !c.State.Running {
			return nil
		}
		if !clock.Sleep(ctx, 20*time.Millisecond) {
			return fmt.Errorf("docker %s: still running after kill: %w", target, ctx.Err())
		}
	}
}

// Restart kills the container unless it is stopped already, starts the
// same container again (same data, same command line and so the same
// ports with host networking) and waits until the server answers. With
// published ports the engine may publish another host port: that is an
// error, since the endpoints would be wrong.
func (d *Docker) Restart(ctx context.Context, target string) error {
	if err := d.Kill(ctx, target); err != nil {
		return err
	}
	r, _ := d.role(target)
	id := r.res.Container.ID
	if err := d.pool.Client.StartContainerWithContext(id, nil, ctx); err != nil {
		return fmt.Errorf("docker %s: start: %w", target, err)
	}
	if d.Network != NetworkHost {
		c, err := d.pool.Client.InspectContainerWithContext(id, ctx)
		if err != nil {
			return fmt.Errorf("docker %s: inspect: %w", target, err)
		}
		for _, b := range c.NetworkSettings.Ports[dc.Port(r.port)] {
			if hp := b.HostIP + ":" + b.HostPort; hp != r.addr {
				return fmt.Errorf("docker %s: restarted on %s, was %s (published ports move on restart; use host networking)", target, hp, r.addr)
			}
		}
	}
	d.follow(r.cpu, id)
	d.mu.Lock()
	ep := d.ep
	d.mu.Unlock()
	wait := dockerStartDeadline
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	var err error
	if target == TargetMySQL {
		err = pingMySQL(ctx, ep, wait)
	} else {
		err = pingRedisFor(ctx, ep, wait)
	}
	if err != nil {
		return fmt.Errorf("docker %s: after restart: %w", target, err)
	}
	return nil
}

// PID is 0: the container engine, not stockbench, owns the processes.
func (d *Docker) PID(string) int { return 0 }
