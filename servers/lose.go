package servers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/redis/go-redis/v9"
)

// DataLoser is a Faulter that can also roll a server's data back, as a
// crash under AOF everysec or a failover to a lagging replica does: the
// server comes back holding what it held some time ago, every write since
// lost, acknowledged or not. Only Redis loses data (MySQL is the system of
// record: its commits are durable). On a Redis Cluster the whole store
// loses data: every master is checkpointed and rolled back (clusterlose.go,
// dockerlose.go). Calls for one target must not overlap.
type DataLoser interface {
	// Checkpoint records what the target's server holds now. The server
	// keeps serving (Redis: a SAVE, a few ms on stockbench's data).
	Checkpoint(ctx context.Context, target string) error
	// RollBack kills the server (SIGKILL) and starts it again on the same
	// port holding what it held at the last Checkpoint, and returns once
	// it answers. Its run id changes, as after any restart.
	RollBack(ctx context.Context, target string) error
}

// checkpointFile is the name of the checkpoint in a local Redis's data
// directory.
const checkpointFile = "stockbench-checkpoint.rdb"

// redisRole is what a checkpoint of the local Redis needs.
func (l *Local) redisRole(target string) (*localRole, error) {
	if target != TargetRedis {
		return nil, fmt.Errorf("%w: only Redis loses data (MySQL's commits are durable)", ErrNoFaults)
	}
	r, err := l.role(target)
	if err != nil {
		return nil, err
	}
	if r.dir == "" {
		return nil, fmt.Errorf("%w: local redis has no data directory recorded", ErrNoFaults)
	}
	return r, nil
}

// Checkpoint SAVEs the local Redis into its data directory and keeps the
// file as the checkpoint; on a Redis Cluster, every master's
// (clusterlose.go).
func (l *Local) Checkpoint(ctx context.Context, target string) error {
	if nodes := l.clusterNodes(target); nodes != nil {
		return l.checkpointCluster(ctx, nodes)
	}
	r, err := l.redisRole(target)
	if err != nil {
		return err
	}
	return l.checkpointNode(ctx, r)
}

// checkpointNode SAVEs one Redis server and keeps its dump as the
// checkpoint.
func (l *Local) checkpointNode(ctx context.Context, r *localRole) error {
	c := redis.NewClient(&redis.Options{Addr: r.addr, Password: l.RedisPassword, MaxRetries: -1})
	defer c.Close()
	if err := c.Save(ctx).Err(); err != nil {
		return fmt.Errorf("local redis checkpoint: %w", err)
	}
	if err := os.Rename(filepath.Join(r.dir, "dump.rdb"), filepath.Join(r.dir, checkpointFile)); err != nil {
		return fmt.Errorf("local redis checkpoint: %w", err)
	}
	return nil
}

// RollBack kills the local Redis, puts the checkpoint where its start
// loads data from — dump.rdb without persistence; with AOF (Redis 7's
// multi-part AOF), a fresh append-only directory whose base is the
// checkpoint, the lost writes' AOF removed — and starts it again. The
// dump.rdb is removed once loaded, so a later restart without persistence
// comes up empty as before. On a Redis Cluster every master is rolled back
// (clusterlose.go).
func (l *Local) RollBack(ctx context.Context, target string) error {
	if nodes := l.clusterNodes(target); nodes != nil {
		return l.rollBackCluster(ctx, nodes)
	}
	r, err := l.redisRole(target)
	if err != nil {
		return err
	}
	snap, err := readCheckpoint(r)
	if err != nil {
		return err
	}
	if err := l.Kill(ctx, target); err != nil {
		return err
	}
	if err := l.restoreNode(r, snap); err != nil {
		return err
	}
	if err := l.respawnNode(ctx, r); err != nil {
		return err
	}
	return cleanCheckpoint(r)
}

// readCheckpoint reads a server's checkpoint.
func readCheckpoint(r *localRole) ([]byte, error) {
	snap, err := os.ReadFile(filepath.Join(r.dir, checkpointFile))
	if err != nil {
		return nil, fmt.Errorf("local redis roll back: no checkpoint: %w", err)
	}
	return snap, nil
}

// restoreNode puts snap where a killed server's start loads data from.
func (l *Local) restoreNode(r *localRole, snap []byte) error {
	var err error
	if l.RedisPersistence == PersistenceNone || l.RedisPersistence == "" {
		err = os.WriteFile(filepath.Join(r.dir, "dump.rdb"), snap, 0o600)
	} else {
		aof := filepath.Join(r.dir, "appendonlydir")
		err = errors.Join(os.RemoveAll(aof), os.Mkdir(aof, 0o700),
			os.WriteFile(filepath.Join(aof, "appendonly.aof.1.base.rdb"), snap, 0o600),
			os.WriteFile(filepath.Join(aof, "appendonly.aof.manifest"), []byte("file appendonly.aof.1.base.rdb seq 1 type b\n"), 0o600))
	}
	if err != nil {
		return fmt.Errorf("local redis roll back: %w", err)
	}
	return nil
}

// respawnNode starts a killed server again and records its new process.
func (l *Local) respawnNode(ctx context.Context, r *localRole) error {
	pid, err := r.respawn(ctx)
	if err != nil {
		return fmt.Errorf("roll back: restart: %w", err)
	}
	l.mu.Lock()
	r.pid, r.down = pid, false
	l.mu.Unlock()
	return nil
}

// cleanCheckpoint removes the loaded dump.rdb and the checkpoint.
func cleanCheckpoint(r *localRole) error {
	if err := os.Remove(filepath.Join(r.dir, "dump.rdb")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("local redis roll back: %w", err)
	}
	if err := os.Remove(filepath.Join(r.dir, checkpointFile)); err != nil {
		return fmt.Errorf("local redis roll back: %w", err)
	}
	return nil
}

var _ DataLoser = (*Local)(nil)
