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
)

// redisCheckpoint is what the docker provider's Checkpoint saved: the
// server's data directory and the RDB image of its data.
type redisCheckpoint struct {
	dir string
	rdb []byte
}

// Checkpoint SAVEs the Redis container's data and copies the RDB file out
// of the container (the server keeps serving).
func (d *Docker) Checkpoint(ctx context.Context, target string) error {
	if target != TargetRedis {
		return fmt.Errorf("%w: only Redis loses data (MySQL's commits are durable)", ErrNoFaults)
	}
	r, err := d.role(target)
	if err != nil {
		return err
	}
	d.mu.Lock()
	ep := d.ep
	d.mu.Unlock()
	c := ep.RedisClient(nil)
	defer c.Close()
	cfg, err := c.ConfigGet(ctx, "dir").Result()
	if err != nil {
		return fmt.Errorf("docker redis checkpoint: %w", err)
	}
	dir := cfg["dir"]
	if dir == "" {
		return fmt.Errorf("docker redis checkpoint: the server reports no data directory")
	}
	if err := c.Save(ctx).Err(); err != nil {
		return fmt.Errorf("docker redis checkpoint: %w", err)
	}
	var out bytes.Buffer
	if err := d.pool.Client.DownloadFromContainer(r.res.Container.ID, dc.DownloadFromContainerOptions{
		Path: path.Join(dir, "dump.rdb"), OutputStream: &out, Context: ctx}); err != nil {
		return fmt.Errorf("docker redis checkpoint: copy out: %w", err)
	}
	tr := tar.NewReader(&out)
	if _, err := tr.Next(); err != nil {
		return fmt.Errorf("docker redis checkpoint: copy out: %w", err)
	}
	rdb, err := io.ReadAll(tr)
	if err != nil {
		return fmt.Errorf("docker redis checkpoint: copy out: %w", err)
	}
	d.mu.Lock()
	d.checkpoint = &redisCheckpoint{dir: dir, rdb: rdb}
	d.mu.Unlock()
	return nil
}

// RollBack kills the Redis container, copies the checkpoint into the
// stopped container where its start loads data from — dump.rdb without
// persistence; with AOF, an append-only manifest whose only file is the
// checkpoint as its base (the lost writes' AOF files are then no longer
// read) — starts it again and waits until it answers. Without persistence
// the dump.rdb is removed once loaded, so a later restart comes up empty
// as before.
func (d *Docker) RollBack(ctx context.Context, target string) error {
	if target != TargetRedis {
		return fmt.Errorf("%w: only Redis loses data (MySQL's commits are durable)", ErrNoFaults)
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
	now := time.Now()
	files := map[string][]byte{"dump.rdb": cp.rdb}
	aof := d.RedisPersistence == PersistenceEverysec || d.RedisPersistence == PersistenceAlways
	if aof {
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
	id := r.res.Container.ID
	if err := d.pool.Client.UploadToContainer(id, dc.UploadToContainerOptions{Path: cp.dir, InputStream: &in, Context: ctx}); err != nil {
		return fmt.Errorf("docker redis roll back: copy in: %w", err)
	}
	if err := d.Restart(ctx, target); err != nil {
		return fmt.Errorf("roll back: %w", err)
	}
	if aof {
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
