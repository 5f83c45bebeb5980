package servers

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"time"

	dc "github.com/ory/dockertest/v3/docker"
	"github.com/redis/go-redis/v9"
)

// redisCheckpoint is what the docker provider's Checkpoint saved: the
// server's data directory and the RDB image of its data.
type redisCheckpoint struct {
	dir string
	rdb []byte
}

// Checkpoint SAVEs the Redis container's data and copies the RDB file out
// of the container (the server keeps serving); on a Redis Cluster, every
// master's.
func (d *Docker) Checkpoint(ctx context.Context, target string) error {
	if target != TargetRedis {
		return fmt.Errorf("%w: only Redis loses data (MySQL's commits are durable)", ErrNoFaults)
	}
	d.mu.Lock()
	ep, nodes := d.ep, d.redisNodes
	d.mu.Unlock()
	if len(nodes) > 0 {
		cps := make([]*redisCheckpoint, len(nodes))
		err := eachNode(indexes(nodes), func(i int) error {
			c := redis.NewClient(&redis.Options{Addr: nodes[i].addr, Password: ep.RedisPassword, MaxRetries: -1})
			defer c.Close()
			var err error
			if cps[i], err = d.checkpointContainer(ctx, c, nodes[i].res.Container.ID); err != nil {
				return fmt.Errorf("node %s: %w", nodes[i].addr, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.nodeCheckpoints = cps
		d.mu.Unlock()
		return nil
	}
	r, err := d.role(target)
	if err != nil {
		return err
	}
	c := ep.RedisClient(nil)
	defer c.Close()
	cp, err := d.checkpointContainer(ctx, c, r.res.Container.ID)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.checkpoint = cp
	d.mu.Unlock()
	return nil
}

// indexes are 0 .. len(s)-1.
func indexes[T any](s []T) []int {
	is := make([]int, len(s))
	for i := range is {
		is[i] = i
	}
	return is
}

// checkpointContainer SAVEs the server c talks to and copies its RDB file
// out of its container id.
func (d *Docker) checkpointContainer(ctx context.Context, c redis.Cmdable, id string) (*redisCheckpoint, error) {
	cfg, err := c.ConfigGet(ctx, "dir").Result()
	if err != nil {
		return nil, fmt.Errorf("docker redis checkpoint: %w", err)
	}
	dir := cfg["dir"]
	if dir == "" {
		return nil, fmt.Errorf("docker redis checkpoint: the server reports no data directory")
	}
	if err := c.Save(ctx).Err(); err != nil {
		return nil, fmt.Errorf("docker redis checkpoint: %w", err)
	}
	var out bytes.Buffer
	if err := d.pool.Client.DownloadFromContainer(id, dc.DownloadFromContainerOptions{
		Path: path.Join(dir, "dump.rdb"), OutputStream: &out, Context: ctx}); err != nil {
		return nil, fmt.Errorf("docker redis checkpoint: copy out: %w", err)
	}
	tr := tar.NewReader(&out)
	if _, err := tr.Next(); err != nil {
		return nil, fmt.Errorf("docker redis checkpoint: copy out: %w", err)
	}
	rdb, err := io.ReadAll(tr)
	if err != nil {
		return nil, fmt.Errorf("docker redis checkpoint: copy out: %w", err)
	}
	return &redisCheckpoint{dir: dir, rdb: rdb}, nil
}

// RollBack kills the Redis container, copies the checkpoint into the
// stopped container where its start loads data from — dump.rdb without
// persistence; with AOF, an append-only manifest whose only file is the
// checkpoint as its base (the lost writes' AOF files are then no longer
// read) — starts it again and waits until it answers. Without persistence
// the dump.rdb is removed once loaded, so a later restart comes up empty
// as before. On a Redis Cluster every master is rolled back this way, each
// container keeping its nodes.conf (its node id and slots), and RollBack
// returns once the cluster answers.
func (d *Docker) RollBack(ctx context.Context, target string) error {
	if target != TargetRedis {
		return fmt.Errorf("%w: only Redis loses data (MySQL's commits are durable)", ErrNoFaults)
	}
	d.mu.Lock()
	nodes, cps, ep := d.redisNodes, d.nodeCheckpoints, d.ep
	d.nodeCheckpoints = nil
	d.mu.Unlock()
	if len(nodes) > 0 {
		return d.rollBackCluster(ctx, nodes, cps, ep.RedisPassword)
	}
	r, err := d.role(target)
	if err != nil {
		return err
	}
	d.mu.Lock()
	cp := d.checkpoint
	d.checkpoint = nil
	d.mu.Unlock()
	if cp == nil {
		return fmt.Errorf("docker redis roll back: no checkpoint")
	}
	if err := d.Kill(ctx, target); err != nil {
		return err
	}
	id := r.res.Container.ID
	if err := d.copyCheckpointIn(ctx, id, cp); err != nil {
		return err
	}
	if err := d.Restart(ctx, target); err != nil {
		return fmt.Errorf("roll back: %w", err)
	}
	return d.removeLoadedDump(ctx, id, cp)
}

// rollBackCluster kills every master's container, copies each one's
// checkpoint in, starts them all again and waits until the cluster answers
// (waitClusterWritable).
func (d *Docker) rollBackCluster(ctx context.Context, nodes []*dockerRole, cps []*redisCheckpoint, password string) error {
	if len(cps) != len(nodes) {
		return fmt.Errorf("docker redis cluster roll back: no checkpoint")
	}
	addrs := make([]string, len(nodes))
	for i, r := range nodes {
		addrs[i] = r.addr
	}
	steps := []func(i int) error{
		func(i int) error { return d.kill(ctx, "redis node "+nodes[i].addr, nodes[i].res.Container.ID) },
		func(i int) error { return d.copyCheckpointIn(ctx, nodes[i].res.Container.ID, cps[i]) },
		func(i int) error {
			id := nodes[i].res.Container.ID
			if err := d.pool.Client.StartContainerWithContext(id, nil, ctx); err != nil {
				return fmt.Errorf("docker redis roll back: start: %w", err)
			}
			d.follow(nodes[i].cpu, id)
			return d.waitRedisNode(ctx, nodes[i].res, nodes[i].addr, password)
		},
		func(i int) error { return d.removeLoadedDump(ctx, nodes[i].res.Container.ID, cps[i]) },
	}
	for _, step := range steps {
		err := eachNode(indexes(nodes), func(i int) error {
			if err := step(i); err != nil {
				return fmt.Errorf("node %s: %w", nodes[i].addr, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return waitClusterWritable(ctx, "docker redis cluster roll back", addrs, password, dockerStartDeadline)
}

// aof reports whether the provider's Redis keeps an append-only file.
func (d *Docker) aof() bool {
	return d.RedisPersistence == PersistenceEverysec || d.RedisPersistence == PersistenceAlways
}

// copyCheckpointIn copies cp into the stopped container id where its
// start loads data from.
func (d *Docker) copyCheckpointIn(ctx context.Context, id string, cp *redisCheckpoint) error {
	now := time.Now()
	files := map[string][]byte{"dump.rdb": cp.rdb}
	if d.aof() {
		files = map[string][]byte{
			"appendonlydir/appendonly.aof.1.base.rdb": cp.rdb,
			"appendonlydir/appendonly.aof.manifest":   []byte("file appendonly.aof.1.base.rdb seq 1 type b\n"),
		}
	}
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	for name, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("docker redis roll back: %w", err)
		}
		if _, err := tw.Write(b); err != nil {
			return fmt.Errorf("docker redis roll back: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("docker redis roll back: %w", err)
	}
	if err := d.pool.Client.UploadToContainer(id, dc.UploadToContainerOptions{Path: cp.dir, InputStream: &in, Context: ctx}); err != nil {
		return fmt.Errorf("docker redis roll back: copy in: %w", err)
	}
	return nil
}

// removeLoadedDump removes the dump.rdb a server without persistence
// loaded, so that a later restart comes up empty as before.
func (d *Docker) removeLoadedDump(ctx context.Context, id string, cp *redisCheckpoint) error {
	if d.aof() {
		return nil
	}
	ex, err := d.pool.Client.CreateExec(dc.CreateExecOptions{Container: id, Cmd: []string{"rm", "-f", path.Join(cp.dir, "dump.rdb")}, Context: ctx})
	if err == nil {
		err = d.pool.Client.StartExec(ex.ID, dc.StartExecOptions{Detach: true, Context: ctx})
	}
	if err != nil {
		return fmt.Errorf("docker redis roll back: remove the loaded dump: %w", err)
	}
	return nil
}

var _ DataLoser = (*Docker)(nil)
