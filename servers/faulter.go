package servers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
)

// Targets of process faults: the run's MySQL server and its Redis server.
const (
	TargetMySQL = "mysql"
	TargetRedis = "redis"
)

// Redis persistence settings (Options.RedisPersistence): what a Redis
// restart keeps.
const (
	// PersistenceNone keeps no append-only file: a restarted Redis is empty.
	PersistenceNone = "none"
	// PersistenceEverysec is AOF with appendfsync everysec.
	PersistenceEverysec = "everysec"
	// PersistenceAlways is AOF with appendfsync always.
	PersistenceAlways = "always"
)

// persistences lists the accepted RedisPersistence values.
var persistences = []string{PersistenceNone, PersistenceEverysec, PersistenceAlways}

// checkPersistence validates a persistence setting; empty means none.
func checkPersistence(p string) (string, error) {
	if p == "" {
		return PersistenceNone, nil
	}
	if slices.Contains(persistences, p) {
		return p, nil
	}
	return "", fmt.Errorf("RedisPersistence %q: want one of %s", p, strings.Join(persistences, ", "))
}

// persistenceArgs are redis-server's arguments for a persistence setting.
func persistenceArgs(p string) []string {
	switch p {
	case PersistenceEverysec, PersistenceAlways:
		return []string{"--appendonly", "yes", "--appendfsync", p}
	}
	return []string{"--appendonly", "no"}
}

// Faulter injects process faults into the servers a provider started. The
// local provider signals its child processes, the docker provider pauses,
// kills and starts its containers; external servers are not ours to
// touch, and clusters are refused. Every method is safe for concurrent use
// on different targets.
type Faulter interface {
	// Pause freezes the target's server (SIGSTOP; docker pause): its
	// connections stay open, nothing answers.
	Pause(ctx context.Context, target string) error
	// Resume lets a paused server run again (SIGCONT; docker unpause).
	Resume(ctx context.Context, target string) error
	// Kill kills the target's server with SIGKILL and returns once it is
	// gone; it stays down until Restart.
	Kill(ctx context.Context, target string) error
	// Restart kills the server (SIGKILL) unless Kill already did, starts it
	// again on the same data directory and port (MariaDB runs crash
	// recovery, Redis reloads its append-only file if it keeps one) and
	// returns once it accepts connections.
	Restart(ctx context.Context, target string) error
	// PID is the target's current server process (it changes on Restart),
	// or 0 when the provider has none to give (docker).
	PID(target string) int
}

// ErrNoFaults wraps the reason a provider cannot inject process faults.
var ErrNoFaults = errors.New("process faults not supported")

// FaulterOf returns the Faulter of a started provider: the local and
// docker providers; the external provider has none (only network faults,
// through a proxy, apply to servers stockbench does not run).
func FaulterOf(p Provider) (Faulter, error) {
	if f, ok := p.(Faulter); ok {
		return f, nil
	}
	return nil, fmt.Errorf("%w on the external backend: its servers are not stockbench's to pause or restart (network faults only)", ErrNoFaults)
}

// localRole is one single server of the local provider.
type localRole struct {
	pid     int
	down    bool
	respawn func(ctx context.Context) (pid int, err error)
	// dir and addr are a single Redis's data directory and address (for
	// Checkpoint and RollBack); empty for MySQL.
	dir, addr string
}

func (l *Local) setRole(target string, pid int, respawn func(ctx context.Context) (int, error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.roles == nil {
		l.roles = map[string]*localRole{}
	}
	l.roles[target] = &localRole{pid: pid, respawn: respawn}
}

func (l *Local) role(target string) (*localRole, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.roles[target]; r != nil {
		return r, nil
	}
	switch {
	case target == TargetRedis && l.RedisCluster > 0:
		return nil, fmt.Errorf("%w on a Redis Cluster (one node's fault is not the run's Redis stalling)", ErrNoFaults)
	case target == TargetMySQL && l.MySQLCluster > 0:
		return nil, fmt.Errorf("%w on a Galera cluster (one node's fault is not the run's MySQL stalling)", ErrNoFaults)
	case target != TargetRedis && target != TargetMySQL:
		return nil, fmt.Errorf("process fault target %q: want mysql or redis", target)
	}
	return nil, fmt.Errorf("local %s: not started", target)
}

// signal sends sig to the server's process group (Redis's forked children,
// such as an AOF rewrite, included).
func (l *Local) signal(target string, sig syscall.Signal) error {
	r, err := l.role(target)
	if err != nil {
		return err
	}
	l.mu.Lock()
	pid, down := r.pid, r.down
	l.mu.Unlock()
	if down {
		return fmt.Errorf("local %s: killed, not restarted", target)
	}
	if err := syscall.Kill(-pid, sig); err != nil {
		return fmt.Errorf("local %s: %s pid %d: %w", target, sig, pid, err)
	}
	return nil
}

// Pause stops the server with SIGSTOP.
func (l *Local) Pause(_ context.Context, target string) error {
	return l.signal(target, syscall.SIGSTOP)
}

// Resume continues it with SIGCONT.
func (l *Local) Resume(_ context.Context, target string) error {
	return l.signal(target, syscall.SIGCONT)
}

// Kill sends SIGKILL and waits until the process is gone (reaped).
func (l *Local) Kill(ctx context.Context, target string) error {
	r, err := l.role(target)
	if err != nil {
		return err
	}
	return l.kill(ctx, target, r)
}

// kill kills r's process group with SIGKILL and waits until its server is
// gone; target names it in errors.
func (l *Local) kill(ctx context.Context, target string, r *localRole) error {
	l.mu.Lock()
	pid, down := r.pid, r.down
	r.down = true
	l.mu.Unlock()
	if down {
		return nil
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("local %s: kill pid %d: %w", target, pid, err)
	}
	// waitReady's goroutine reaps the child; until then it answers signal 0.
	for syscall.Kill(pid, 0) == nil {
		if !clock.Sleep(ctx, 10*time.Millisecond) {
			return fmt.Errorf("local %s: pid %d not gone: %w", target, pid, ctx.Err())
		}
	}
	l.forgetPID(pid)
	return nil
}

func (l *Local) forgetPID(pid int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, c := range l.procs {
		if c.Process.Pid == pid {
			l.procs = append(l.procs[:i], l.procs[i+1:]...)
			return
		}
	}
}

// Restart kills the server unless it is down already, then runs it again
// on its data directory and port and waits until it answers.
func (l *Local) Restart(ctx context.Context, target string) error {
	if err := l.Kill(ctx, target); err != nil {
		return err
	}
	r, err := l.role(target)
	if err != nil {
		return err
	}
	pid, err := r.respawn(ctx)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	l.mu.Lock()
	r.pid, r.down = pid, false
	l.mu.Unlock()
	return nil
}

// PID is the server's current process id; 0 while it is down.
func (l *Local) PID(target string) int {
	r, err := l.role(target)
	if err != nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.down {
		return 0
	}
	return r.pid
}
