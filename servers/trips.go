package servers

import (
	"context"
	"database/sql/driver"
	"errors"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RoundTrips counts the requests a run's pools send to each store: every
// MySQL command that waits for a reply (a query, an exec, a prepare, a
// prepared statement's execution, BEGIN, COMMIT, ROLLBACK, a ping) and
// every Redis command or pipeline (a pipeline is one round trip). The
// counts are atomic: the hot path pays one atomic add per request, never
// a lock or an allocation. Whoever shares the pools (the auditor, the live
// line, the probe) is counted too; callers take differences over a window.
type RoundTrips struct {
	MySQL atomic.Int64
	Redis atomic.Int64
}

// countingConnector wraps a MySQL connector so that its connections count
// their round trips.
type countingConnector struct {
	inner driver.Connector
	n     *atomic.Int64
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	full, ok := conn.(fullConn)
	if !ok {
		// A driver without the interfaces database/sql prefers is left
		// as it is, uncounted, rather than made to lose them.
		return conn, nil
	}
	return &countingConn{fullConn: full, n: c.n}, nil
}

func (c countingConnector) Driver() driver.Driver { return c.inner.Driver() }

// fullConn is what go-sql-driver/mysql's connection implements; the
// wrapper keeps every one of these so database/sql behaves the same.
type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

// countingConn counts a call when it reached the server: ErrSkip (the
// driver declined, database/sql prepares instead) is not a round trip.
type countingConn struct {
	fullConn
	n *atomic.Int64
}

func (c *countingConn) count(err error) {
	if !errors.Is(err, driver.ErrSkip) {
		c.n.Add(1)
	}
}

func (c *countingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.fullConn.PrepareContext(ctx, query)
	c.count(err)
	if err != nil {
		return nil, err
	}
	if fs, ok := s.(fullStmt); ok {
		return &countingStmt{fullStmt: fs, n: c.n}, nil
	}
	return s, nil
}

func (c *countingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.fullConn.BeginTx(ctx, opts)
	c.count(err)
	if err != nil {
		return nil, err
	}
	return countingTx{tx: tx, n: c.n}, nil
}

func (c *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.fullConn.ExecContext(ctx, query, args)
	c.count(err)
	return r, err
}

func (c *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.fullConn.QueryContext(ctx, query, args)
	c.count(err)
	return r, err
}

func (c *countingConn) Ping(ctx context.Context) error {
	err := c.fullConn.Ping(ctx)
	c.count(err)
	return err
}

type countingTx struct {
	tx driver.Tx
	n  *atomic.Int64
}

func (t countingTx) Commit() error   { t.n.Add(1); return t.tx.Commit() }
func (t countingTx) Rollback() error { t.n.Add(1); return t.tx.Rollback() }

// fullStmt is what go-sql-driver/mysql's prepared statement implements.
type fullStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
	driver.NamedValueChecker
}

// countingStmt counts executions; closing a statement sends a command
// the server does not answer, so it is not a round trip.
type countingStmt struct {
	fullStmt
	n *atomic.Int64
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.n.Add(1)
	return s.fullStmt.ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.n.Add(1)
	return s.fullStmt.QueryContext(ctx, args)
}

// redisTrips is a go-redis hook that counts commands and pipelines.
type redisTrips struct{ n *atomic.Int64 }

func (h redisTrips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h redisTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h redisTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}
