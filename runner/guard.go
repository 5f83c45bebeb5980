package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/stockbench/stockbench/internal/sysstat"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers"
)

// ErrRefused marks a run refused before it touched anything: the stores
// are held by another run, hold tables stockbench did not create, or
// cannot serve the planned pool. It is bad input, not a failed run.
var ErrRefused = errors.New("refused")

// refused wraps err so that errors.Is(err, ErrRefused) holds while the
// message stays err's.
type refused struct{ err error }

func (r refused) Error() string        { return r.err.Error() }
func (r refused) Unwrap() []error      { return []error{r.err, ErrRefused} }
func refuse(err error) error           { return refused{err} }
func refusef(f string, a ...any) error { return refused{fmt.Errorf(f, a...)} }

// lockTTL is the lifetime of the Redis run-lock key; a run renews it every
// third of that, and a killed run's key expires after it.
const lockTTL = 15 * time.Second

// ownedTables are every table a run creates and drops.
var ownedTables = append(append([]string(nil), inventory.Tables...), "calib_hot")

// Guard makes the stores safe to run on before anything is written: it
// takes the run lock (a MySQL GET_LOCK on a connection of its own, and a
// renewed Redis key), checks that no table stockbench would drop exists
// without its mark, and that the servers accept pool more connections
// (the lock's included). The returned release frees the lock; call it when
// the run ends. Errors of a refusal wrap ErrRefused.
func Guard(ctx context.Context, ep servers.Endpoints, conns servers.Conns, pool int) (release func() error, err error) {
	lockDB, err := sql.Open("mysql", ep.MySQLDSN)
	if err != nil {
		return nil, fmt.Errorf("run lock: %w", err)
	}
	lockDB.SetMaxOpenConns(1)
	lock, err := inventory.AcquireRunLock(ctx, lockDB, conns.Redis, inventory.Holder(), lockTTL)
	if err != nil {
		lockDB.Close()
		if errors.Is(err, inventory.ErrLocked) {
			return nil, refuse(err)
		}
		return nil, err
	}
	rel := func() error { return errors.Join(lock.Release(), lockDB.Close()) }
	defer func() {
		if err != nil {
			_ = rel()
		}
	}()
	if err := inventory.CheckOwned(ctx, conns.DB, ownedTables...); err != nil {
		if errors.Is(err, inventory.ErrNotOurs) {
			return nil, refuse(err)
		}
		return nil, err
	}
	if err := checkCapacity(ctx, conns, pool); err != nil {
		return nil, err
	}
	return rel, nil
}

// checkCapacity refuses a pool the servers cannot serve: MySQL's
// max_connections less the connections already open (the lock's among
// them), and Redis's maxclients where the server tells it.
func checkCapacity(ctx context.Context, conns servers.Conns, pool int) error {
	var maxConns, open int
	if err := conns.DB.QueryRowContext(ctx, "SELECT @@max_connections").Scan(&maxConns); err != nil {
		return fmt.Errorf("read max_connections: %w", err)
	}
	st, err := sysstat.MySQLStatus(ctx, conns.DB, "Threads_connected")
	if err != nil {
		return fmt.Errorf("read Threads_connected: %w", err)
	}
	n, ok := st["Threads_connected"]
	if !ok {
		return errors.New("read Threads_connected: the server has no such status variable")
	}
	open = int(n)
	// The connection that asked is one of the pool's own.
	if free := maxConns - open + 1; pool > free {
		return refusef("Pool %d needs %d MySQL connections but the server has max_connections=%d with %d open: lower Pool or raise max_connections",
			pool, pool, maxConns, open)
	}
	// Managed Redis servers may refuse CONFIG: then there is nothing to check.
	if v, err := conns.Redis.ConfigGet(ctx, "maxclients").Result(); err == nil {
		if mc, err := strconv.Atoi(v["maxclients"]); err == nil && mc > 0 {
			clients := 0
			if info, err := conns.Redis.Info(ctx, "clients").Result(); err == nil {
				clients = int(sysstat.ParseInfo(info)["connected_clients"])
			}
			if pool > mc-clients+1 {
				return refusef("Pool %d needs %d Redis connections but the server has maxclients=%d with %d connected: lower Pool or raise maxclients",
					pool, pool, mc, clients)
			}
		}
	}
	return nil
}
